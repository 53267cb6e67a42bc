package main

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/aapclient"
	"github.com/aapd/aapd/store"
	"github.com/aapd/aapd/store/storetest"
	"github.com/aapd/aapd/webhooks"
)

const retentionDay = 24 * time.Hour

// sessionRows counts the rows of a session in every table with a
// session_id column (read from the catalog, so a table added later is
// counted too), webhook deliveries aside: they tell of the deletion.
func sessionRows(t *testing.T, dbURL, tenantID, sessionID string) map[string]int {
	t.Helper()
	var tables []string
	storetest.Scan(t, dbURL, `SELECT coalesce(array_agg(c.table_name::text ORDER BY c.table_name), '{}') FROM information_schema.columns c
		JOIN information_schema.tables t USING (table_schema, table_name)
		WHERE c.table_schema = current_schema() AND c.column_name = 'session_id' AND t.table_type = 'BASE TABLE'
		  AND c.table_name NOT LIKE 'webhook%'`, nil, &tables)
	out := map[string]int{}
	for _, table := range tables {
		var n int
		storetest.Scan(t, dbURL, `SELECT count(*) FROM `+table+` WHERE tenant_id = $1 AND session_id = $2`, []any{tenantID, sessionID}, &n)
		if n > 0 {
			out[table] = n
		}
	}
	return out
}

// A running aapd sweeps a tenant's idle sessions by its policy, every
// --retention-interval: each is gone from every table and from listings,
// fires session.deleted as a DELETE does, and is counted in /metrics; a
// session in use and a fork of a swept session keep everything they had.
func TestRetentionSweepsIdleSessions(t *testing.T) {
	t.Parallel()
	dbURL := storetest.NewDatabase(t)
	st := storetest.OpenURL(t, dbURL)
	rcv := newHookReceiver(t, nil)
	p := startProcEnv(t, dbURL, []string{"SSL_CERT_FILE=" + rcv.certFile(t), "AAPD_ADMIN_TOKEN=" + testOperatorToken,
		"AAPD_RETENTION_INTERVAL=1s"}, "--webhook-allow-private")
	tn := storetest.NewTenant(t, st)
	ctx := context.Background()
	secret, err := webhooks.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.WebhookEndpointCreate(ctx, store.WebhookEndpointCreateParams{
		TenantID: tn.ID, URL: rcv.srv.URL + "/hooks", Events: []string{store.WebhookSessionDeleted}, Secret: secret, Max: 20,
	}); err != nil {
		t.Fatal(err)
	}
	c := &client{t: t, base: p.base, key: tn.Key}
	op := &client{t: t, base: p.base + "/admin/v1", key: testOperatorToken}

	idle, used, kept := c.echoSession(nil), c.echoSession(nil), c.echoSession(nil)
	for _, sid := range []string{idle, used, kept} {
		c.say(sid, "hello "+sid)
	}
	var fork struct {
		ID string `json:"sessionId"`
	}
	c.do("POST", "/sessions/"+idle+"/fork", map[string]any{}).expect(t, http.StatusCreated).json(t, &fork)
	forkHistory := c.history(fork.ID, aap.HistoryFull)
	if len(forkHistory) < 2 {
		t.Fatalf("the fork's history: %v", forkHistory)
	}

	// Forty days pass for two sessions; one of them is used again
	// today, which makes it not idle.
	for _, sid := range []string{idle, used} {
		storetest.AgeSession(t, dbURL, tn.ID, sid, 40*retentionDay)
	}
	c.say(used, "still here")
	op.do("PUT", "/tenants/"+tn.Name+"/retention", map[string]any{"idleSessionDays": 30}).expect(t, http.StatusOK)

	waitFor(t, "the idle session to be swept", 20*time.Second, func() bool {
		return c.do("GET", "/sessions/"+idle, nil).StatusCode == http.StatusNotFound
	})
	if rows := sessionRows(t, dbURL, tn.ID, idle); len(rows) != 0 {
		t.Errorf("rows of the swept session left: %v", rows)
	}
	var ids []string
	for _, s := range c.listSessions(aapclient.ListOptions{Limit: 100}).Sessions {
		ids = append(ids, s.SessionID)
	}
	slices.Sort(ids)
	want := []string{used, kept, fork.ID}
	slices.Sort(want)
	if !slices.Equal(ids, want) {
		t.Errorf("listing after the sweep: %v, want %v", ids, want)
	}
	if got := c.history(fork.ID, aap.HistoryFull); fmt.Sprint(got) != fmt.Sprint(forkHistory) {
		t.Errorf("the fork's history after its source was swept:\n%v\nwant\n%v", got, forkHistory)
	}
	var usage struct {
		Totals struct {
			Turns int64 `json:"turns"`
		} `json:"totals"`
	}
	op.do("GET", "/tenants/"+tn.Name+"/usage", nil).expect(t, http.StatusOK).json(t, &usage)
	if usage.Totals.Turns != 4 {
		t.Errorf("usage after the sweep: %d turns, want 4 (the swept session's stay)", usage.Totals.Turns)
	}

	reqs := rcv.waitRequests(t, 1)
	verifyHook(t, reqs[0], secret)
	if typ, data := reqs[0].event(t); typ != store.WebhookSessionDeleted || data["sessionId"] != idle {
		t.Errorf("webhook %s %v, want session.deleted of %s", typ, data, idle)
	}

	metrics := (&client{t: t, base: p.base, key: testOperatorToken}).do("GET", "/metrics", nil).expect(t, http.StatusOK)
	body := string(metrics.body)
	for _, line := range []string{"aapd_retention_sessions_deleted_total 1", `aapd_retention_messages_deleted_total{kind="idle_session"} 2`} {
		if !strings.Contains(body, line+"\n") {
			t.Errorf("/metrics lacks %q", line)
		}
	}
	if !strings.Contains(p.logs.String(), `"msg":"retention batch"`) {
		t.Errorf("no retention batch logged:\n%s", p.logs.String())
	}
}

// aapd retention sweep --once sweeps by the server's default policy from
// the environment, as aapd serve would, and prints what it deleted; a
// tenant's own policy wins over the default.
func TestRetentionSweepOnceFromTheCLI(t *testing.T) {
	dbURL := storetest.NewDatabase(t)
	st := storetest.OpenURL(t, dbURL)
	ctx := context.Background()
	tn, own := storetest.NewTenant(t, st), storetest.NewTenant(t, st)
	idleSession := func(tenantID string) string {
		sess, _, err := st.SessionCreate(ctx, store.SessionCreateParams{TenantID: tenantID, AgentName: "echo",
			Messages: []aap.Message{aap.UserMessage("seed")}})
		if err != nil {
			t.Fatal(err)
		}
		storetest.AgeSession(t, dbURL, tenantID, sess.ID, 10*retentionDay)
		return sess.ID
	}
	gone, keptByOwn := idleSession(tn.ID), idleSession(own.ID)
	aapd(t, "retention", "set", "--database-url", dbURL, "--tenant", own.Name, "--idle-session-days", "30").ok(t)
	t.Setenv("AAPD_RETENTION_IDLE_SESSION_DAYS", "7")
	if out := aapd(t, "retention", "show", "--database-url", dbURL, "--tenant", tn.Name).ok(t).stdout; out != "idle sessions\t7 days (default)\nfull history\tforever\n" {
		t.Errorf("retention show: %q", out)
	}
	if out := aapd(t, "retention", "show", "--database-url", dbURL, "--tenant", own.Name).ok(t).stdout; out != "idle sessions\t30 days (tenant)\nfull history\tforever\n" {
		t.Errorf("retention show: %q", out)
	}
	aapd(t, "retention", "sweep", "--database-url", dbURL).failed(t, 2, "--once")
	aapd(t, "retention", "set", "--database-url", dbURL, "--tenant", own.Name, "--idle-session-days", "-1").failed(t, 2, "idle-session-days")
	out := aapd(t, "retention", "sweep", "--once", "--database-url", dbURL).ok(t).stdout
	if out != "sessions deleted\t1\nmessages deleted\t1\nsessions trimmed\t0\nmessages trimmed\t0\n" {
		t.Errorf("retention sweep --once: %q", out)
	}
	if _, err := st.SessionGet(ctx, tn.ID, gone); err == nil {
		t.Errorf("a session idle past the default is still there")
	}
	if _, err := st.SessionGet(ctx, own.ID, keptByOwn); err != nil {
		t.Errorf("a session within its tenant's own policy: %v", err)
	}
}

// A full history retention trimmed says where: GET history?type=full
// starts after the trimmed prefix and names it (trimmedThrough), the
// compacted history has no such member, and a fork inside the prefix is
// 409 history-trimmed.
func TestFullHistoryReadSaysWhereItWasTrimmed(t *testing.T) {
	t.Parallel()
	s := startParallelServer(t)
	tn := storetest.NewTenant(t, s.Store)
	c := &client{t: t, base: s.base, key: tn.Key}
	conv := trimmedConversation(t, s, tn.ID)
	var full struct {
		History        map[string][]aap.Message `json:"history"`
		TrimmedThrough *int64                   `json:"trimmedThrough"`
	}
	r := c.do("GET", "/sessions/"+conv.ID+"/history?type=full", nil)
	if r.StatusCode != http.StatusOK {
		t.Fatalf("full history: %d %s", r.StatusCode, r.body)
	}
	r.json(t, &full)
	if full.TrimmedThrough == nil || *full.TrimmedThrough != 6 || len(full.History["full"]) != 2 ||
		full.History["full"][0].Content.PlainText() != "q3" {
		t.Errorf("trimmed full history: %s; want trimmedThrough 6 and the 2 messages after it", r.body)
	}
	r = c.do("GET", "/sessions/"+conv.ID+"/history?type=compacted", nil)
	if r.StatusCode != http.StatusOK || strings.Contains(string(r.body), "trimmedThrough") {
		t.Errorf("compacted history: %d %s; want no trimmedThrough", r.StatusCode, r.body)
	}
	r = c.do("POST", "/sessions/"+conv.ID+"/fork", `{"at":{"message":3}}`)
	if r.StatusCode != http.StatusConflict || r.problem(t)["type"] != aapclient.ProblemHistoryTrimmed {
		t.Errorf("fork inside the trimmed prefix: %d %s; want 409 history-trimmed", r.StatusCode, r.body)
	}
}

// trimmedConversation is a session of four turns (q0 answered a0, … q3
// answered a3: seqs 1 to 8) whose full history retention trimmed through
// 6: it reads q3 and a3, and says it was trimmed through 6.
func trimmedConversation(t *testing.T, s *testServer, tenantID string) *storetest.Conversation {
	t.Helper()
	conv := storetest.NewConversation(t, s.Store, tenantID, store.SessionCreateParams{})
	for i := range 4 {
		conv.Say(fmt.Sprintf("q%d", i), fmt.Sprintf("a%d", i))
	}
	conv.Trim(storetest.URL(t), 6)
	return conv
}
