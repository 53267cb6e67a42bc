package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/aapclient"
	"github.com/aapd/aapd/auth/authtest"
	"github.com/aapd/aapd/store"
	"github.com/aapd/aapd/store/storetest"
)

// Erasing an end user (DELETE /admin/v1/tenants/{name}/owners/{sub}) with
// two real aapd processes on a database of the test's own, while one of the
// user's turns runs on one process and the erasure is sent to the other:
// afterwards no row of any table of the database (listed from the catalog,
// every row cast to text) holds the user's subject, the words of their
// messages (their schedule's included), their idempotency keys, their
// schedule's id or their sessions' ids — in the schedules and the webhook
// deliveries their sessions wrote as in the sessions' tables — but for the
// session.deleted webhook events the erasure queued (which name the
// deleted sessions, so the application can erase its own copies). Another
// owner's sessions stay whole message by message, that owner's fork of one
// of the user's sessions included (it keeps the history it forked), and
// the tenant's usage stays.
func TestErasingAnEndUserLeavesNoTraceOfThem(t *testing.T) {
	t.Parallel()
	dbURL := storetest.NewDatabase(t)
	st := storetest.OpenURL(t, dbURL)
	token := operatorToken()
	env := []string{"AAPD_ADMIN_TOKEN=" + token, "AAPD_WEBHOOK_ALLOW_PRIVATE=true"}
	procA, procB := startProcEnv(t, dbURL, env), startProcEnv(t, dbURL, env)
	ctx := t.Context()

	tn := storetest.NewTenant(t, st)
	mark := strings.TrimPrefix(store.NewSessionID(), "sess_")[20:]
	iss := "https://erasure.example/" + mark
	es := authtest.NewES256(t, "")
	if _, err := st.TokenIssuerCreate(ctx, store.TokenIssuerCreateParams{TenantID: tn.ID, Issuer: iss, Audience: "aapd",
		PublicKeys: []string{es.PublicPEM(t)}}); err != nil {
		t.Fatal(err)
	}
	subject, other := "auth0|erase/"+mark, "keep-"+mark
	as := func(base, sub string) *client {
		return &client{t: t, base: base, key: es.Sign(t, authtest.Claims(iss, "aapd", sub))}
	}
	subj, oth := as(procA.base, subject), as(procA.base, other)
	key := &client{t: t, base: procA.base, key: tn.Key}
	opA := &client{t: t, base: procA.base + "/admin/v1", key: token}
	opB := &client{t: t, base: procB.base + "/admin/v1", key: token}
	ownerPath := "/tenants/" + tn.Name + "/owners/" + url.PathEscape(subject)

	// Every event the tenant's webhook endpoint is sent.
	var (
		hookMu sync.Mutex
		hooks  []string
	)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		hookMu.Lock()
		hooks = append(hooks, string(b))
		hookMu.Unlock()
	}))
	t.Cleanup(receiver.Close)
	opA.do("POST", "/tenants/"+tn.Name+"/webhooks", map[string]any{"url": receiver.URL,
		"events": []string{"turn.completed", "turn.failed", "turn.requires_action", "session.deleted"}}).expect(t, http.StatusCreated)

	// The user's sessions: one created with an idempotency key, with a
	// turn sent with one, compacted; one whose turn runs during the
	// erasure, with a schedule; one an API key imported for them.
	createKey, turnKey := "create-"+mark, "turn-"+mark
	var created aap.CreateSessionResponse
	subj.do("POST", "/sessions", map[string]any{"agent": map[string]any{"name": "echo"}}, "Idempotency-Key", createKey).
		expect(t, http.StatusCreated).json(t, &created)
	s1 := created.SessionID
	subj.say(s1, "shared-"+mark) // messages 1 and 2: what the other owner's fork takes
	subj.do("POST", "/sessions/"+s1+"/turns", user("subjA-"+mark), "Idempotency-Key", turnKey).expect(t, http.StatusOK)
	for i := range 14 {
		subj.say(s1, fmt.Sprintf("subjB%d-%s\n/words 300", i, mark))
	}
	subj.compact(s1)
	if len(subj.compactions(s1, 10)) == 0 {
		t.Fatal("no compaction ran")
	}
	s2 := subj.echoSession(nil)
	subj.say(s2, "subjC-"+mark)
	// A schedule of theirs, whose turn's message is theirs too (a cron
	// that does not tick during the test: its turns would move the usage
	// the test checks).
	var sched struct {
		ScheduleID string `json:"scheduleId"`
	}
	subj.do("POST", "/sessions/"+s2+"/schedules", map[string]any{"cron": "0 9 1 1 *", "timezone": "Pacific/Kiritimati",
		"messages": []any{map[string]any{"role": "user", "content": "subjE-" + mark}}}).expect(t, http.StatusCreated).json(t, &sched)
	var doc bytes.Buffer
	if _, err := subj.api().Export(ctx, s1, &doc); err != nil {
		t.Fatal(err)
	}
	imported, err := key.api().Import(ctx, bytes.NewReader(doc.Bytes()), subject)
	if err != nil {
		t.Fatal(err)
	}
	s3 := imported.SessionID
	subjects := []string{s1, s2, s3}

	// The other owner's: a session of their own, and the fork an API key
	// made for them of the user's first session at its second message.
	o1 := oth.echoSession(nil)
	oth.say(o1, "other-"+mark)
	fork, err := key.api().Fork(ctx, s1, aapclient.ForkRequest{At: aapclient.AtMessage(2), Owner: other})
	if err != nil || fork.Owner != other {
		t.Fatalf("the fork for the other owner: %+v, %v", fork, err)
	}
	o2 := fork.SessionID
	oth.say(o2, "fork-"+mark)
	histories := func() map[string][]aap.Message {
		out := map[string][]aap.Message{}
		for _, sid := range []string{o1, o2} {
			for _, typ := range []aap.HistoryType{aap.HistoryFull, aap.HistoryCompacted} {
				out[sid+" "+string(typ)] = oth.history(sid, typ)
			}
		}
		return out
	}
	before := histories()
	if h := before[o2+" full"]; len(h) != 4 || !strings.Contains(h[0].Content.PlainText(), "shared-"+mark) {
		t.Fatalf("the fork's history: %+v", h)
	}

	// The user's copy of their data: their three sessions.
	r := opA.do("GET", ownerPath+"/export", nil).expect(t, http.StatusOK)
	if sessions := ownerDocumentSessions(t, r.body, subject); !reflect.DeepEqual(sorted(sessions), sorted(subjects)) {
		t.Errorf("the export holds sessions %v, want %v", sessions, subjects)
	}

	// What the search looks for, found before the erasure: the search
	// sees what it must not see after.
	words := []string{"subjA-" + mark, "subjB0-" + mark, "subjB3-" + mark, "subjC-" + mark, "subjE-" + mark}
	needles := append(append([]string{subject, createKey, turnKey, sched.ScheduleID}, words...), subjects...)
	if missing := missingStrings(t, dbURL, needles); len(missing) > 0 {
		t.Fatalf("before the erasure the search does not find %v", missing)
	}
	// The search covers the tables the user's sessions wrote beside their
	// own: their schedule, and the webhook deliveries of their turns.
	waitFor(t, "a webhook delivery of the user's turns", 20*time.Second, func() bool {
		for _, hit := range searchDatabase(t, dbURL, subjects) {
			if hit.table == "webhook_deliveries" {
				return true
			}
		}
		return false
	})
	held := map[string]bool{}
	for _, hit := range searchDatabase(t, dbURL, needles) {
		held[hit.table+" "+hit.needle] = true
	}
	for _, want := range []string{"schedules " + sched.ScheduleID, "schedules subjE-" + mark, "schedules " + s2} {
		if !held[want] {
			t.Errorf("before the erasure the search does not find %q in %q", strings.SplitN(want, " ", 2)[1], strings.SplitN(want, " ", 2)[0])
		}
	}

	// The tenant's usage; then a turn of the user's runs on process A.
	subj.say(s2, "subjD-"+mark)
	type totals struct{ Turns, InputTokens, OutputTokens int64 }
	usage := func() totals {
		var u struct {
			Totals totals `json:"totals"`
		}
		opA.do("GET", "/tenants/"+tn.Name+"/usage", nil).expect(t, http.StatusOK).json(t, &u)
		return u.Totals
	}
	usageBefore := usage()
	slow := subj.openTurn(s2, streamUser("delta", slowWords(3000, 50)))
	slow.read(3)

	// The erasure, through process B.
	var erased map[string]any
	opB.do("DELETE", ownerPath, nil).expect(t, http.StatusOK).json(t, &erased)
	for k, want := range map[string]float64{"sessions": 3, "cancelledTurns": 1, "forksKept": 1} {
		if erased[k] != want {
			t.Errorf("erasure answered %s = %v, want %v (%v)", k, erased[k], want, erased)
		}
	}
	for _, k := range []string{"messages", "compactedMessages", "compactions", "turns", "idempotencyKeys", "webhookDeliveries"} {
		if n, _ := erased[k].(float64); n < 1 {
			t.Errorf("erasure answered %s = %v, want some (%v)", k, erased[k], erased)
		}
	}
	if erased["owner"] != subject || erased["tenant"] != tn.Name {
		t.Errorf("erasure answered %v", erased)
	}

	// The running turn stops at once (it would run for minutes).
	ended := make(chan error, 1)
	go func() { _, err := slow.tryRead(-1); ended <- err }()
	select {
	case <-ended:
	case <-time.After(20 * time.Second):
		t.Fatal("the erased user's running turn still streams 20s after the erasure")
	}
	// Each session's session.deleted event reaches the endpoint.
	waitFor(t, "the session.deleted events", 20*time.Second, func() bool {
		hookMu.Lock()
		defer hookMu.Unlock()
		for _, sid := range subjects {
			if !slices.ContainsFunc(hooks, func(h string) bool {
				return strings.Contains(h, `"session.deleted"`) && strings.Contains(h, sid)
			}) {
				return false
			}
		}
		return true
	})

	// Nothing of the user's is left in any table, but the session.deleted
	// events; the fork's shared start is there, in the fork.
	for _, hit := range searchDatabase(t, dbURL, needles) {
		if hit.table == "webhook_deliveries" && slices.Contains(subjects, hit.needle) && strings.Contains(hit.row, ",session.deleted,") {
			continue
		}
		t.Errorf("%q is still in table %s: %s", hit.needle, hit.table, hit.row)
	}
	if missing := missingStrings(t, dbURL, []string{"shared-" + mark}); len(missing) > 0 {
		t.Errorf("the fork's history is gone from the database")
	}
	if got := histories(); !reflect.DeepEqual(got, before) {
		t.Errorf("the other owner's sessions changed:\nbefore %+v\nafter  %+v", before, got)
	}
	if rec := oth.getSession(o2); rec.ForkedFrom != nil {
		t.Errorf("the other owner's fork still names the erased session: %+v", rec.ForkedFrom)
	}
	// The erased turns' usage stays, the running one's included (as a
	// deletion of its session counts it).
	if got, want := usage(), (totals{usageBefore.Turns + 1, usageBefore.InputTokens, usageBefore.OutputTokens}); got != want {
		t.Errorf("usage after the erasure %+v, want %+v (before the running turn: %+v)", got, want, usageBefore)
	}
	oth.say(o2, "and on")
	for _, sid := range subjects {
		checkProblem(t, key.do("GET", "/sessions/"+sid, nil), http.StatusNotFound, "not-found")
	}
	if logs := procB.logs.String(); !strings.Contains(logs, `"action":"owner.erase"`) {
		t.Errorf("no audit line of the erasure:\n%s", logs)
	}

	// Again: nothing to erase; the export is empty. Bad input is refused.
	opB.do("DELETE", ownerPath, nil).expect(t, http.StatusOK).json(t, &erased)
	if erased["sessions"] != 0.0 || erased["messages"] != 0.0 {
		t.Errorf("a second erasure answered %v", erased)
	}
	r = opA.do("GET", ownerPath+"/export", nil).expect(t, http.StatusOK)
	if sessions := ownerDocumentSessions(t, r.body, subject); len(sessions) != 0 {
		t.Errorf("the export after the erasure holds %v", sessions)
	}
	checkProblem(t, opA.do("DELETE", "/tenants/"+tn.Name+"/owners/a%01b", nil), http.StatusBadRequest, "invalid-request")
	checkProblem(t, opA.do("GET", "/tenants/"+tn.Name+"/owners/"+strings.Repeat("x", 256)+"/export", nil), http.StatusBadRequest, "invalid-request")
	checkProblem(t, opA.do("DELETE", "/tenants/"+uniqueName("none")+"/owners/x", nil), http.StatusNotFound, "not-found")
	checkProblem(t, opA.do("GET", "/tenants/"+uniqueName("none")+"/owners/x/export", nil), http.StatusNotFound, "not-found")
}

// ownerDocumentSessions checks an end user's document (a tenant document:
// its tenant line, sessions and trailer) and returns the ids its sessions
// had, each of which must be the owner's.
func ownerDocumentSessions(t *testing.T, doc []byte, owner string) []string {
	t.Helper()
	var ids []string
	lines := bytes.Split(bytes.TrimSuffix(doc, []byte("\n")), []byte("\n"))
	for i, line := range lines {
		var l struct {
			Type     string `json:"type"`
			Sessions *int   `json:"sessions"`
			Session  struct {
				ID    string `json:"id"`
				Owner string `json:"owner"`
			} `json:"session"`
		}
		if err := json.Unmarshal(line, &l); err != nil {
			t.Fatalf("line %d: %v", i+1, err)
		}
		switch {
		case i == 0 && l.Type != "tenant", i == len(lines)-1 && (l.Type != "tenant-trailer" || l.Sessions == nil || *l.Sessions != len(ids)):
			t.Fatalf("line %d of the document: %s", i+1, line)
		case l.Type == "header":
			if l.Session.Owner != owner {
				t.Errorf("a session of %q in the document of %q", l.Session.Owner, owner)
			}
			ids = append(ids, l.Session.ID)
		}
	}
	return ids
}

func sorted(s []string) []string { s = slices.Clone(s); slices.Sort(s); return s }

// dbHit is a row of a table that holds one of the strings searched for.
type dbHit struct{ table, needle, row string }

// searchDatabase reads every row of every table of the database (the
// tables listed from the catalog: aapd's and any other) as text and
// returns those holding one of the needles.
func searchDatabase(t *testing.T, dbURL string, needles []string) []dbHit {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT format('%I.%I', n.nspname, c.relname), c.relname
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE c.relkind IN ('r', 'p') AND n.nspname NOT IN ('pg_catalog', 'information_schema', 'citus', 'columnar', 'columnar_internal')
		  AND n.nspname NOT LIKE 'pg_toast%' AND n.nspname NOT LIKE 'pg_temp%'
		ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	type table struct{ qualified, name string }
	tables, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (tb table, err error) {
		return tb, r.Scan(&tb.qualified, &tb.name)
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(tables) < 10 {
		t.Fatalf("the catalog lists %d tables: %v", len(tables), tables)
	}
	var hits []dbHit
	for _, tb := range tables {
		rows, err := conn.Query(ctx, `SELECT t::text FROM `+tb.qualified+` t`)
		if err != nil {
			t.Fatalf("read table %s: %v", tb.qualified, err)
		}
		texts, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatalf("read table %s: %v", tb.qualified, err)
		}
		for _, row := range texts {
			for _, n := range needles {
				if strings.Contains(row, n) {
					hits = append(hits, dbHit{table: tb.name, needle: n, row: row})
				}
			}
		}
	}
	return hits
}

// missingStrings returns the needles no row of the database holds.
func missingStrings(t *testing.T, dbURL string, needles []string) []string {
	t.Helper()
	hits := searchDatabase(t, dbURL, needles)
	var missing []string
	for _, n := range needles {
		if !slices.ContainsFunc(hits, func(h dbHit) bool { return h.needle == n }) {
			missing = append(missing, n)
		}
	}
	return missing
}

// aapd owners export and erase do from the command line what the admin API
// does: the end user's document, then their erasure, with its counts; a
// missing or impossible subject is a usage error (exit 2).
func TestCLIExportsAndErasesAnEndUser(t *testing.T) {
	t.Parallel()
	s := startParallelServer(t)
	db := storetest.URL(t)
	tenant := uniqueName("owners")
	aapd(t, "tenants", "create", "--database-url", db, tenant).ok(t)
	c := &client{t: t, base: s.base, key: strings.TrimSpace(aapd(t, "keys", "create", "--database-url", db, "--tenant", tenant).ok(t).stdout)}
	sid := c.echoSession(nil)
	c.say(sid, "hello")
	fork, err := c.api().Fork(t.Context(), sid, aapclient.ForkRequest{Owner: "cli|user/1"})
	if err != nil {
		t.Fatal(err)
	}
	out := aapd(t, "owners", "export", "--database-url", db, "--tenant", tenant, "cli|user/1").ok(t)
	if got := ownerDocumentSessions(t, []byte(out.stdout), "cli|user/1"); !reflect.DeepEqual(got, []string{fork.SessionID}) {
		t.Errorf("the CLI's export holds %v, want [%s]", got, fork.SessionID)
	}
	var erased map[string]any
	if err := json.Unmarshal([]byte(aapd(t, "owners", "erase", "--database-url", db, "--tenant", tenant, "cli|user/1").ok(t).stdout), &erased); err != nil {
		t.Fatal(err)
	}
	if erased["sessions"] != 1.0 || erased["messages"] != 0.0 {
		t.Errorf("the CLI's erasure answered %v (the fork's messages are its origin's)", erased)
	}
	checkProblem(t, c.do("GET", "/sessions/"+fork.SessionID, nil), http.StatusNotFound, "not-found")
	if h := c.history(sid, aap.HistoryFull); len(h) != 2 {
		t.Errorf("the key's own session after the erasure: %+v", h)
	}
	aapd(t, "owners", "erase", "--database-url", db, "--tenant", tenant).failed(t, 2, "SUB")
	aapd(t, "owners", "erase", "--database-url", db, "--tenant", tenant, "a\x01b").failed(t, 2, "subject")
	aapd(t, "owners", "export", "--database-url", db, "--tenant", uniqueName("none"), "x").failed(t, 1, "no tenant")
}
