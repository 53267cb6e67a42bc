package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/auth"
	"github.com/aapd/aapd/httpapi/agui"
	"github.com/aapd/aapd/store"
	"github.com/aapd/aapd/store/storetest"
)

// The AG-UI door (httpapi/agui, docs/protocols.md) end to end: the official
// npm client against a real server, and the door's rules through the
// OpenAPI-checked client.

// interopDir is the npm project that drives the door with @ag-ui/client.
const interopDir = "../../interop/agui"

// TestAGUIOfficialClient runs interop/agui/run.mjs — @ag-ui/client's
// HttpAgent in six scenarios: a text run, a second run on the same thread,
// a frontend tool round trip, a server tool, an error and an abort —
// against a real server. It installs the pinned packages (npm ci) when
// node_modules is missing or older than package-lock.json.
func TestAGUIOfficialClient(t *testing.T) {
	node, errNode := exec.LookPath("node")
	npm, errNpm := exec.LookPath("npm")
	if errNode != nil || errNpm != nil {
		t.Skip("node and npm are not installed: install Node.js 20 or later to run the AG-UI client interop test")
	}
	dir, err := filepath.Abs(interopDir)
	if err != nil {
		t.Fatal(err)
	}
	npmInstall(t, npm, dir)
	s := startParallelServer(t)
	c := s.newTenant(t)
	env := append(os.Environ(), "AAPD_URL="+s.base, "AAPD_KEY="+c.key, "SUPPRESS_TRANSFORMATION_WARNINGS=1")
	runScenarios(t, node, dir, "run.mjs", env, 5)
}

// aguiRun is a finished AG-UI run as the checked client saw it.
type aguiRun struct {
	response
	events []agui.Event
}

// types lists the run's event types.
func (r aguiRun) types() []string {
	out := make([]string, len(r.events))
	for i, e := range r.events {
		out[i] = e.Type()
	}
	return out
}

// last is the run's last event.
func (r aguiRun) last() agui.Event { return r.events[len(r.events)-1] }

// runAGUI posts a RunAgentInput to an agent and reads the whole stream.
func (c *client) runAGUI(agent string, in map[string]any) aguiRun {
	c.t.Helper()
	if _, ok := in["runId"]; !ok {
		in["runId"] = "run-" + store.NewTurnID()
	}
	if _, ok := in["messages"]; !ok {
		in["messages"] = []any{}
	}
	r := aguiRun{response: c.do("POST", "/ag-ui/agents/"+agent, in, "Accept", "text/event-stream")}
	if r.StatusCode != http.StatusOK {
		return r
	}
	sc := bufio.NewScanner(bytes.NewReader(r.body))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var e agui.Event
		if err := json.Unmarshal([]byte(data), &e); err != nil {
			c.t.Fatalf("event %q: %v", data, err)
		}
		r.events = append(r.events, e)
	}
	return r
}

// startAGUIRun sends a run of the echo agent on the thread, with one user
// message, and reads its stream up to the first text: the run is under
// way. It returns the open response, its reader, and the run's session and
// turn.
func (c *client) startAGUIRun(threadID, text string) (*http.Response, *bufio.Scanner, string, string) {
	c.t.Helper()
	body, _ := json.Marshal(map[string]any{"threadId": threadID, "runId": "r1", "messages": []any{aguiUser("u1", text)}})
	req, _ := http.NewRequest("POST", c.base+"/ag-ui/agents/echo", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+c.key)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() && !strings.Contains(sc.Text(), agui.TextMessageContent) {
	}
	return res, sc, res.Header.Get(agui.SessionIDHeader), res.Header.Get(agui.TurnIDHeader)
}

func aguiUser(id, text string) map[string]any {
	return map[string]any{"id": id, "role": "user", "content": text}
}

// A thread id names a session of the caller's tenant: the same id in
// another tenant is another session, and a session id of another tenant
// is not found.
func TestAGUIThreadIsASessionOfTheTenant(t *testing.T) {
	t.Parallel()
	s := startParallelServer(t)
	a, b := s.newTenant(t), s.newTenant(t)
	ra := a.runAGUI("echo", map[string]any{"threadId": "shared-name", "messages": []any{aguiUser("m1", "from a")}})
	ra.expect(t, http.StatusOK)
	rb := b.runAGUI("echo", map[string]any{"threadId": "shared-name", "messages": []any{aguiUser("m1", "from b")}})
	rb.expect(t, http.StatusOK)
	sa, sb := ra.Header.Get(agui.SessionIDHeader), rb.Header.Get(agui.SessionIDHeader)
	if sa == "" || sa == sb {
		t.Fatalf("sessions of thread shared-name: %q and %q, want two", sa, sb)
	}
	if h := b.history(sb, aap.HistoryFull); len(h) != 2 || h[0].Content.PlainText() != "from b" {
		t.Fatalf("tenant b's thread holds %v", h)
	}
	// Another tenant's session id as a thread id is a session b cannot see.
	r := b.runAGUI("echo", map[string]any{"threadId": sa, "messages": []any{aguiUser("m2", "intrusion")}})
	checkProblem(t, r.response, http.StatusNotFound, "not-found")
	if h := a.history(sa, aap.HistoryFull); len(h) != 2 {
		t.Fatalf("tenant a's session changed: %v", h)
	}
	// A's own session id is a thread of a's: the same conversation as AAP's.
	r = a.runAGUI("echo", map[string]any{"threadId": sa, "messages": []any{aguiUser("m2", "by session id")}})
	r.expect(t, http.StatusOK)
	if got := r.Header.Get(agui.SessionIDHeader); got != sa {
		t.Fatalf("session %q, want %q", got, sa)
	}
}

// The client sends the whole thread on each run; aapd stores only the
// messages it has not stored, told by their ids (its own answers by the ids
// it gave them).
func TestAGUIStoresOnlyTheMessagesItHasNotStored(t *testing.T) {
	t.Parallel()
	s := startParallelServer(t)
	c := s.newTenant(t)
	seed := []any{
		map[string]any{"id": "s1", "role": "system", "content": "Be brief."},
		map[string]any{"id": "u0", "role": "user", "content": "earlier"},
		map[string]any{"id": "a0", "role": "assistant", "content": "an earlier answer"},
		aguiUser("u1", "first"),
	}
	first := c.runAGUI("echo", map[string]any{"threadId": "t-dedup", "messages": seed})
	first.expect(t, http.StatusOK)
	var answerID string
	for _, e := range first.events {
		if e.Type() == agui.TextMessageStart {
			answerID, _ = e["messageId"].(string)
		}
	}
	thread := append(seed, map[string]any{"id": answerID, "role": "assistant", "content": "the client's copy"}, aguiUser("u2", "second"))
	second := c.runAGUI("echo", map[string]any{"threadId": "t-dedup", "messages": thread})
	second.expect(t, http.StatusOK)
	h := c.history(first.Header.Get(agui.SessionIDHeader), aap.HistoryFull)
	var got []string
	for _, m := range h {
		got = append(got, string(m.Role)+":"+m.Content.PlainText())
	}
	want := []string{"system:Be brief.", "user:earlier", "assistant:an earlier answer", "user:first", "assistant:Echo: first",
		"user:second", "assistant:Echo: second"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("history:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// Nothing new: refused, and nothing stored.
	again := c.runAGUI("echo", map[string]any{"threadId": "t-dedup", "messages": thread})
	checkProblem(t, again.response, http.StatusBadRequest, "invalid-request")
}

// A run is started or refused before its stream begins: refusals are
// problems with the statuses of a turn's, and a started run that fails
// ends with RUN_ERROR.
func TestAGUIRefusedRunsAreProblemsAndFailedRunsEndWithRunError(t *testing.T) {
	t.Parallel()
	s := startParallelServer(t)
	c, tenant := s.newTenantWithKey(t)
	cases := []struct {
		name   string
		c      *client
		agent  string
		body   any
		status int
		slug   string
	}{
		{"no thread id", c, "echo", map[string]any{"runId": "r", "messages": []any{aguiUser("u", "hi")}}, 400, "invalid-request"},
		{"not JSON", c, "echo", "{", 400, "invalid-request"},
		{"unknown agent", c, "nobody", map[string]any{"threadId": "t", "runId": "r", "messages": []any{aguiUser("u", "hi")}}, 400, "invalid-request"},
		{"unknown option", c, "echo", map[string]any{"threadId": "t-opt", "runId": "r", "messages": []any{aguiUser("u", "hi")},
			"forwardedProps": map[string]any{"agent": map[string]any{"options": map[string]any{"nope": "x"}}}}, 400, "invalid-request"},
		{"read-only key", s.keyWithScopes(t, tenant, auth.ScopeSessionsRead), "echo",
			map[string]any{"threadId": "t", "runId": "r", "messages": []any{aguiUser("u", "hi")}}, 403, "insufficient-scope"},
		{"no key", &client{t: t, base: s.base}, "echo", map[string]any{"threadId": "t", "runId": "r"}, 401, "unauthorized"},
	}
	for _, tc := range cases {
		r := tc.c.do("POST", "/ag-ui/agents/"+tc.agent, tc.body)
		p := checkProblem(t, r, tc.status, tc.slug)
		if tc.name == "unknown option" && p["field"] != "forwardedProps.agent.options.nope" {
			t.Errorf("%s: field %v", tc.name, p["field"])
		}
	}
	// A refused first run leaves no session behind.
	var list struct{ Sessions []any }
	c.do("GET", "/sessions", nil).expect(t, http.StatusOK).json(t, &list)
	if len(list.Sessions) != 0 {
		t.Fatalf("refused runs created sessions: %v", list.Sessions)
	}

	r := c.runAGUI("echo", map[string]any{"threadId": "t-fail", "messages": []any{aguiUser("u", "/error out of cheese")}})
	r.expect(t, http.StatusOK)
	last := r.last()
	if last.Type() != agui.RunError || last["code"] != agui.CodeTurnFailed || !strings.Contains(last["message"].(string), "out of cheese") {
		t.Fatalf("last event %v; events %v", last, r.types())
	}
}

// An untrusted server tool call waits for the client's permission: the run
// finishes with an interrupt per call, and the next run's resume entries
// grant or deny them.
func TestAGUIServerToolPermissionIsAnInterrupt(t *testing.T) {
	t.Parallel()
	s := startParallelServer(t)
	c := s.newTenant(t)
	props := map[string]any{"agent": map[string]any{"tools": []any{map[string]any{"name": "calculator"}}}}
	ask := func(thread string) (string, agui.Event) {
		r := c.runAGUI("echo", map[string]any{"threadId": thread, "forwardedProps": props,
			"messages": []any{aguiUser("u1", `/tool calculator {"expression":"2+2"}`)}})
		r.expect(t, http.StatusOK)
		return r.Header.Get(agui.SessionIDHeader), r.last()
	}
	_, fin := ask("t-grant")
	outcome, _ := fin["outcome"].(map[string]any)
	interrupts, _ := outcome["interrupts"].([]any)
	if fin.Type() != agui.RunFinished || outcome["type"] != "interrupt" || len(interrupts) != 1 {
		t.Fatalf("last event %v", fin)
	}
	callID := interrupts[0].(map[string]any)["toolCallId"].(string)
	granted := c.runAGUI("echo", map[string]any{"threadId": "t-grant", "forwardedProps": props,
		"messages": []any{aguiUser("u1", `/tool calculator {"expression":"2+2"}`)},
		"resume":   []any{map[string]any{"interruptId": callID, "status": "resolved"}}})
	granted.expect(t, http.StatusOK)
	var result agui.Event
	for _, e := range granted.events {
		if e.Type() == agui.ToolCallResult {
			result = e
		}
	}
	if result == nil || result["toolCallId"] != callID || !strings.Contains(result["content"].(string), "4") {
		t.Fatalf("no result of the granted call: %v", granted.types())
	}

	sid, fin := ask("t-deny")
	callID = fin["outcome"].(map[string]any)["interrupts"].([]any)[0].(map[string]any)["id"].(string)
	c.runAGUI("echo", map[string]any{"threadId": "t-deny", "messages": []any{aguiUser("u1", "x")},
		"resume": []any{map[string]any{"interruptId": callID, "status": "cancelled"}}}).expect(t, http.StatusOK)
	h := c.history(sid, aap.HistoryFull)
	if m := h[2]; m.Role != aap.RoleTool || m.Content.PlainText() != "Tool call denied" {
		t.Fatalf("history after a denial: %v", h)
	}
}

// A client that goes away aborts the run: its turn is cancelled, and the
// thread's next run, sent at once, is not refused as running — whichever
// replica it reaches.
func TestAGUIAbortCancelsTheTurn(t *testing.T) {
	t.Parallel()
	a, b := startParallelServer(t), startParallelServer(t)
	for _, tc := range []struct {
		name string
		next *testServer
	}{
		{"the next run on the same replica", a},
		{"the next run on another replica", b},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := a.newTenant(t)
			res, _, sid, turnID := c.startAGUIRun("t-abort", "/slow 50\n/words 1000")
			res.Body.Close() // the abort

			nc := &client{t: t, base: tc.next.base, key: c.key}
			next := nc.runAGUI("echo", map[string]any{"threadId": "t-abort", "messages": []any{aguiUser("u1", "x"), aguiUser("u2", "next")}})
			next.expect(t, http.StatusOK)
			if next.last().Type() != agui.RunFinished {
				t.Fatalf("the next run: %v", next.types())
			}
			var turn struct{ Status string }
			c.do("GET", "/sessions/"+sid+"/turns/"+turnID, nil).expect(t, http.StatusOK).json(t, &turn)
			if turn.Status != string(store.TurnCancelled) {
				t.Fatalf("the aborted turn is %q, want cancelled", turn.Status)
			}
		})
	}
}

// A thread's run sent while its previous run still ends on another replica
// waits for it (up to 5 s), as it would on the same replica, instead of
// being refused as running.
func TestAGUIRunWaitsForThePreviousRunOnAnyReplica(t *testing.T) {
	t.Parallel()
	a, b := startParallelServer(t), startParallelServer(t)
	c := a.newTenant(t)
	res, sc, sid, turnID := c.startAGUIRun("t-wait", "/slow 50\n/words 12")
	defer res.Body.Close()
	first := make(chan string, 1)
	go func() { // the first run's client reads on to its end
		last := ""
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "data: ") {
				last = sc.Text()
			}
		}
		first <- last
	}()

	nc := &client{t: t, base: b.base, key: c.key}
	next := nc.runAGUI("echo", map[string]any{"threadId": "t-wait", "messages": []any{aguiUser("u1", "x"), aguiUser("u2", "next")}})
	next.expect(t, http.StatusOK)
	if next.last().Type() != agui.RunFinished {
		t.Fatalf("the next run: %v", next.types())
	}
	if last := <-first; !strings.Contains(last, agui.RunFinished) {
		t.Errorf("the first run ended with %s", last)
	}
	var turn struct{ Status string }
	c.do("GET", "/sessions/"+sid+"/turns/"+turnID, nil).expect(t, http.StatusOK).json(t, &turn)
	if turn.Status != string(store.TurnCompleted) {
		t.Errorf("the first run's turn is %q, want completed", turn.Status)
	}
	h := c.history(sid, aap.HistoryFull)
	if len(h) != 4 || !strings.HasSuffix(h[1].Content.PlainText(), "word12") || h[2].Content.PlainText() != "next" {
		t.Errorf("the thread's history: %v", h)
	}
}

// An end user's threads are theirs: the same thread id of another user is
// another session, owned by that user, and another user's session id is
// not found.
func TestAGUIEndUsersThreadsAreTheirOwn(t *testing.T) {
	t.Parallel()
	s := startParallelServer(t)
	tn := newOwnedTenant(t, s)
	r1 := tn.user1.runAGUI("echo", map[string]any{"threadId": "chat", "messages": []any{aguiUser("m1", "one")}})
	r1.expect(t, http.StatusOK)
	r2 := tn.user2.runAGUI("echo", map[string]any{"threadId": "chat", "messages": []any{aguiUser("m1", "two")}})
	r2.expect(t, http.StatusOK)
	s1, s2 := r1.Header.Get(agui.SessionIDHeader), r2.Header.Get(agui.SessionIDHeader)
	if s1 == s2 {
		t.Fatalf("two users' thread chat share session %s", s1)
	}
	var rec struct{ Owner string }
	tn.key.do("GET", "/sessions/"+s1, nil).expect(t, http.StatusOK).json(t, &rec)
	if rec.Owner != "user1" {
		t.Fatalf("the session of user1's thread is owned by %q", rec.Owner)
	}
	r := tn.user2.runAGUI("echo", map[string]any{"threadId": s1, "messages": []any{aguiUser("m2", "intrusion")}})
	checkProblem(t, r.response, http.StatusNotFound, "not-found")
	if h := tn.user1.history(s1, aap.HistoryFull); len(h) != 2 {
		t.Fatalf("user1's session changed: %v", h)
	}
}

// A thread's run waiting for its previous turn, running on another
// replica, goes ahead when a database crash takes that turn with its claim
// (inflicted as the crash leaves it: the turn's rows gone, the session
// free) instead of being refused as running.
func TestAGUIRunGoesAheadWhenThePreviousTurnIsLost(t *testing.T) {
	t.Parallel()
	a, b := startParallelServer(t), startParallelServer(t)
	c := a.newTenant(t)
	tenantID := tenantIDOf(t, a, c)
	first := c.runAGUI("echo", map[string]any{"threadId": "t-lost", "messages": []any{aguiUser("u1", "hi")}})
	first.expect(t, http.StatusOK)
	sid := first.Header.Get(agui.SessionIDHeader)

	// A turn of the thread's session sent over AAP, whose claim the crash
	// can take (stream "none"), running on replica a.
	lostDone := make(chan struct{})
	go func() {
		defer close(lostDone)
		req, _ := http.NewRequest("POST", a.base+"/sessions/"+sid+"/turns",
			strings.NewReader(`{"stream":"none","messages":[{"role":"user","content":"/slow 1000\n/words 2"}]}`))
		req.Header.Set("Authorization", "Bearer "+c.key)
		req.Header.Set("Content-Type", "application/json")
		if res, err := http.DefaultClient.Do(req); err == nil {
			res.Body.Close()
		}
	}()
	turnID := storetest.ClaimedTurn(t, storetest.URL(t), tenantID, sid)

	nextDone := make(chan aguiRun, 1)
	go func() {
		nc := &client{t: t, base: b.base, key: c.key}
		nextDone <- nc.runAGUI("echo", map[string]any{"threadId": "t-lost", "messages": []any{aguiUser("u1", "hi"), aguiUser("u2", "next")}})
	}()
	time.Sleep(300 * time.Millisecond) // the run waits for the turn
	storetest.LoseClaim(t, storetest.URL(t), tenantID, sid, turnID)
	next := <-nextDone
	next.expect(t, http.StatusOK)
	if next.last().Type() != agui.RunFinished {
		t.Fatalf("the run after the lost turn: %v", next.types())
	}
	<-lostDone
	h := c.history(sid, aap.HistoryFull)
	if len(h) != 4 || h[2].Content.PlainText() != "next" {
		t.Errorf("the thread's history: %v", h)
	}
}
