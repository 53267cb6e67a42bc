package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/aapclient"
	"github.com/aapd/aapd/store"
)

// isolatedSession is a session of tenant A and what it looked like before
// tenant B went after it.
type isolatedSession struct {
	name      string
	id        string
	info      aapclient.Session // GET /sessions/:id
	full      []aap.Message
	compacted []aap.Message
	stored    store.Session
}

// snapshot records everything observable of a session, through the API and
// in the store (pending tool calls and secrets in the clear).
func snapshot(t *testing.T, s *testServer, c *client, tenantID, name, id string) isolatedSession {
	t.Helper()
	stored, err := s.Store.SessionGet(t.Context(), tenantID, id)
	if err != nil {
		t.Fatalf("load %s: %v", name, err)
	}
	// Timestamps move with every turn; what matters is the content.
	stored.UpdatedAt = stored.CreatedAt
	return isolatedSession{
		name:      name,
		id:        id,
		info:      c.getSession(id),
		full:      c.history(id, aap.HistoryFull),
		compacted: c.history(id, aap.HistoryCompacted),
		stored:    stored,
	}
}

// notFoundShape returns a 404 problem and its headers without what names
// the request itself (instance, requestId, X-Request-Id, Date), for
// comparing two 404s.
func notFoundShape(t *testing.T, r response) map[string]any {
	t.Helper()
	p := checkProblem(t, r, http.StatusNotFound, "not-found")
	if p == nil {
		return nil
	}
	for _, k := range []string{"instance", "requestId"} {
		if _, ok := p[k]; !ok {
			t.Errorf("problem lacks %q: %s", k, r.body)
		}
		delete(p, k)
	}
	for k, v := range r.Header {
		switch k {
		case "Date", "X-Request-Id", "Content-Length":
		default:
			p["header "+k] = strings.Join(v, ", ")
		}
	}
	return p
}

// intrusion is a request tenant B makes on a session id.
type intrusion struct {
	name   string
	method string
	path   string // {id} is replaced by the session id
	body   any
}

func TestTenantIsolation(t *testing.T) {
	t.Parallel()
	s := startParallelServer(t)
	a, tenantA := s.newTenantWithID(t)
	b := s.newTenant(t)

	// Tenant A's sessions: one with history, one waiting on a client tool
	// result, one waiting on a server tool permission, one with secrets.
	withHistory := a.createSession(map[string]any{"agent": map[string]any{"name": "echo"},
		"messages": []any{map[string]any{"role": "system", "content": "Be brief."}}})
	a.say(withHistory, "one")
	a.say(withHistory, "/think private thoughts\ntwo")

	clientPending := a.echoSession(nil, "lookup")
	first := a.say(clientPending, `/tool lookup {"q":"secret plans"}`)
	if first.StopReason != aap.StopToolUse {
		t.Fatalf("client tool call: stop %s", first.StopReason)
	}
	clientCall := toolCalls(first.Messages)[0].ToolCallID

	serverPending := a.echoSession([]aap.ServerToolRef{{Name: "calculator"}})
	first = a.say(serverPending, `/tool calculator {"expression":"2+2"}`)
	if first.StopReason != aap.StopToolUse {
		t.Fatalf("server tool call: stop %s", first.StopReason)
	}
	serverCall := toolCalls(first.Messages)[0].ToolCallID

	withSecret := a.createSession(map[string]any{"agent": map[string]any{"name": "echo",
		"options": map[string]string{"token": "hunter2", "prefix": "A says: "}}})
	a.say(withSecret, "hello")

	names := map[string]string{withHistory: "history", clientPending: "client-pending", serverPending: "server-pending", withSecret: "secret"}
	before := map[string]isolatedSession{}
	for id, name := range names {
		before[id] = snapshot(t, s, a, tenantA.ID, name, id)
	}
	if len(before[clientPending].stored.Pending) != 1 || len(before[serverPending].stored.Pending) != 1 {
		t.Fatalf("pending calls not recorded: %+v / %+v", before[clientPending].stored.Pending, before[serverPending].stored.Pending)
	}
	listA := a.listSessions(aapclient.ListOptions{})

	userTurn := func(mode string) map[string]any {
		m := map[string]any{"messages": []any{map[string]any{"role": "user", "content": "/options"}}}
		if mode != "" {
			m["stream"] = mode
		}
		return m
	}
	intrusions := []intrusion{
		{"get session", "GET", "/sessions/{id}", nil},
		{"full history", "GET", "/sessions/{id}/history?type=full", nil},
		{"compacted history", "GET", "/sessions/{id}/history?type=compacted", nil},
		{"session event log", "GET", "/sessions/{id}/events", nil},
		{"user turn, stream omitted", "POST", "/sessions/{id}/turns", userTurn("")},
		{"user turn, stream none", "POST", "/sessions/{id}/turns", userTurn("none")},
		{"user turn, stream delta", "POST", "/sessions/{id}/turns", userTurn("delta")},
		{"user turn, stream message", "POST", "/sessions/{id}/turns", userTurn("message")},
		{"client tool result", "POST", "/sessions/{id}/turns", map[string]any{"messages": []any{
			map[string]any{"role": "tool", "toolCallId": clientCall, "content": "forged result"}}}},
		{"client tool result, streamed", "POST", "/sessions/{id}/turns", map[string]any{"stream": "delta", "messages": []any{
			map[string]any{"role": "tool", "toolCallId": clientCall, "content": "forged result"}}}},
		{"tool permission granted", "POST", "/sessions/{id}/turns", map[string]any{"messages": []any{
			map[string]any{"role": "tool_permission", "toolCallId": serverCall, "granted": true}}}},
		{"tool permission denied", "POST", "/sessions/{id}/turns", map[string]any{"stream": "message", "messages": []any{
			map[string]any{"role": "tool_permission", "toolCallId": serverCall, "granted": false, "reason": "B says no"}}}},
		{"overrides with a user message", "POST", "/sessions/{id}/turns", map[string]any{
			"agent": map[string]any{"options": map[string]string{"token": "stolen", "prefix": "B: "},
				"tools": []any{map[string]any{"name": "calculator", "trust": true}}},
			"tools":    []any{map[string]any{"name": "exfiltrate", "description": "d", "parameters": map[string]any{"type": "object"}}},
			"messages": []any{map[string]any{"role": "user", "content": "hi"}}}},
		// A body that breaks a protocol rule only the session can check
		// must not tell B that the session exists either.
		{"turn that fails validation", "POST", "/sessions/{id}/turns", map[string]any{
			"agent":    map[string]any{"options": map[string]string{"colour": "red"}},
			"messages": []any{map[string]any{"role": "user", "content": "hi"}}}},
		{"tool result when none is pending", "POST", "/sessions/{id}/turns", map[string]any{"messages": []any{
			map[string]any{"role": "tool", "toolCallId": "call_unknown", "content": "x"}}}},
		{"fork", "POST", "/sessions/{id}/fork", map[string]any{}},
		{"fork at a message", "POST", "/sessions/{id}/fork", map[string]any{"at": map[string]any{"message": 1}}},
		{"export", "GET", "/sessions/{id}/export", nil},
		{"delete", "DELETE", "/sessions/{id}", nil},
	}

	unknown := store.NewSessionID()
	// Raw requests: B's 404s are compared whole, headers included, with
	// an unknown id's.
	t.Run("B sees 404s", func(t *testing.T) {
		for _, in := range intrusions {
			t.Run(in.name, func(t *testing.T) {
				t.Parallel()
				bt := b.as(t)
				want := notFoundShape(t, bt.do(in.method, strings.ReplaceAll(in.path, "{id}", unknown), in.body))
				for id, name := range names {
					r := bt.do(in.method, strings.ReplaceAll(in.path, "{id}", id), in.body)
					got := notFoundShape(t, r)
					if !reflect.DeepEqual(got, want) {
						t.Errorf("%s: B's 404 for A's session differs from an unknown id's:\n got %v\nwant %v", name, got, want)
					}
					if strings.Contains(string(r.body), "hunter2") || strings.Contains(string(r.body), "secret plans") {
						t.Errorf("%s: A's data in B's response: %s", name, r.body)
					}
				}
			})
		}
	})

	t.Run("B lists nothing", func(t *testing.T) {
		// Raw: the empty list's exact members.
		r := b.as(t).do("GET", "/sessions", nil).expect(t, http.StatusOK)
		var raw map[string]json.RawMessage
		r.json(t, &raw)
		if string(raw["sessions"]) != "[]" {
			t.Errorf("B's sessions = %s, want []", raw["sessions"])
		}
		if _, ok := raw["next"]; ok {
			t.Errorf("B's empty list has next: %s", r.body)
		}
		// Nor with a cursor of A's (which encodes one of A's ids).
		page := a.as(t).listSessions(aapclient.ListOptions{Limit: 1})
		if page.Next == "" {
			t.Fatalf("A's first page of one has no next: %+v", page)
		}
		list := b.as(t).listSessions(aapclient.ListOptions{Limit: 100, After: page.Next})
		if len(list.Sessions) != 0 {
			t.Errorf("B paging with A's cursor sees %+v", list.Sessions)
		}
	})

	t.Run("B's own sessions stay B's", func(t *testing.T) {
		bs := b.as(t).echoSession(nil)
		if list := b.as(t).listSessions(aapclient.ListOptions{}); len(list.Sessions) != 1 || list.Sessions[0].SessionID != bs {
			t.Errorf("B's list = %+v, want only %s", list.Sessions, bs)
		}
		_, err := a.as(t).api().GetSession(t.Context(), bs)
		refusal(t, err, http.StatusNotFound, "not-found")
		b.as(t).deleteSession(bs)
	})

	// Nothing of A's changed.
	for id, was := range before {
		now := snapshot(t, s, a, tenantA.ID, was.name, id)
		if !reflect.DeepEqual(now.info, was.info) {
			t.Errorf("%s: session changed:\n%+v\nwas\n%+v", was.name, now.info, was.info)
		}
		if !reflect.DeepEqual(now.full, was.full) || !reflect.DeepEqual(now.compacted, was.compacted) {
			t.Errorf("%s: history changed:\nfull %+v\nwas  %+v\ncompacted %+v\nwas       %+v", was.name, now.full, was.full, now.compacted, was.compacted)
		}
		if !reflect.DeepEqual(now.stored, was.stored) {
			t.Errorf("%s: stored session changed:\n%+v\nwas\n%+v", was.name, now.stored, was.stored)
		}
	}
	if got := a.listSessions(aapclient.ListOptions{}); !reflect.DeepEqual(got, listA) {
		t.Errorf("A's list changed:\n%+v\nwas\n%+v", got, listA)
	}
	if got := before[withSecret].stored.SecretOptions["token"]; got != "hunter2" {
		t.Errorf("A's secret = %q", got)
	}

	// A's pending calls are still A's to answer.
	resp := a.turn(clientPending, map[string]any{"messages": []any{map[string]any{"role": "tool", "toolCallId": clientCall, "content": "A's result"}}})
	if resp.StopReason != aap.StopEndTurn || !strings.Contains(resp.Messages[0].Content.PlainText(), "lookup: A's result") {
		t.Errorf("A's tool result turn = %+v", resp)
	}
	resp = a.turn(serverPending, map[string]any{"messages": []any{map[string]any{"role": "tool_permission", "toolCallId": serverCall, "granted": true}}})
	if resp.StopReason != aap.StopEndTurn || len(resp.Messages) == 0 || resp.Messages[0].Content.PlainText() != "4" {
		t.Errorf("A's permission turn = %+v", resp)
	}
	if got := a.say(withSecret, "/options").Messages[0].Content.PlainText(); got != `A says: options: prefix="A says: ", style="plain", token=set` {
		t.Errorf("A's options as the agent sees them: %q", got)
	}
}

// TestTenantIsolationWhileATurnRuns checks that B can neither stop nor
// detect a turn running on A's session: B gets the 404 of an unknown
// session (not the 409 A would get), and A's turn completes.
func TestTenantIsolationWhileATurnRuns(t *testing.T) {
	t.Parallel()
	s := startParallelServer(t)
	a := s.newTenant(t)
	b := s.newTenant(t)
	sid := a.echoSession(nil)
	unknown := store.NewSessionID()

	st := a.openTurn(sid, streamUser("delta", "/slow 25\n/words 40"))
	head := st.read(2) // turn_start and a first delta: the turn runs
	if got := types(head); !reflect.DeepEqual(got, []string{"turn_start", "text_delta"}) {
		t.Fatalf("first events = %v", got)
	}

	// Raw requests: B's 404s are compared whole with an unknown id's.
	for _, in := range []intrusion{
		{"delete", "DELETE", "/sessions/{id}", nil},
		{"user turn", "POST", "/sessions/{id}/turns", user("stop")},
		{"streamed user turn", "POST", "/sessions/{id}/turns", streamUser("delta", "stop")},
		{"get", "GET", "/sessions/{id}", nil},
		{"history", "GET", "/sessions/{id}/history?type=full", nil},
	} {
		want := notFoundShape(t, b.do(in.method, strings.ReplaceAll(in.path, "{id}", unknown), in.body))
		got := notFoundShape(t, b.do(in.method, strings.ReplaceAll(in.path, "{id}", sid), in.body))
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: B's answer on A's running session %v differs from an unknown id's %v", in.name, got, want)
		}
	}
	// The turn was still running after B's attempts: A itself gets 409.
	_, err := a.api().SendTurn(t.Context(), sid, turnRequest(t, user("too soon")))
	refusal(t, err, http.StatusConflict, "turn-running")

	rest := st.read(-1)
	events := append(head, rest...)
	var text string
	for _, ev := range events {
		if ev.Type == aap.EventTextDelta {
			text += ev.Delta
		}
	}
	words := make([]string, 40)
	for i := range words {
		words[i] = fmt.Sprintf("word%d", i+1)
	}
	if want := "Echo: " + strings.Join(words, " "); text != want {
		t.Errorf("A's answer = %q, want %q", text, want)
	}
	if last := events[len(events)-1]; last.Type != aap.EventTurnStop || last.StopReason != aap.StopEndTurn {
		t.Errorf("A's turn ended with %+v", last)
	}
	h := a.history(sid, aap.HistoryFull)
	if len(h) != 2 || h[1].Content.PlainText() != text {
		t.Errorf("A's history = %+v", h)
	}
}
