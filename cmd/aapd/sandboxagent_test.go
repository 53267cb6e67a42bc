package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aapd/aapd/httpapi/sandboxagent"
	"github.com/aapd/aapd/store/storetest"
)

// The sandbox-agent door (docs/protocols.md), end to end: every exchange
// goes through client.do, which holds it to the door's own document
// (openapitest.SandboxAgent, cmd/aapd/openapi_test.go).

// saPath is a path of the door's API.
func saPath(path string) string { return sandboxagent.Prefix + "/v1" + path }

// sa sends a request to the door.
func (c *client) sa(method, path string, body any, headers ...string) response {
	c.t.Helper()
	return c.do(method, saPath(path), body, headers...)
}

// saEvent is a UniversalEvent as a client reads it.
type saEvent struct {
	EventID         string          `json:"event_id"`
	Sequence        int64           `json:"sequence"`
	Time            string          `json:"time"`
	SessionID       string          `json:"session_id"`
	NativeSessionID string          `json:"native_session_id"`
	Synthetic       bool            `json:"synthetic"`
	Source          string          `json:"source"`
	Type            string          `json:"type"`
	Data            json.RawMessage `json:"data"`
	Raw             json.RawMessage `json:"raw"`
}

// saData is the members of every event's data the tests look at.
type saData struct {
	Item *struct {
		ItemID  string `json:"item_id"`
		Kind    string `json:"kind"`
		Role    string `json:"role"`
		Status  string `json:"status"`
		Content []struct {
			Type   string `json:"type"`
			Text   string `json:"text"`
			Name   string `json:"name"`
			Output string `json:"output"`
			Label  string `json:"label"`
		} `json:"content"`
	} `json:"item"`
	Delta        string   `json:"delta"`
	PermissionID string   `json:"permission_id"`
	QuestionID   string   `json:"question_id"`
	Prompt       string   `json:"prompt"`
	Options      []string `json:"options"`
	Status       string   `json:"status"`
	Response     string   `json:"response"`
	Reason       string   `json:"reason"`
	Message      string   `json:"message"`
}

func (e saEvent) data(t testing.TB) saData {
	t.Helper()
	var d saData
	if err := json.Unmarshal(e.Data, &d); err != nil {
		t.Fatalf("event %d data %s: %v", e.Sequence, e.Data, err)
	}
	return d
}

// kind is the event's type, with its item's kind and role (and a status
// item's label), or its status: what the tests compare sequences of.
func (e saEvent) kind(t testing.TB) string {
	d := e.data(t)
	switch {
	case d.Item != nil && d.Item.Kind == "status":
		return e.Type + ":" + d.Item.Content[0].Label
	case d.Item != nil:
		return e.Type + ":" + d.Item.Kind + "/" + d.Item.Role
	case d.Status != "":
		return e.Type + ":" + d.Status
	}
	return e.Type
}

func kinds(t testing.TB, events []saEvent) []string {
	out := make([]string, len(events))
	for i, e := range events {
		out[i] = e.kind(t)
	}
	return out
}

// saPage reads one page of a session's events.
func (c *client) saPage(name, query string) ([]saEvent, bool) {
	c.t.Helper()
	var page struct {
		Events  []saEvent `json:"events"`
		HasMore bool      `json:"hasMore"`
	}
	c.sa("GET", "/sessions/"+name+"/events"+query, nil).expect(c.t, http.StatusOK).json(c.t, &page)
	return page.Events, page.HasMore
}

// saAll reads all of a session's events in pages of limit.
func (c *client) saAll(name string, limit int) []saEvent {
	c.t.Helper()
	var all []saEvent
	for {
		offset := int64(0)
		if len(all) > 0 {
			offset = all[len(all)-1].Sequence
		}
		page, more := c.saPage(name, fmt.Sprintf("?offset=%d&limit=%d", offset, limit))
		all = append(all, page...)
		if !more {
			return all
		}
		if len(page) == 0 {
			c.t.Fatal("hasMore with an empty page")
		}
	}
}

// saStream posts a message to messages/stream and reads its events to the
// stream's end.
func (c *client) saStream(name, message string) []saEvent {
	c.t.Helper()
	r := c.sa("POST", "/sessions/"+name+"/messages/stream", map[string]any{"message": message}, "Accept", "text/event-stream")
	r.expect(c.t, http.StatusOK)
	return sseUniversal(c.t, r.body)
}

// sseUniversal reads the UniversalEvents of a stream's body.
func sseUniversal(t testing.TB, body []byte) []saEvent {
	t.Helper()
	var out []saEvent
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			var e saEvent
			if err := json.Unmarshal([]byte(data), &e); err != nil {
				t.Fatalf("stream event %q: %v", data, err)
			}
			out = append(out, e)
		}
	}
	return out
}

// terminal reports whether the SDK's reference takes the event as the end
// of a turn.
func terminal(t testing.TB, e saEvent) bool {
	switch e.Type {
	case "session.ended", "error", "agent.unparsed", "permission.requested", "question.requested":
		return true
	case "item.completed":
		return e.kind(t) == "item.completed:turn.completed"
	}
	return false
}

// saWaitTurn waits until the session's log holds a turn's end after offset
// and returns the events after offset.
func (c *client) saWaitTurn(name string, offset int64) []saEvent {
	c.t.Helper()
	var events []saEvent
	waitFor(c.t, "the turn's end in the log", 10*time.Second, func() bool {
		events, _ = c.saPage(name, fmt.Sprintf("?offset=%d", offset))
		return len(events) > 0 && terminal(c.t, events[len(events)-1])
	})
	return events
}

// saProblem checks a refusal: the seed's ProblemDetails, of an error type.
func saProblem(t *testing.T, r response, status int, errorType string) {
	t.Helper()
	if r.StatusCode != status {
		t.Fatalf("%s %s: status %d, want %d: %s", r.Request.Method, r.Request.URL.Path, r.StatusCode, status, r.body)
	}
	var p struct {
		Type, Title, Detail string
		Status              int
	}
	r.json(t, &p)
	if p.Type != "urn:sandbox-agent:error:"+errorType || p.Status != status || p.Title == "" || p.Detail == "" {
		t.Fatalf("%s %s: problem %s, want type %s", r.Request.Method, r.Request.URL.Path, r.body, errorType)
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("problem Content-Type %q", ct)
	}
}

// saCreate creates a session of the echo agent named name.
func (c *client) saCreate(name string, body map[string]any) string {
	c.t.Helper()
	if body == nil {
		body = map[string]any{}
	}
	if _, ok := body["agent"]; !ok {
		body["agent"] = "echo"
	}
	var out struct {
		Healthy         bool   `json:"healthy"`
		NativeSessionID string `json:"nativeSessionId"`
	}
	c.sa("POST", "/sessions/"+name, body).expect(c.t, http.StatusOK).json(c.t, &out)
	if !out.Healthy || !strings.HasPrefix(out.NativeSessionID, "sess_") {
		c.t.Fatalf("create %s: %+v", name, out)
	}
	return out.NativeSessionID
}

// The agents are the server's (GET /meta): installed, nothing to install;
// any other is a 404 agent_not_installed, and modes and models of one are
// a 400 unsupported_agent.
func TestSandboxAgentAgentsAreTheConfiguredOnes(t *testing.T) {
	t.Parallel()
	s := startParallelServer(t)
	anon := &client{t: t, base: s.base}
	var health struct{ Status string }
	anon.sa("GET", "/health", nil).expect(t, http.StatusOK).json(t, &health)
	var list struct {
		Agents []struct {
			ID           string
			Installed    bool
			Capabilities map[string]bool
		}
	}
	anon.sa("GET", "/agents", nil).expect(t, http.StatusOK).json(t, &list)
	if health.Status != "ok" || len(list.Agents) != 1 || list.Agents[0].ID != "echo" || !list.Agents[0].Installed ||
		!list.Agents[0].Capabilities["questions"] || !list.Agents[0].Capabilities["permissions"] {
		t.Fatalf("health %+v, agents %+v", health, list)
	}
	anon.sa("POST", "/agents/echo/install", map[string]any{"reinstall": true}).expect(t, http.StatusNoContent)
	saProblem(t, anon.sa("POST", "/agents/claude/install", map[string]any{}), http.StatusNotFound, "agent_not_installed")
	var modes struct{ Modes []struct{ ID string } }
	anon.sa("GET", "/agents/echo/modes", nil).expect(t, http.StatusOK).json(t, &modes)
	var models struct {
		DefaultModel string
		Models       []struct{ ID string }
	}
	anon.sa("GET", "/agents/echo/models", nil).expect(t, http.StatusOK).json(t, &models)
	if len(modes.Modes) != 1 || modes.Modes[0].ID != "default" || models.DefaultModel != "echo" || len(models.Models) != 1 {
		t.Fatalf("modes %+v, models %+v", modes, models)
	}
	saProblem(t, anon.sa("GET", "/agents/codex/modes", nil), http.StatusBadRequest, "unsupported_agent")
	saProblem(t, anon.sa("GET", "/agents/codex/models", nil), http.StatusBadRequest, "unsupported_agent")
	// The document the door is held to is served.
	var doc struct{ Info struct{ Version string } }
	anon.do("GET", sandboxagent.DocumentPath, nil).expect(t, http.StatusOK).json(t, &doc)
	if doc.Info.Version != "0.1.7" {
		t.Errorf("document version %q", doc.Info.Version)
	}
}

// A session is named by the id the client chooses, among the caller's
// sessions: taken, it is a 409 session_already_exists; the listing echoes
// what the client set (agentMode, permissionMode, variant, model).
func TestSandboxAgentSessionIDsAreTheClients(t *testing.T) {
	t.Parallel()
	s := startParallelServer(t)
	c, other := s.newTenant(t), s.newTenant(t)
	sid := c.saCreate("chat-1", map[string]any{"agentMode": "build", "permissionMode": "bypass", "variant": "high", "model": "echo"})
	saProblem(t, c.sa("POST", "/sessions/chat-1", map[string]any{"agent": "echo"}), http.StatusConflict, "session_already_exists")
	other.saCreate("chat-1", nil) // another tenant's name space
	saProblem(t, c.sa("POST", "/sessions/chat-2", map[string]any{"agent": "claude"}), http.StatusBadRequest, "unsupported_agent")
	saProblem(t, c.sa("POST", "/sessions/chat-2", map[string]any{"agent": "echo", "permissionMode": "plan"}), http.StatusBadRequest, "mode_not_supported")
	saProblem(t, c.sa("POST", "/sessions/chat-2", map[string]any{"agent": "echo", "model": "gpt-9"}), http.StatusBadRequest, "invalid_request")
	saProblem(t, c.sa("POST", "/sessions/"+sid, map[string]any{"agent": "echo"}), http.StatusBadRequest, "invalid_request")
	saProblem(t, c.sa("POST", "/sessions/chat-2", map[string]any{}), http.StatusBadRequest, "invalid_request")
	plain := c.saCreate("chat-2", nil)

	var list struct {
		Sessions []map[string]any `json:"sessions"`
	}
	c.sa("GET", "/sessions", nil).expect(t, http.StatusOK).json(t, &list)
	want := []map[string]any{
		{"sessionId": "chat-2", "agent": "echo", "agentMode": "default", "permissionMode": "default", "ended": false,
			"eventCount": float64(1), "model": "echo", "nativeSessionId": plain},
		{"sessionId": "chat-1", "agent": "echo", "agentMode": "build", "permissionMode": "bypass", "ended": false,
			"eventCount": float64(1), "model": "echo", "nativeSessionId": sid, "variant": "high"},
	}
	if !reflect.DeepEqual(list.Sessions, want) {
		t.Fatalf("sessions %v, want %v", list.Sessions, want)
	}
	c.sa("GET", "/sessions?limit=1", nil).expect(t, http.StatusOK).json(t, &list)
	if len(list.Sessions) != 1 {
		t.Errorf("limit=1 listed %d", len(list.Sessions))
	}
	saProblem(t, c.sa("GET", "/sessions?limit=1000", nil), http.StatusBadRequest, "invalid_request")
	// A session is reached by its name or its aapd id; another tenant's by
	// neither.
	c.saPage("chat-1", "")
	c.saPage(sid, "")
	saProblem(t, other.sa("GET", "/sessions/"+sid+"/events", nil), http.StatusNotFound, "session_not_found")
	saProblem(t, c.sa("GET", "/sessions/nope/events", nil), http.StatusNotFound, "session_not_found")
}

// Events are numbered from 1 with no gaps, named evt_<sequence>, the same
// on every read and every replica, paged by offset (the last sequence
// seen, exclusive) and limit with hasMore, with the AAP event they come
// from under include_raw.
func TestSandboxAgentEventsAreNumberedFromOneWithNoGaps(t *testing.T) {
	t.Parallel()
	s := startParallelServer(t)
	c := s.newTenant(t)
	sid := c.saCreate("numbered", nil)
	c.sa("POST", "/sessions/numbered/messages", map[string]any{"message": "/think first\nhello"}).expect(t, http.StatusNoContent)
	c.saWaitTurn("numbered", 0)
	c.saStream("numbered", "/words 3")

	all, more := c.saPage("numbered", "")
	if more {
		t.Fatal("hasMore on a whole read")
	}
	for i, e := range all {
		if e.Sequence != int64(i+1) || e.EventID != fmt.Sprintf("evt_%d", i+1) || e.SessionID != "numbered" || e.NativeSessionID != sid || e.Time == "" {
			t.Fatalf("event %d: %+v", i, e)
		}
	}
	wantKinds := []string{"session.started",
		"item.started:message/user", "item.delta", "item.completed:message/user",
		"item.started:message/assistant", "item.delta", "item.delta", "item.completed:message/assistant", "item.completed:turn.completed",
		"item.started:message/user", "item.delta", "item.completed:message/user",
		"item.started:message/assistant", "item.delta", "item.delta", "item.delta", "item.delta", "item.completed:message/assistant", "item.completed:turn.completed"}
	if got := kinds(t, all); !reflect.DeepEqual(got, wantKinds) {
		t.Fatalf("events\n%q, want\n%q", got, wantKinds)
	}
	if d := all[7].data(t); d.Item.Content[0].Type != "reasoning" || d.Item.Content[0].Text != "first" || d.Item.Content[1].Text != "Echo: hello" {
		t.Errorf("the first answer's item: %s", all[7].Data)
	}
	for _, limit := range []int{1, 4, 7} {
		if paged := c.saAll("numbered", limit); !reflect.DeepEqual(paged, all) {
			t.Errorf("read in pages of %d: not the whole read", limit)
		}
	}
	page, more := c.saPage("numbered", "?offset=9&limit=3")
	if !more || len(page) != 3 || page[0].Sequence != 10 {
		t.Errorf("offset 9 limit 3: %d events from %d, hasMore %v", len(page), page[0].Sequence, more)
	}
	if page, more := c.saPage("numbered", "?offset=19&limit=0"); len(page) != 0 || more {
		t.Errorf("at the end: %d events, hasMore %v", len(page), more)
	}
	if page, more := c.saPage("numbered", "?offset=18&limit=0"); len(page) != 0 || !more {
		t.Errorf("limit 0 before the end: %d events, hasMore %v", len(page), more)
	}
	// Another replica, which has indexed nothing, numbers them alike.
	replica := &client{t: t, base: startParallelServer(t).base, key: c.key}
	if got := replica.saAll("numbered", 5); !reflect.DeepEqual(got, all) {
		t.Errorf("another replica reads other events")
	}
	raw, _ := c.saPage("numbered", "?offset=5&limit=1&include_raw=true")
	var item struct {
		Event string `json:"event"`
		Seq   int    `json:"seq"`
	}
	if err := json.Unmarshal(raw[0].Raw, &item); err != nil || item.Event != "text_delta" {
		t.Errorf("raw of the first delta: %s (%v)", raw[0].Raw, err)
	}
	if all[5].Raw != nil {
		t.Error("raw without include_raw")
	}
	saProblem(t, c.sa("GET", "/sessions/numbered/events?offset=-1", nil), http.StatusBadRequest, "invalid_request")
}

// messages/stream sends the turn's events, from the user's message to the
// turn's end, whose last event is one the SDK takes as terminal; they are
// the log's events, numbered alike.
func TestSandboxAgentMessageStreamEndsOnATerminalEvent(t *testing.T) {
	t.Parallel()
	s := startParallelServer(t)
	c := s.newTenant(t)
	c.saCreate("streamed", nil)
	for _, msg := range []string{"hello", "/tool clock", "/ask Sure? | yes | no", "/error boom"} {
		streamed := c.saStream("streamed", msg)
		if len(streamed) == 0 || !terminal(t, streamed[len(streamed)-1]) {
			t.Fatalf("%q: stream %q does not end on a terminal event", msg, kinds(t, streamed))
		}
		if !slices.Contains(kinds(t, streamed), "item.started:message/user") {
			t.Fatalf("%q: the stream %q has no user message", msg, kinds(t, streamed))
		}
		logged, _ := c.saPage("streamed", fmt.Sprintf("?offset=%d", streamed[0].Sequence-1))
		if !reflect.DeepEqual(logged, streamed) {
			t.Fatalf("%q: the stream %q is not the log's %q", msg, kinds(t, streamed), kinds(t, logged))
		}
	}
	all, _ := c.saPage("streamed", "")
	var last []string
	for _, e := range all {
		if terminal(t, e) {
			last = append(last, e.kind(t))
		}
	}
	want := []string{"item.completed:turn.completed", "permission.requested:requested", "question.requested:requested", "error"}
	if !reflect.DeepEqual(last, want) {
		t.Errorf("turn ends %q, want %q", last, want)
	}
	// The clock call the next message moved past is rejected, as is the
	// question: a user message closes what is pending.
	var resolved []string
	for _, e := range all {
		if strings.HasSuffix(e.Type, ".resolved") {
			resolved = append(resolved, e.kind(t))
		}
	}
	if want := []string{"permission.resolved:reject", "question.resolved:rejected"}; !reflect.DeepEqual(resolved, want) {
		t.Errorf("resolutions %q, want %q", resolved, want)
	}
}

// Permission once approves one call, always approves the tool for the rest
// of the session, reject denies; bypass trusts every tool from the start.
func TestSandboxAgentPermissionOnceAlwaysReject(t *testing.T) {
	t.Parallel()
	s := startParallelServer(t)
	c := s.newTenant(t)
	c.saCreate("perms", nil)
	ask := func(reply string) []saEvent {
		t.Helper()
		streamed := c.saStream("perms", "/tool clock")
		last := streamed[len(streamed)-1]
		if last.Type != "permission.requested" {
			t.Fatalf("reply %s: the turn ended with %s, not a permission request", reply, last.kind(t))
		}
		d := last.data(t)
		c.sa("POST", "/sessions/perms/permissions/"+d.PermissionID+"/reply", map[string]any{"reply": reply}).expect(t, http.StatusNoContent)
		return c.saWaitTurn("perms", last.Sequence)
	}
	after := ask("once")
	if got := kinds(t, after)[:3]; !reflect.DeepEqual(got, []string{"permission.resolved:accept", "item.started:tool_result/tool", "item.completed:tool_result/tool"}) {
		t.Fatalf("once: %q", kinds(t, after))
	}
	after = ask("reject")
	if k, status := after[0].kind(t), after[2].data(t).Item.Status; k != "permission.resolved:reject" || status != "failed" {
		t.Fatalf("reject: %q (result %s)", kinds(t, after), status)
	}
	after = ask("always")
	if after[0].kind(t) != "permission.resolved:accept_for_session" {
		t.Fatalf("always: %q", kinds(t, after))
	}
	// From now on the clock runs without asking.
	streamed := c.saStream("perms", "/tool clock")
	if slices.Contains(kinds(t, streamed), "permission.requested:requested") || streamed[len(streamed)-1].kind(t) != "item.completed:turn.completed" {
		t.Fatalf("after always: %q", kinds(t, streamed))
	}
	saProblem(t, c.sa("POST", "/sessions/perms/permissions/call_nope/reply", map[string]any{"reply": "once"}), http.StatusNotFound, "session_not_found")

	c.saCreate("bypass", map[string]any{"permissionMode": "bypass"})
	streamed = c.saStream("bypass", "/tool calculator {\"expression\":\"6*7\"}")
	if slices.Contains(kinds(t, streamed), "permission.requested:requested") {
		t.Fatalf("bypass asked: %q", kinds(t, streamed))
	}
}

// Permissions asked together are answered one by one; the last answer runs
// the turn that carries them all.
func TestSandboxAgentPermissionsAnsweredOneByOne(t *testing.T) {
	t.Parallel()
	s := startParallelServer(t)
	c := s.newTenant(t)
	c.saCreate("two", nil)
	streamed := c.saStream("two", "/tool clock\n/tool calculator {\"expression\":\"1+1\"}")
	var ids []string
	for _, e := range streamed {
		if e.Type == "permission.requested" {
			ids = append(ids, e.data(t).PermissionID)
		}
	}
	if len(ids) != 2 {
		t.Fatalf("requests %q", kinds(t, streamed))
	}
	end := streamed[len(streamed)-1].Sequence
	c.sa("POST", "/sessions/two/permissions/"+ids[0]+"/reply", map[string]any{"reply": "once"}).expect(t, http.StatusNoContent)
	time.Sleep(200 * time.Millisecond)
	if events, _ := c.saPage("two", fmt.Sprintf("?offset=%d", end)); len(events) != 0 {
		t.Fatalf("a turn ran on the first of two answers: %q", kinds(t, events))
	}
	c.sa("POST", "/sessions/two/permissions/"+ids[1]+"/reply", map[string]any{"reply": "reject"}).expect(t, http.StatusNoContent)
	after := c.saWaitTurn("two", end)
	if got := kinds(t, after)[:2]; !reflect.DeepEqual(got, []string{"permission.resolved:accept", "permission.resolved:reject"}) {
		t.Fatalf("after both answers: %q", kinds(t, after))
	}
}

// A question (a call of the question tool) is answered with the reply,
// which becomes the call's result, or rejected, an error result.
func TestSandboxAgentQuestionReplyAndReject(t *testing.T) {
	t.Parallel()
	s := startParallelServer(t)
	c := s.newTenant(t)
	c.saCreate("q", nil)
	for _, tc := range []struct {
		path   string
		body   any
		status string
		result string
	}{
		{"reply", map[string]any{"answers": [][]string{{"green"}}}, "answered", "Tool results: ask_user: green"},
		{"reject", nil, "rejected", "Tool results: ask_user: Error: the user declined to answer the question"},
	} {
		streamed := c.saStream("q", "/ask Which color? | red | green")
		last := streamed[len(streamed)-1]
		d := last.data(t)
		if last.Type != "question.requested" || d.Prompt != "Which color?" || !reflect.DeepEqual(d.Options, []string{"red", "green"}) {
			t.Fatalf("question: %s", last.Data)
		}
		saProblem(t, c.sa("POST", "/sessions/q/permissions/"+d.QuestionID+"/reply", map[string]any{"reply": "once"}), http.StatusNotFound, "session_not_found")
		c.sa("POST", "/sessions/q/questions/"+d.QuestionID+"/"+tc.path, tc.body).expect(t, http.StatusNoContent)
		after := c.saWaitTurn("q", last.Sequence)
		r := after[0].data(t)
		if after[0].Type != "question.resolved" || r.Status != tc.status || (tc.status == "answered" && r.Response != "green") {
			t.Fatalf("%s: %s", tc.path, after[0].Data)
		}
		var answer string
		for _, e := range after {
			if d := e.data(t); e.Type == "item.completed" && d.Item.Role == "assistant" {
				answer = d.Item.Content[0].Text
			}
		}
		if answer != tc.result {
			t.Errorf("%s: the agent read %q, want %q", tc.path, answer, tc.result)
		}
	}
	saProblem(t, c.sa("POST", "/sessions/q/questions/call_nope/reject", nil), http.StatusNotFound, "session_not_found")
	saProblem(t, c.sa("POST", "/sessions/q/questions/call_nope/reply", map[string]any{"answers": [][]string{}}), http.StatusNotFound, "session_not_found")
}

// Terminate cancels the running turn and ends the session: its log ends
// with session.ended (terminated), a later message is a 409 through this
// door and AAP's, and terminating again changes nothing.
func TestSandboxAgentTerminateEndsTheSession(t *testing.T) {
	t.Parallel()
	s := startParallelServer(t)
	c := s.newTenant(t)
	sid := c.saCreate("ending", nil)
	c.sa("POST", "/sessions/ending/messages", map[string]any{"message": "/slow 100\n/words 100"}).expect(t, http.StatusNoContent)
	saProblem(t, c.sa("POST", "/sessions/ending/messages", map[string]any{"message": "meanwhile"}), http.StatusConflict, "invalid_request")
	c.sa("POST", "/sessions/ending/terminate", nil).expect(t, http.StatusNoContent)
	var events []saEvent
	waitFor(t, "session.ended", 10*time.Second, func() bool {
		events, _ = c.saPage("ending", "")
		return len(events) > 0 && events[len(events)-1].Type == "session.ended"
	})
	if d := events[len(events)-1].data(t); d.Reason != "terminated" || events[len(events)-2].kind(t) != "item.completed:turn.completed" {
		t.Fatalf("the log ends %q (%s)", kinds(t, events[len(events)-2:]), events[len(events)-1].Data)
	}
	saProblem(t, c.sa("POST", "/sessions/ending/messages", map[string]any{"message": "again"}), http.StatusConflict, "invalid_request")
	checkProblem(t, c.do("POST", "/sessions/"+sid+"/turns", user("over AAP")), http.StatusConflict, "session-ended")
	c.sa("POST", "/sessions/ending/terminate", nil).expect(t, http.StatusNoContent)
	var list struct {
		Sessions []struct {
			Ended      bool
			EventCount int64
		}
	}
	c.sa("GET", "/sessions", nil).expect(t, http.StatusOK).json(t, &list)
	if !list.Sessions[0].Ended || list.Sessions[0].EventCount != int64(len(events)) {
		t.Errorf("listed as %+v, with %d events", list.Sessions[0], len(events))
	}
}

// events/sse sends the events after offset, then follows the log live —
// across replicas — and ends with session.ended.
func TestSandboxAgentEventsSSEFollowsLiveAcrossReplicas(t *testing.T) {
	t.Parallel()
	s := startParallelServer(t)
	c := s.newTenant(t)
	c.saCreate("followed", nil)
	c.saStream("followed", "before")
	replica := &client{t: t, base: startParallelServer(t).base, key: c.key}
	req, _ := http.NewRequest("GET", replica.base+saPath("/sessions/followed/events/sse?offset=5"), nil)
	req.Header.Set("Authorization", "Bearer "+c.key)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	checkOpenAPIStream(t, req, nil, res)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("status %d", res.StatusCode)
	}
	got := make(chan []saEvent, 1)
	go func() {
		var events []saEvent
		sc := bufio.NewScanner(res.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				var e saEvent
				_ = json.Unmarshal([]byte(data), &e)
				events = append(events, e)
			}
		}
		got <- events
	}()
	c.saStream("followed", "/slow 20\nwhile followed")
	c.sa("POST", "/sessions/followed/terminate", nil).expect(t, http.StatusNoContent)
	var followed []saEvent
	select {
	case followed = <-got:
	case <-time.After(15 * time.Second):
		t.Fatal("the stream did not end with the session")
	}
	all, _ := c.saPage("followed", "")
	if !reflect.DeepEqual(followed, all[5:]) {
		t.Fatalf("followed %q, the log after 5 is %q", kinds(t, followed), kinds(t, all[5:]))
	}
	if followed[len(followed)-1].Type != "session.ended" {
		t.Fatalf("the stream ended with %s", followed[len(followed)-1].Type)
	}
}

// A conversation begun over AAP v3 — seeded, with a server tool's
// permission — reads as items here, and one begun here reads over AAP.
func TestSandboxAgentReadsAnAAPConversationAndTheReverse(t *testing.T) {
	t.Parallel()
	s := startParallelServer(t)
	c := s.newTenant(t)
	sid := c.createSession(map[string]any{"agent": map[string]any{"name": "echo", "tools": []any{map[string]any{"name": "clock", "trust": false}}},
		"messages": []any{map[string]any{"role": "user", "content": "seeded"}, map[string]any{"role": "assistant", "content": "ok"}}})
	resp := c.say(sid, "/tool clock")
	calls := toolCalls(resp.Messages)
	c.turn(sid, map[string]any{"messages": []any{map[string]any{"role": "tool_permission", "toolCallId": calls[0].ToolCallID, "granted": true}}})
	events := c.saAll(sid, 1000)
	want := []string{"session.started",
		"item.started:message/user", "item.delta", "item.completed:message/user",
		"item.started:message/assistant", "item.delta", "item.completed:message/assistant",
		"item.started:message/user", "item.delta", "item.completed:message/user",
		"item.started:tool_call/assistant", "item.completed:tool_call/assistant", "permission.requested:requested",
		"permission.resolved:accept", "item.started:tool_result/tool", "item.completed:tool_result/tool",
		// AAP's stream "none" turns are recorded as whole texts: one delta.
		"item.started:message/assistant", "item.delta", "item.completed:message/assistant",
		"item.completed:turn.completed"}
	if got := kinds(t, events); !reflect.DeepEqual(got, want) {
		t.Fatalf("an AAP session reads\n%q, want\n%q", got, want)
	}

	c.saCreate("here", nil)
	sid2 := c.saCreate("here2", nil)
	c.saStream("here2", "from sandbox-agent")
	full := c.history(sid2, "full")
	if len(full) != 2 || full[0].Content.PlainText() != "from sandbox-agent" || full[1].Content.PlainText() != "Echo: from sandbox-agent" {
		t.Fatalf("AAP reads %+v", full)
	}
}

// Each tenant, and each end user, sees only their own sessions: by name
// or by id, another's is a 404, and the listing holds only their own.
func TestSandboxAgentTenantsAndEndUsersSeeOnlyTheirOwn(t *testing.T) {
	t.Parallel()
	s := startParallelServer(t)
	tn := newOwnedTenant(t, s)
	other := s.newTenant(t)
	u1 := tn.user1.saCreate("mine", nil)
	u2 := tn.user2.saCreate("mine", nil) // the same name, another user's session
	if u1 == u2 {
		t.Fatal("two users' sessions of one name are one")
	}
	tn.user1.saStream("mine", "secret of user1")
	for _, c := range []*client{tn.user2, other} {
		saProblem(t, c.sa("GET", "/sessions/"+u1+"/events", nil), http.StatusNotFound, "session_not_found")
		saProblem(t, c.sa("POST", "/sessions/"+u1+"/messages", map[string]any{"message": "hi"}), http.StatusNotFound, "session_not_found")
		saProblem(t, c.sa("POST", "/sessions/"+u1+"/terminate", nil), http.StatusNotFound, "session_not_found")
	}
	saProblem(t, other.sa("GET", "/sessions/mine/events", nil), http.StatusNotFound, "session_not_found")
	if events, _ := tn.user2.saPage("mine", ""); len(events) != 1 {
		t.Fatalf("user2's session holds %q", kinds(t, events))
	}
	var list struct {
		Sessions []struct{ SessionID, NativeSessionID string }
	}
	tn.user2.sa("GET", "/sessions", nil).expect(t, http.StatusOK).json(t, &list)
	if len(list.Sessions) != 1 || list.Sessions[0].NativeSessionID != u2 || list.Sessions[0].SessionID != "mine" {
		t.Fatalf("user2 lists %+v", list.Sessions)
	}
	other.sa("GET", "/sessions", nil).expect(t, http.StatusOK).json(t, &list)
	if len(list.Sessions) != 0 {
		t.Fatalf("another tenant lists %+v", list.Sessions)
	}
	// The tenant's key sees its end users' sessions by their aapd ids.
	tn.key.sa("GET", "/sessions", nil).expect(t, http.StatusOK).json(t, &list)
	if len(list.Sessions) != 2 || list.Sessions[0].SessionID != u2 || list.Sessions[1].SessionID != u1 {
		t.Fatalf("the key lists %+v", list.Sessions)
	}
	saProblem(t, (&client{t: t, base: s.base}).sa("GET", "/sessions", nil), http.StatusUnauthorized, "token_invalid")
}

// The inspector, served from another origin, may call the door: the
// preflight allows its headers.
func TestSandboxAgentCORSPreflightAllowsTheInspector(t *testing.T) {
	t.Parallel()
	s := startParallelServer(t)
	req, _ := http.NewRequest("OPTIONS", s.base+saPath("/sessions/x/messages"), nil)
	req.Header.Set("Origin", "http://127.0.0.1:9999")
	req.Header.Set("Access-Control-Request-Method", "POST")
	req.Header.Set("Access-Control-Request-Headers", "authorization,content-type,accept")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	allowed := strings.ToLower(res.Header.Get("Access-Control-Allow-Headers"))
	if res.StatusCode != http.StatusNoContent || res.Header.Get("Access-Control-Allow-Origin") == "" ||
		!strings.Contains(allowed, "authorization") || !strings.Contains(allowed, "content-type") || !strings.Contains(allowed, "accept") {
		t.Fatalf("preflight %d, headers %v", res.StatusCode, res.Header)
	}
}

// A turn longer than one read of the log (its events span reads, the next
// turn beginning in the second) is translated as one: each of its events
// carries the turn's time, and the whole read is the paged one.
func TestSandboxAgentTurnsLongerThanAReadOfTheLog(t *testing.T) {
	t.Parallel()
	s := startParallelServer(t)
	c := s.newTenant(t)
	c.saCreate("long", nil)
	long := c.saStream("long", "/words 700")
	c.saStream("long", "short")
	all, _ := c.saPage("long", "")
	if len(all) != 1+len(long)+8 {
		t.Fatalf("%d events, want %d", len(all), 1+len(long)+8)
	}
	for _, e := range all[1 : 1+len(long)] {
		if e.Time != long[0].Time || strings.HasPrefix(e.Time, "0001") {
			t.Fatalf("event %d of the long turn at %s, its turn began at %s", e.Sequence, e.Time, long[0].Time)
		}
	}
	if !reflect.DeepEqual(all[1:1+len(long)], long) {
		t.Error("the log's long turn is not its stream's")
	}
	if paged := c.saAll("long", 333); !reflect.DeepEqual(paged, all) {
		t.Error("read in pages of 333: not the whole read")
	}
}

// The edge's refusals — a bad credential, a missing scope, a body too
// big, a rate limit — are the seed's ProblemDetails too, with the edge's
// statuses and headers.
func TestSandboxAgentEdgeRefusalsAreProblemDetails(t *testing.T) {
	t.Parallel()
	s := startParallelServer(t, func(c *Config) { c.MaxBodyBytes = 4096 })
	c, tenant := s.newTenantWithKey(t)
	c.saCreate("edge", nil)
	bad := &client{t: t, base: s.base, key: "aapd_nope_nope"}
	r := bad.sa("GET", "/sessions", nil)
	saProblem(t, r, http.StatusUnauthorized, "token_invalid")
	if !strings.HasPrefix(r.Header.Get("WWW-Authenticate"), "Bearer") {
		t.Errorf("401 without a bearer challenge: %v", r.Header)
	}
	ro := s.keyWithScopes(t, tenant, "sessions:read")
	ro.saPage("edge", "")
	saProblem(t, ro.sa("POST", "/sessions/edge/messages", map[string]any{"message": "hi"}), http.StatusForbidden, "permission_denied")
	saProblem(t, c.sa("POST", "/sessions/edge/messages", map[string]any{"message": strings.Repeat("x", 5000)}), http.StatusRequestEntityTooLarge, "invalid_request")

	limited := startServer(t, func(c *Config) {
		c.DatabaseURL = storetest.NewDatabase(t)
		c.Limits.RequestsPerSecond, c.Limits.Burst = 1, 2
	})
	lc := limited.newTenant(t)
	for range 100 {
		if r = lc.sa("GET", "/sessions", nil); r.StatusCode == http.StatusTooManyRequests {
			break
		}
	}
	saProblem(t, r, http.StatusTooManyRequests, "timeout")
	if r.Header.Get("Retry-After") == "" {
		t.Error("429 without Retry-After")
	}
}
