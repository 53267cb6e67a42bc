package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/aapclient"
	"github.com/aapd/aapd/store/storetest"
	"github.com/aapd/aapd/transfer/transfertest"
)

// Fork, export and import over AAP v3 and the CLI (docs/lifecycle.md),
// against a real server.

// A fork is a new session of the caller's with the source's history up to
// the point — the whole session, the end of a turn, or its first N
// messages — its configuration, and no turns of its own; it names its
// origin.
func TestForkTakesTheSessionUpToThePoint(t *testing.T) {
	t.Parallel()
	s := startParallelServer(t)
	c := s.newTenant(t)
	ctx := t.Context()
	sid := c.echoSession([]aap.ServerToolRef{{Name: "clock"}})
	for _, text := range []string{"one", "two", "three"} {
		c.say(sid, text)
	}
	full := c.history(sid, aap.HistoryFull)
	turns, err := c.api().ListTurns(ctx, sid, aapclient.ListOptions{})
	if err != nil || len(turns.Turns) != 3 {
		t.Fatalf("turns %+v, %v", turns, err)
	}
	first := turns.Turns[2].TurnID

	// Raw, for the status and Location the document promises.
	r := c.do("POST", "/sessions/"+sid+"/fork", map[string]any{}).expect(t, http.StatusCreated)
	var whole aapclient.Session
	r.json(t, &whole)
	if loc := r.Header.Get("Location"); loc != "/sessions/"+whole.SessionID || whole.SessionID == sid {
		t.Errorf("Location %q for fork %s", loc, whole.SessionID)
	}
	if f := whole.ForkedFrom; f == nil || f.SessionID != sid || f.At.Message != int64(len(full)) {
		t.Errorf("forkedFrom %+v, want %s at %d", whole.ForkedFrom, sid, len(full))
	}
	if whole.Agent.Name != "echo" || len(whole.Agent.Tools) != 1 || whole.Status != "idle" {
		t.Errorf("fork record %+v", whole)
	}
	if got := c.history(whole.SessionID, aap.HistoryFull); !reflect.DeepEqual(got, full) {
		t.Errorf("whole fork's history %+v, want %+v", got, full)
	}
	if got, want := c.history(whole.SessionID, aap.HistoryCompacted), c.history(sid, aap.HistoryCompacted); !reflect.DeepEqual(got, want) {
		t.Errorf("whole fork's compacted history %+v, want %+v", got, want)
	}
	if list, err := c.api().ListTurns(ctx, whole.SessionID, aapclient.ListOptions{}); err != nil || len(list.Turns) != 0 {
		t.Errorf("the fork has turns: %+v, %v", list.Turns, err)
	}

	for _, tc := range []struct {
		name string
		at   *aapclient.ForkAt
		want int
	}{
		{"the end of the first turn", aapclient.AtTurn(first), 2},
		{"three messages", aapclient.AtMessage(3), 3},
		{"no message", aapclient.AtMessage(0), 0},
	} {
		fork, err := c.api().Fork(ctx, sid, aapclient.ForkRequest{At: tc.at})
		if err != nil {
			t.Fatalf("fork at %s: %v", tc.name, err)
		}
		if got := c.history(fork.SessionID, aap.HistoryFull); !reflect.DeepEqual(got, full[:tc.want]) {
			t.Errorf("fork at %s: history %+v, want %+v", tc.name, got, full[:tc.want])
		}
	}
	// The fork goes on by itself; its source does not move.
	fork, err := c.api().Fork(ctx, sid, aapclient.ForkRequest{At: aapclient.AtTurn(first)})
	if err != nil {
		t.Fatal(err)
	}
	c.say(fork.SessionID, "another path")
	if got := c.history(fork.SessionID, aap.HistoryFull); len(got) != 4 || got[2].Content.PlainText() != "another path" {
		t.Errorf("the fork's own turn: %+v", got)
	}
	if got := c.history(sid, aap.HistoryFull); !reflect.DeepEqual(got, full) {
		t.Errorf("the source changed: %+v", got)
	}
	// With an API key, ?owner= names the fork's end user.
	owned, err := c.api().Fork(ctx, sid, aapclient.ForkRequest{Owner: "alice"})
	if err != nil || owned.Owner != "alice" {
		t.Errorf("fork for alice: %+v, %v", owned, err)
	}

	// Points that name nothing of the session are the caller's mistakes.
	for _, tc := range []struct {
		body  any
		field string
	}{
		{map[string]any{"at": map[string]any{"turn": first, "message": 1}}, "at"},
		{map[string]any{"at": map[string]any{}}, "at"},
		{map[string]any{"at": map[string]any{"message": 99}}, "at.message"},
		{map[string]any{"at": map[string]any{"message": -1}}, "at.message"},
		{map[string]any{"at": map[string]any{"turn": "turn_nope"}}, "at.turn"},
		{map[string]any{"at": map[string]any{"message": "two"}}, "at.message"},
	} {
		p := checkProblem(t, c.do("POST", "/sessions/"+sid+"/fork", tc.body), http.StatusBadRequest, "invalid-request")
		if p["field"] != tc.field {
			t.Errorf("fork with %v: field %v, want %s", tc.body, p["field"], tc.field)
		}
	}
	checkProblem(t, c.do("POST", "/sessions/"+sid+"/fork?owner=", map[string]any{}), http.StatusBadRequest, "invalid-request")
}

// Pending tool calls are carried exactly at the session's end: the fork
// waits on them. At an earlier point where a call is open, the fork is a
// 409 tool-calls-open, which no retry resolves.
func TestForkCarriesPendingToolCallsOrRefusesThePoint(t *testing.T) {
	t.Parallel()
	s := startParallelServer(t)
	c := s.newTenant(t)
	ctx := t.Context()
	sid := c.echoSession(nil, "lookup")
	c.say(sid, `/tool lookup {"q":"x"}`)
	pending := c.getSession(sid).Pending
	if len(pending) != 1 {
		t.Fatalf("pending %+v", pending)
	}
	fork, err := c.api().Fork(ctx, sid, aapclient.ForkRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if fork.Status != "requires_action" || !reflect.DeepEqual(fork.Pending, pending) {
		t.Errorf("fork waits on %+v (%s), want %+v", fork.Pending, fork.Status, pending)
	}
	// The fork answers the call.
	c.turn(fork.SessionID, map[string]any{"messages": []any{map[string]any{"role": "tool", "toolCallId": pending[0].ToolCallID, "content": "42"}}})
	// The source answers it too; the point between call and answer is
	// refused.
	c.turn(sid, map[string]any{"messages": []any{map[string]any{"role": "tool", "toolCallId": pending[0].ToolCallID, "content": "7"}}})
	_, err = c.api().Fork(ctx, sid, aapclient.ForkRequest{At: aapclient.AtMessage(2)})
	if e := refusal(t, err, http.StatusConflict, "tool-calls-open"); e.Temporary() || !strings.Contains(e.Detail, pending[0].ToolCallID) {
		t.Errorf("refusal %+v: want a permanent conflict naming the call", e)
	}
}

// A session with a running turn forks at any point the turn has not
// written, without anything of the turn; the whole session is a 409 naming
// the turn, with Retry-After.
func TestForkNeverTakesTheRunningTurn(t *testing.T) {
	t.Parallel()
	s := startParallelServer(t)
	c := s.newTenant(t)
	ctx := t.Context()
	sid := c.echoSession(nil)
	c.say(sid, "before")
	st := &slowTurn{c: c, sid: sid}
	st.stream = c.openTurn(sid, streamUser("delta", slowWords(3000, 50)))
	st.turnID = st.stream.TurnID()
	t.Cleanup(st.stop)

	_, err := c.api().Fork(ctx, sid, aapclient.ForkRequest{})
	if e := refusal(t, err, http.StatusConflict, "turn-running"); e.TurnID != st.turnID || e.RetryAfter < time.Second {
		t.Errorf("refusal %+v: want the running turn and a Retry-After", e)
	}
	_, err = c.api().Fork(ctx, sid, aapclient.ForkRequest{At: aapclient.AtMessage(3)})
	refusal(t, err, http.StatusConflict, "turn-running")
	fork, err := c.api().Fork(ctx, sid, aapclient.ForkRequest{At: aapclient.AtMessage(2)})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.history(fork.SessionID, aap.HistoryFull); len(got) != 2 || got[0].Content.PlainText() != "before" {
		t.Errorf("fork during a turn: %+v", got)
	}
	// The export of the session holds it as it stood before the turn.
	var doc bytes.Buffer
	if _, err := c.api().Export(ctx, sid, &doc); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(doc.String(), `"leftOutTurn":"`+st.turnID+`"`) || strings.Contains(doc.String(), "/slow") {
		t.Errorf("export during a turn:\n%s", doc.String())
	}
}

// An end user forks only their own sessions, into their own.
func TestEndUsersForkTheirOwnSessions(t *testing.T) {
	t.Parallel()
	s := startParallelServer(t)
	tn := newOwnedTenant(t, s)
	sid := tn.user1.echoSession(nil)
	tn.user1.say(sid, "mine")
	fork, err := tn.user1.api().Fork(t.Context(), sid, aapclient.ForkRequest{})
	if err != nil || fork.Owner != "user1" {
		t.Fatalf("user1's fork: %+v, %v", fork, err)
	}
	p := checkProblem(t, tn.user1.do("POST", "/sessions/"+sid+"/fork?owner=user2", map[string]any{}), http.StatusBadRequest, "invalid-request")
	if p["field"] != "owner" {
		t.Errorf("a token forking for another: %v", p)
	}
	_, err = tn.user2.api().Fork(t.Context(), sid, aapclient.ForkRequest{})
	refusal(t, err, http.StatusNotFound, "not-found")
}

// export → import → export gives the same document but for ids and the
// checksum: every message with its position, turn and time, the turns'
// records, the compactions and what they replaced, the compacted history.
// Secret option values never leave: an export names them, an import over
// the API has none.
func TestExportImportExportOverTheAPI(t *testing.T) {
	t.Parallel()
	s := startParallelServer(t)
	a, b := s.newTenant(t), s.newTenant(t)
	ctx := t.Context()
	sid := a.echoSession(nil)
	for i := range 14 {
		a.say(sid, fmt.Sprintf("turn %d\n/words 300", i))
	}
	// A compaction of the session waits for the automatic one after the
	// last turn: then nothing changes the session any more.
	a.compact(sid)
	if len(a.compactions(sid, 10)) == 0 {
		t.Fatal("no compaction ran")
	}
	// Raw: the document's headers.
	r := a.do("GET", "/sessions/"+sid+"/export", nil).expect(t, http.StatusOK)
	if ct := r.Header.Get("Content-Type"); ct != "application/x-ndjson" || !strings.Contains(r.Header.Get("Content-Disposition"), sid+".jsonl") {
		t.Errorf("export headers %v", r.Header)
	}
	first := r.body
	imported, err := b.api().Import(ctx, bytes.NewReader(first), "")
	if err != nil {
		t.Fatal(err)
	}
	var second bytes.Buffer
	if _, err := b.api().Export(ctx, imported.SessionID, &second); err != nil {
		t.Fatal(err)
	}
	if d := transfertest.Diff(transfertest.Normalized(t, first), transfertest.Normalized(t, second.Bytes())); d != "" {
		t.Errorf("the round trip changed the document:\n%s", d)
	}
	for _, typ := range []aap.HistoryType{aap.HistoryFull, aap.HistoryCompacted} {
		if x, y := a.history(sid, typ), b.history(imported.SessionID, typ); !reflect.DeepEqual(x, y) {
			t.Errorf("%s history differs after the import", typ)
		}
	}
	b.say(imported.SessionID, "and on")

	secret := a.createSession(map[string]any{"agent": map[string]any{"name": "echo", "options": map[string]string{"token": "hunter2"}}})
	a.say(secret, "hi")
	var doc bytes.Buffer
	if _, err := a.api().Export(ctx, secret, &doc); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(doc.String(), "hunter2") || !strings.Contains(doc.String(), `"secrets":{"token":"set"}`) {
		t.Errorf("export of a secret:\n%s", doc.String())
	}
	rec, err := b.api().Import(ctx, bytes.NewReader(doc.Bytes()), "bob")
	if err != nil || rec.Owner != "bob" || rec.Agent.Options["token"] != "" {
		t.Errorf("import of a session with a secret: %+v, %v", rec, err)
	}
}

// A document that breaks a rule is a 400 naming the line and the rule, and
// nothing is written; one over --import-max-bytes is a 413.
func TestImportRefusesABrokenDocument(t *testing.T) {
	t.Parallel()
	s := startParallelServer(t, func(cfg *Config) { cfg.ImportMaxBytes = 8 << 10 })
	a, b := s.newTenant(t), s.newTenant(t)
	ctx := t.Context()
	sid := a.echoSession(nil)
	a.say(sid, "hello")
	var doc bytes.Buffer
	if _, err := a.api().Export(ctx, sid, &doc); err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(doc.String(), "\n")
	for _, tc := range []struct {
		name string
		doc  string
		line int
		rule string
	}{
		{"cut", strings.Join(lines[:len(lines)-2], ""), len(lines) - 1, "trailer"},
		{"edited", strings.Replace(doc.String(), "hello", "HELLO", 1), len(lines) - 1, "trailer"},
		{"an agent this server does not run", strings.Replace(doc.String(), `"name":"echo"`, `"name":"other"`, 1), 1, "reference"},
		{"an option the agent does not take", strings.Replace(doc.String(), `"name":"echo"`, `"name":"echo","options":{"colour":"red"}`, 1), 1, "reference"},
		{"not JSON", "hello\n", 1, "json"},
	} {
		_, err := b.api().Import(ctx, strings.NewReader(tc.doc), "")
		e := refusal(t, err, http.StatusBadRequest, "invalid-document")
		if e.Line != tc.line || e.Rule != tc.rule {
			t.Errorf("%s: line %d rule %q, want line %d rule %q (%s)", tc.name, e.Line, e.Rule, tc.line, tc.rule, e.Detail)
		}
	}
	if list := b.listSessions(aapclient.ListOptions{}); len(list.Sessions) != 0 {
		t.Errorf("refused imports left sessions: %+v", list.Sessions)
	}
	big := a.echoSession(nil)
	a.say(big, "/words 2000")
	doc.Reset()
	if _, err := a.api().Export(ctx, big, &doc); err != nil {
		t.Fatal(err)
	}
	_, err := b.api().Import(ctx, bytes.NewReader(doc.Bytes()), "")
	refusal(t, err, http.StatusRequestEntityTooLarge, "payload-too-large")
}

// A tenant moves to another database (from plain PostgreSQL to Citus, in
// production) with aapd tenants export and import: its limits, retention, issuers and
// every session, secret values sealed with the key both servers share,
// never its API keys. A session moves alone with aapd sessions export and
// import.
func TestCLIMovesATenantToAnotherDatabase(t *testing.T) {
	t.Parallel()
	s := startParallelServer(t)
	db := storetest.URL(t)
	tenant := uniqueName("moving")
	aapd(t, "tenants", "create", "--database-url", db, tenant).ok(t)
	aapd(t, "limits", "set", "--database-url", db, "--tenant", tenant, "--max-running-turns", "7").ok(t)
	aapd(t, "retention", "set", "--database-url", db, "--tenant", tenant, "--idle-session-days", "90").ok(t)
	iss := "https://" + uniqueName("login") + ".example"
	aapd(t, "issuers", "add", "--database-url", db, "--tenant", tenant, "--issuer", iss, "--audience", "app", "--jwks-url", iss+"/jwks").ok(t)
	c := &client{t: t, base: s.base, key: strings.TrimSpace(aapd(t, "keys", "create", "--database-url", db, "--tenant", tenant).ok(t).stdout)}
	plain := c.echoSession(nil)
	c.say(plain, "one")
	c.say(plain, "two")
	secret := c.createSession(map[string]any{"agent": map[string]any{"name": "echo", "options": map[string]string{"token": "hunter2"}}})
	c.say(secret, "/options")
	if _, err := c.api().Fork(t.Context(), plain, aapclient.ForkRequest{At: aapclient.AtMessage(2), Owner: "alice"}); err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	file := filepath.Join(dir, "tenant.jsonl")
	r := aapd(t, "tenants", "export", "--database-url", db, tenant, "--output", file).ok(t)
	if r.stdout != "" || !strings.Contains(r.stderr, "3 sessions") {
		t.Errorf("tenants export: stdout %q, stderr %q", r.stdout, r.stderr)
	}
	exported, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(exported, []byte("hunter2")) || bytes.Contains(exported, []byte(c.key)) {
		t.Error("the tenant's document holds a secret value or an API key")
	}

	// The other database's server has the same encryption key: the one
	// the first keeps in its database, no key being configured.
	var key string
	storetest.Scan(t, db, `SELECT encode(value, 'base64') FROM server_settings WHERE name = 'encryption_key'`, nil, &key)
	target := storetest.NewDatabase(t)
	r = aapd(t, "tenants", "import", "--database-url", target, "--encryption-key", key, file).ok(t)
	if row := strings.Fields(r.stdout); len(row) != 2 || row[1] != tenant || !strings.Contains(r.stderr, "3 sessions") {
		t.Fatalf("tenants import: stdout %q, stderr %q", r.stdout, r.stderr)
	}
	if rows := table(aapd(t, "keys", "list", "--database-url", target, "--tenant", tenant).ok(t).stdout); len(rows) != 1 {
		t.Errorf("keys moved with the tenant: %v", rows)
	}
	if out := aapd(t, "limits", "show", "--database-url", target, "--tenant", tenant).ok(t).stdout; !strings.Contains(out, "7") {
		t.Errorf("limits after the move: %s", out)
	}
	if out := aapd(t, "retention", "show", "--database-url", target, "--tenant", tenant).ok(t).stdout; out != "idle sessions\t90 days (tenant)\nfull history\tforever\n" {
		t.Errorf("retention after the move: %q", out)
	}
	if rows := table(aapd(t, "issuers", "list", "--database-url", target, "--tenant", tenant).ok(t).stdout); len(rows) != 2 || rows[1][1] != iss {
		t.Errorf("issuers after the move: %v", rows)
	}

	decoded, err := decodeEncryptionKey(key)
	if err != nil {
		t.Fatal(err)
	}
	moved := startServer(t, func(cfg *Config) { cfg.DatabaseURL, cfg.EncryptionKey = target, decoded })
	mc := &client{t: t, base: moved.base, key: strings.TrimSpace(aapd(t, "keys", "create", "--database-url", target, "--tenant", tenant).ok(t).stdout)}
	list := mc.listSessions(aapclient.ListOptions{})
	if got, want := sessionIDs(t, mc, ""), sessionIDs(t, c, ""); !reflect.DeepEqual(got, want) {
		t.Fatalf("sessions after the move: %v, want the same ids as before %v", got, want)
	}
	for _, sess := range list.Sessions {
		switch {
		case sess.Owner == "alice":
			if sess.ForkedFrom == nil || sess.ForkedFrom.SessionID != plain || len(mc.history(sess.SessionID, aap.HistoryFull)) != 2 {
				t.Errorf("the fork moved without its history or origin: %+v", sess)
			}
		case len(sess.Agent.Options) == 0:
			if got := mc.history(sess.SessionID, aap.HistoryFull); !reflect.DeepEqual(got, c.history(plain, aap.HistoryFull)) {
				t.Errorf("session %s moved with %+v", sess.SessionID, got)
			}
		}
	}
	// Exported again, the tenant's document is the same but for ids and
	// checksums (its sessions listed in another order: newest id first).
	again := filepath.Join(dir, "again.jsonl")
	aapd(t, "tenants", "export", "--database-url", target, "--encryption-key", key, tenant, "--output", again).ok(t)
	second, err := os.ReadFile(again)
	if err != nil {
		t.Fatal(err)
	}
	if x, y := tenantDocument(t, exported), tenantDocument(t, second); !reflect.DeepEqual(x, y) {
		t.Errorf("the tenant's document changed with the move:\n%s\n%s", strings.Join(x, "\n"), strings.Join(y, "\n"))
	}
	// The secret moved sealed, and still opens: the echo agent says it is
	// set.
	for _, sess := range list.Sessions {
		if len(sess.Agent.Options) > 0 {
			if got := mc.say(sess.SessionID, "/options"); !strings.Contains(fmt.Sprint(got.Messages), "token=set") {
				t.Errorf("the moved secret: %+v", got.Messages)
			}
		}
	}

	// One session, alone, with another owner.
	one := filepath.Join(dir, "one.jsonl")
	aapd(t, "sessions", "export", "--database-url", db, "--tenant", tenant, plain, "--output", one).ok(t)
	id := strings.TrimSpace(aapd(t, "sessions", "import", "--database-url", db, "--tenant", tenant, "--owner", "bob", one).ok(t).stdout)
	if rec := c.getSession(id); rec.Owner != "bob" || len(c.history(id, aap.HistoryFull)) != 4 {
		t.Errorf("imported session %+v", rec)
	}

	// A broken document is refused whole: no tenant is left behind.
	cut := filepath.Join(dir, "cut.jsonl")
	if err := os.WriteFile(cut, exported[:len(exported)-40], 0o600); err != nil {
		t.Fatal(err)
	}
	third := storetest.NewDatabase(t)
	aapd(t, "tenants", "import", "--database-url", third, "--encryption-key", key, cut).failed(t, 2, "trailer")
	aapd(t, "limits", "show", "--database-url", third, "--tenant", tenant).failed(t, 1, "no tenant named")
	// Nor when the tenant's issuer is another's there.
	aapd(t, "tenants", "import", "--database-url", target, "--encryption-key", key, "--name", tenant+"-copy", file).failed(t, 1, "already registered")
	aapd(t, "limits", "show", "--database-url", target, "--tenant", tenant+"-copy").failed(t, 1, "no tenant named")
	aapd(t, "sessions", "export", "--database-url", db, "--tenant", tenant, "sess_nope").failed(t, 1, "no session")
}

// tenantDocument is a tenant document normalized: its tenant line, and
// each session's document normalized (transfertest.Normalized), in order
// of their content.
func tenantDocument(t *testing.T, doc []byte) []string {
	t.Helper()
	lines := strings.SplitAfter(strings.TrimSuffix(string(doc), "\n"), "\n")
	var head map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &head); err != nil {
		t.Fatal(err)
	}
	delete(head["tenant"].(map[string]any), "createdAt") // the tenant's, where it was imported
	first, _ := json.Marshal(head)
	out := []string{string(first)}
	var sessions []string
	for start, i := 1, 1; i < len(lines)-1; i++ {
		if strings.HasPrefix(lines[i], `{"type":"trailer"`) {
			norm, _ := json.Marshal(transfertest.Normalized(t, []byte(strings.Join(lines[start:i+1], ""))))
			sessions, start = append(sessions, string(norm)), i+1
		}
	}
	sort.Strings(sessions)
	return append(out, sessions...)
}
