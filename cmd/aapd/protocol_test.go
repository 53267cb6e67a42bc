package main

import (
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/aapclient"
	"github.com/aapd/aapd/agents"
	"github.com/aapd/aapd/httpapi"
	v3 "github.com/aapd/aapd/httpapi/v3"
	"github.com/aapd/aapd/store/storetest"
)

// The black-box walk through every endpoint and flow of spec/, over HTTP.

func TestMetaReturnsVersion3AndTheEchoAgent(t *testing.T) {
	s := startServer(t)
	anon := &client{t: t, base: s.base}
	meta := anon.meta()
	if meta.Version != 3 {
		t.Errorf("version = %d, want 3", meta.Version)
	}
	if len(meta.Agents) != 1 || meta.Agents[0].Name != "echo" {
		t.Fatalf("agents = %+v, want the echo agent", meta.Agents)
	}
	echo := meta.Agents[0]
	var tools []string
	for _, tl := range echo.Tools {
		tools = append(tools, tl.Name)
	}
	if !reflect.DeepEqual(tools, []string{"clock", "calculator"}) {
		t.Errorf("server tools = %v", tools)
	}
	for _, mode := range []aap.StreamMode{aap.StreamNone, aap.StreamDelta, aap.StreamMessage} {
		if !echo.SupportsStream(mode) {
			t.Errorf("echo does not declare stream %q", mode)
		}
	}
	if !echo.SupportsHistory(aap.HistoryFull) || !echo.SupportsHistory(aap.HistoryCompacted) || !echo.AcceptsClientTools() {
		t.Errorf("capabilities = %+v", echo.Capabilities)
	}
	if o, ok := echo.Option("token"); !ok || o.Type != aap.OptionSecret {
		t.Errorf("token option = %+v", o)
	}
}

func TestMetaRequiresAuthWhenConfigured(t *testing.T) {
	s := startServer(t, func(c *Config) { c.MetaRequiresAuth = true })
	anon := &client{t: t, base: s.base}
	// Raw: the challenge header of the 401 is what is under test.
	r := anon.do("GET", "/meta", nil).expect(t, http.StatusUnauthorized)
	if !strings.HasPrefix(r.Header.Get("WWW-Authenticate"), "Bearer") {
		t.Errorf("WWW-Authenticate = %q", r.Header.Get("WWW-Authenticate"))
	}
	_, err := anon.api().Meta(t.Context())
	refusal(t, err, http.StatusUnauthorized, "unauthorized")
	if meta := s.newTenant(t).meta(); meta.Version != 3 {
		t.Errorf("meta with a key: %+v", meta)
	}
}

// Raw requests: the credential headers and the 401's challenge are the
// wire itself.
func TestAuthRejectsMissingMalformedUnknownAndRevokedKeys(t *testing.T) {
	s := startServer(t)
	c := s.newTenant(t)
	publicID := strings.Split(c.key, "_")[1]
	cases := []struct{ name, header string }{
		{"missing", ""},
		{"not bearer", "Basic dXNlcjpwYXNz"},
		{"malformed", "Bearer not-a-key"},
		{"unknown", "Bearer aapd_aaaaaaaaaaaaaaaa_" + strings.Repeat("A", 43)},
		{"wrong secret", "Bearer aapd_" + publicID + "_" + strings.Repeat("B", 43)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			anon := &client{t: t, base: s.base}
			var h []string
			if tc.header != "" {
				h = []string{"Authorization", tc.header}
			}
			r := anon.do("GET", "/sessions", nil, h...).expect(t, http.StatusUnauthorized)
			if !strings.HasPrefix(r.Header.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("WWW-Authenticate = %q", r.Header.Get("WWW-Authenticate"))
			}
			if p := r.problem(t); p["type"] != "https://aapd.dev/problems/unauthorized" {
				t.Errorf("problem type = %v", p["type"])
			}
		})
	}
	t.Run("revoked", func(t *testing.T) {
		c.do("GET", "/sessions", nil).expect(t, http.StatusOK)
		k, err := s.Store.APIKeyGetByPublicID(t.Context(), publicID)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Store.APIKeyRevoke(t.Context(), k.TenantID, publicID); err != nil {
			t.Fatal(err)
		}
		// Servers remember keys; the revocation reaches them by a
		// notification, a moment after it commits.
		var r response
		waitFor(t, "the revocation to reach the server", 5*time.Second, func() bool {
			r = c.do("GET", "/sessions", nil)
			return r.StatusCode == http.StatusUnauthorized
		})
		if !strings.Contains(string(r.body), "revoked") {
			t.Errorf("body = %s", r.body)
		}
	})
}

func TestSessionLifecycle(t *testing.T) {
	s := startServer(t)
	c := s.newTenant(t)
	body := `{"agent":{"name":"echo","tools":[{"name":"clock","trust":true}],"options":{"style":"shout"}},
		"messages":[{"role":"system","content":"Be brief."}],
		"tools":[{"name":"get_weather","description":"Weather","parameters":{"type":"object","properties":{"location":{"type":"string"}}}}]}`
	// Raw: the Location header of the 201 is the wire.
	r := c.do("POST", "/sessions", body).expect(t, http.StatusCreated)
	var created aap.CreateSessionResponse
	r.json(t, &created)
	if r.Header.Get("Location") != "/sessions/"+created.SessionID {
		t.Errorf("Location = %q", r.Header.Get("Location"))
	}

	// The record as the client read it, every member it knows written back
	// (the OpenAPI check refuses a member the document does not name).
	got := jsonMap(t, c.getSession(created.SessionID))
	want := map[string]any{
		"sessionId": created.SessionID,
		"agent": map[string]any{
			"name":    "echo",
			"tools":   []any{map[string]any{"name": "clock", "trust": true}},
			"options": map[string]any{"style": "shout"},
		},
		"tools": []any{map[string]any{"name": "get_weather", "description": "Weather",
			"parameters": map[string]any{"type": "object", "properties": map[string]any{"location": map[string]any{"type": "string"}}}}},
	}
	// Extensions (docs/protocols.md) only add members.
	for _, ext := range []string{"createdAt", "updatedAt", "status"} {
		if _, ok := got[ext]; !ok {
			t.Errorf("GET session has no %s: %v", ext, got)
		}
		delete(got, ext)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("GET session =\n%v\nwant\n%v", got, want)
	}

	list := c.listSessions(aapclient.ListOptions{})
	if len(list.Sessions) != 1 || list.Sessions[0].SessionID != created.SessionID || list.Next != "" {
		t.Errorf("list = %+v", list)
	}
	if h := c.history(created.SessionID, aap.HistoryFull); len(h) != 1 || h[0].Role != aap.RoleSystem {
		t.Errorf("seeded history = %+v", h)
	}

	c.deleteSession(created.SessionID)
	api := c.api()
	_, err := api.GetSession(t.Context(), created.SessionID)
	refusal(t, err, http.StatusNotFound, "not-found")
	refusal(t, api.DeleteSession(t.Context(), created.SessionID), http.StatusNotFound, "not-found")
	_, err = api.History(t.Context(), created.SessionID, aap.HistoryFull)
	refusal(t, err, http.StatusNotFound, "not-found")
	_, err = api.SendTurn(t.Context(), created.SessionID, turnRequest(t, user("hi")))
	refusal(t, err, http.StatusNotFound, "not-found")
}

func TestSecretOptionsAreRedactedOnEveryRead(t *testing.T) {
	s := startServer(t)
	c := s.newTenant(t)
	sid := c.createSession(map[string]any{"agent": map[string]any{"name": "echo", "options": map[string]string{"token": "hunter2", "prefix": "> "}}})

	info := c.getSession(sid)
	if info.Agent.Options["token"] != "***" || info.Agent.Options["prefix"] != "> " {
		t.Errorf("GET options = %v", info.Agent.Options)
	}
	list := c.listSessions(aapclient.ListOptions{})
	if list.Sessions[0].Agent.Options["token"] != "***" {
		t.Errorf("list options = %v", list.Sessions[0].Agent.Options)
	}
	// The agent still gets the real value.
	if got := c.say(sid, "/options").Messages[0].Content.PlainText(); !strings.Contains(got, "token=set") {
		t.Errorf("echo saw %q", got)
	}
	// Overriding a secret in a turn keeps it secret.
	c.turn(sid, map[string]any{"agent": map[string]any{"options": map[string]string{"token": "other"}}, "messages": []any{map[string]any{"role": "user", "content": "hi"}}})
	info = c.getSession(sid)
	if info.Agent.Options["token"] != "***" {
		t.Errorf("after override: %v", info.Agent.Options)
	}
	// At rest, the value is sealed.
	var raw []byte
	storetest.Scan(t, storetest.URL(t), `SELECT secret_options FROM sessions WHERE id = $1`, []any{sid}, &raw)
	if len(raw) == 0 || strings.Contains(string(raw), "other") || strings.Contains(string(raw), "hunter2") {
		t.Errorf("secret_options at rest = %q", raw)
	}
}

func TestStreamNoneReturnsJSON(t *testing.T) {
	s := startServer(t)
	c := s.newTenant(t)
	sid := c.echoSession(nil)
	// Raw: the exact Content-Type and JSON of a stream "none" answer.
	r := c.do("POST", "/sessions/"+sid+"/turns", user("/think hmm\nhello")).expect(t, http.StatusOK)
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q", ct)
	}
	if !strings.HasPrefix(r.Header.Get("Aapd-Turn-Id"), "turn_") {
		t.Errorf("turn id header = %q", r.Header.Get("Aapd-Turn-Id"))
	}
	var got map[string]any
	r.json(t, &got)
	want := map[string]any{"stopReason": "end_turn", "messages": []any{map[string]any{"role": "assistant", "content": []any{
		map[string]any{"type": "thinking", "thinking": "hmm"},
		map[string]any{"type": "text", "text": "Echo: hello"},
	}}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("response = %v\nwant %v", got, want)
	}
	// A plain answer is string content, as in the spec.
	if m := c.say(sid, "plain").Messages; len(m) != 1 || m[0].Content.IsBlocks() || m[0].Content.Text != "Echo: plain" {
		t.Errorf("plain answer = %+v", m)
	}
}

func TestStreamDeltaSendsDeltasBetweenTurnStartAndTurnStop(t *testing.T) {
	s := startServer(t)
	c := s.newTenant(t)
	sid := c.echoSession(nil)
	// (The stream's exact Content-Type is checked on the wire by
	// TestStreamsSendKeepAliveCommentsWhileIdle.)
	_, events := c.streamTurn(sid, streamUser("delta", "/think let me see\nhello there world"))
	types := types(events)
	if types[0] != "turn_start" || types[len(types)-1] != "turn_stop" {
		t.Fatalf("events = %v", types)
	}
	var text, thinking string
	for i, ev := range events {
		if ev.ID != i+1 {
			t.Errorf("event %d has id %d", i, ev.ID)
		}
		switch ev.Type {
		case aap.EventTextDelta:
			text += ev.Delta
		case aap.EventThinkingDelta:
			thinking += ev.Delta
		case aap.EventText, aap.EventThinking:
			t.Errorf("message-mode event %s in delta mode", ev.Type)
		}
	}
	if thinking != "let me see" || text != "Echo: hello there world" {
		t.Errorf("thinking %q, text %q", thinking, text)
	}
	if n := strings.Count(strings.Join(types, ","), "text_delta"); n < 3 {
		t.Errorf("text came in %d deltas, want several", n)
	}
	if last := events[len(events)-1]; last.StopReason != aap.StopEndTurn {
		t.Errorf("stop = %q", last.StopReason)
	}
}

func TestStreamMessageSendsWholeMessages(t *testing.T) {
	s := startServer(t)
	c := s.newTenant(t)
	sid := c.echoSession(nil)
	_, events := c.streamTurn(sid, streamUser("message", "/think let me see\nhello there"))
	want := []string{"turn_start", "thinking", "text", "turn_stop"}
	if got := types(events); !reflect.DeepEqual(got, want) {
		t.Fatalf("events = %v, want %v", got, want)
	}
	if e := events[1]; e.Thinking != "let me see" {
		t.Errorf("thinking = %q", e.Thinking)
	}
	if e := events[2]; e.Text != "Echo: hello there" {
		t.Errorf("text = %q", e.Text)
	}
	// (turn_start's data, {}, is checked on the wire by
	// TestStreamsSendKeepAliveCommentsWhileIdle.)
}

func TestClientToolStopsWithToolUse(t *testing.T) {
	s := startServer(t)
	c := s.newTenant(t)
	sid := c.echoSession(nil, "get_weather")
	_, events := c.streamTurn(sid, streamUser("message", `/tool get_weather {"location":"Tokyo"}`))
	if got := types(events); !reflect.DeepEqual(got, []string{"turn_start", "tool_call", "turn_stop"}) {
		t.Fatalf("events = %v", got)
	}
	call := events[1]
	if call.Name != "get_weather" || string(call.Input) != `{"location":"Tokyo"}` {
		t.Errorf("tool_call = %+v", call)
	}
	if stop := events[2]; stop.StopReason != aap.StopToolUse {
		t.Errorf("stop = %s", stop.StopReason)
	}
	resp := c.turn(sid, map[string]any{"messages": []any{map[string]any{"role": "tool", "toolCallId": call.ToolCallID, "content": "18°C, partly cloudy"}}})
	if resp.StopReason != aap.StopEndTurn || len(resp.Messages) != 1 || resp.Messages[0].Content.PlainText() != "Tool results: get_weather: 18°C, partly cloudy" {
		t.Errorf("after result: %+v", resp)
	}
	roles := []aap.Role{}
	for _, m := range c.history(sid, aap.HistoryFull) {
		roles = append(roles, m.Role)
	}
	if !reflect.DeepEqual(roles, []aap.Role{"user", "assistant", "tool", "assistant"}) {
		t.Errorf("history roles = %v", roles)
	}
}

func TestTrustedServerToolRunsInline(t *testing.T) {
	s := startServer(t)
	c := s.newTenant(t)
	sid := c.echoSession([]aap.ServerToolRef{{Name: "calculator", Trust: true}})
	_, events := c.streamTurn(sid, streamUser("message", `/tool calculator {"expression":"6*7"}`))
	want := []string{"turn_start", "tool_call", "tool_result", "text", "turn_stop"}
	if got := types(events); !reflect.DeepEqual(got, want) {
		t.Fatalf("events = %v, want %v", got, want)
	}
	if r := events[2]; r.Content.PlainText() != "42" || r.ToolCallID != events[1].ToolCallID {
		t.Errorf("tool_result = %+v", r)
	}
	if stop := events[4]; stop.StopReason != aap.StopEndTurn {
		t.Errorf("stop = %s", stop.StopReason)
	}
	// stream none returns the whole exchange.
	resp := c.say(sid, `/tool calculator {"expression":"1+1"}`)
	roles := []aap.Role{}
	for _, m := range resp.Messages {
		roles = append(roles, m.Role)
	}
	if !reflect.DeepEqual(roles, []aap.Role{"assistant", "tool", "assistant"}) || resp.Messages[1].Content.PlainText() != "2" {
		t.Errorf("none response = %+v", resp)
	}
}

func TestUntrustedServerToolAsksPermission(t *testing.T) {
	s := startServer(t)
	c := s.newTenant(t)
	sid := c.echoSession([]aap.ServerToolRef{{Name: "calculator"}})
	first := c.say(sid, `/tool calculator {"expression":"2^10"}`)
	if first.StopReason != aap.StopToolUse {
		t.Fatalf("stop = %s", first.StopReason)
	}
	id := toolCalls(first.Messages)[0].ToolCallID
	_, events := c.streamTurn(sid, map[string]any{"stream": "delta", "messages": []any{
		map[string]any{"role": "tool_permission", "toolCallId": id, "granted": true}}})
	types := types(events)
	if types[0] != "turn_start" || types[1] != "tool_result" || types[len(types)-1] != "turn_stop" {
		t.Fatalf("events = %v", types)
	}
	if r := events[1]; r.ToolCallID != id || r.Content.PlainText() != "1024" {
		t.Errorf("tool_result = %+v", r)
	}
	for _, m := range c.history(sid, aap.HistoryFull) {
		if m.Role == aap.RoleToolPermission {
			t.Errorf("a tool_permission message was stored")
		}
	}
}

func TestToolPermissionGrantedResponseIncludesResult(t *testing.T) {
	s := startServer(t)
	c := s.newTenant(t)
	sid := c.echoSession([]aap.ServerToolRef{{Name: "calculator"}})
	id := toolCalls(c.say(sid, `/tool calculator {"expression":"3*3"}`).Messages)[0].ToolCallID
	resp := c.turn(sid, map[string]any{"messages": []any{map[string]any{"role": "tool_permission", "toolCallId": id, "granted": true}}})
	if len(resp.Messages) != 2 || resp.Messages[0].Role != aap.RoleTool || resp.Messages[0].Content.PlainText() != "9" ||
		resp.Messages[1].Role != aap.RoleAssistant {
		t.Errorf("response = %+v", resp)
	}
}

func TestToolPermissionDeniedStoresDenial(t *testing.T) {
	for _, reason := range []string{"", "User declined"} {
		t.Run("reason="+reason, func(t *testing.T) {
			s := startServer(t)
			c := s.newTenant(t)
			sid := c.echoSession([]aap.ServerToolRef{{Name: "clock"}})
			id := toolCalls(c.say(sid, `/tool clock {}`).Messages)[0].ToolCallID
			perm := map[string]any{"role": "tool_permission", "toolCallId": id, "granted": false}
			if reason != "" {
				perm["reason"] = reason
			}
			resp := c.turn(sid, map[string]any{"messages": []any{perm}})
			want := agents.DenialText(reason)
			if want != "Tool call denied" && want != "Tool call denied: User declined" {
				t.Fatalf("denial text %q", want)
			}
			h := c.history(sid, aap.HistoryFull)
			var denial *aap.Message
			for i := range h {
				if h[i].Role == aap.RoleTool && h[i].ToolCallID == id {
					denial = &h[i]
				}
				if h[i].Role == aap.RoleToolPermission {
					t.Error("tool_permission stored")
				}
			}
			if denial == nil || denial.Content.PlainText() != want {
				t.Fatalf("history = %+v", h)
			}
			if resp.Messages[len(resp.Messages)-1].Content.PlainText() != "Tool results: clock: "+want {
				t.Errorf("the model was not told: %+v", resp.Messages)
			}
		})
	}
}

func TestParallelToolCallsResolveTogether(t *testing.T) {
	s := startServer(t)
	c := s.newTenant(t)
	sid := c.echoSession([]aap.ServerToolRef{{Name: "clock", Trust: true}, {Name: "calculator"}}, "client_a", "client_b")
	_, events := c.streamTurn(sid, streamUser("message", "/tool client_a {}\n/tool client_b {\"x\":1}\n/tool clock {}\n/tool calculator {\"expression\":\"1+2\"}"))
	want := []string{"turn_start", "tool_call", "tool_call", "tool_call", "tool_call", "tool_result", "turn_stop"}
	if got := types(events); !reflect.DeepEqual(got, want) {
		t.Fatalf("events = %v, want %v", got, want)
	}
	ids := map[string]string{}
	for _, ev := range events[1:5] {
		ids[ev.Name] = ev.ToolCallID
	}
	// Answering only some of them is refused, naming what is missing.
	_, err := c.api().SendTurn(t.Context(), sid, turnRequest(t, map[string]any{"messages": []any{
		map[string]any{"role": "tool", "toolCallId": ids["client_a"], "content": "A"}}}))
	if e := refusal(t, err, http.StatusBadRequest, ""); !strings.Contains(e.Detail, ids["client_b"]) || !strings.Contains(e.Detail, ids["calculator"]) {
		t.Errorf("problem does not name the unanswered calls: %s", e)
	}
	resp := c.turn(sid, map[string]any{"messages": []any{
		map[string]any{"role": "tool", "toolCallId": ids["client_b"], "content": "B"},
		map[string]any{"role": "tool_permission", "toolCallId": ids["calculator"], "granted": true},
		map[string]any{"role": "tool", "toolCallId": ids["client_a"], "content": "A"},
	}})
	if resp.StopReason != aap.StopEndTurn {
		t.Fatalf("stop = %s", resp.StopReason)
	}
	final := resp.Messages[len(resp.Messages)-1].Content.PlainText()
	for _, part := range []string{"client_a: A", "client_b: B", "calculator: 3", "clock: "} {
		if !strings.Contains(final, part) {
			t.Errorf("final answer %q lacks %q", final, part)
		}
	}
}

func TestToolResultNamingUnknownOrDuplicateCallIsRejected(t *testing.T) {
	s := startServer(t)
	c := s.newTenant(t)
	sid := c.echoSession(nil, "lookup")
	id := toolCalls(c.say(sid, "/tool lookup {}").Messages)[0].ToolCallID
	cases := []struct {
		name string
		msgs []any
		want string
	}{
		{"unknown", []any{map[string]any{"role": "tool", "toolCallId": "call_nope", "content": "x"}}, "call_nope"},
		{"duplicated", []any{
			map[string]any{"role": "tool", "toolCallId": id, "content": "x"},
			map[string]any{"role": "tool", "toolCallId": id, "content": "y"}}, id},
		{"permission for a client tool", []any{map[string]any{"role": "tool_permission", "toolCallId": id, "granted": true}}, id},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.as(t).api().SendTurn(t.Context(), sid, turnRequest(t, map[string]any{"messages": tc.msgs}))
			if e := refusal(t, err, http.StatusBadRequest, ""); !strings.Contains(e.Detail, tc.want) {
				t.Errorf("detail %q does not name %s", e.Detail, tc.want)
			}
		})
	}
	// Nothing was changed by the refused turns.
	c.turn(sid, map[string]any{"messages": []any{map[string]any{"role": "tool", "toolCallId": id, "content": "ok"}}})
}

func TestUserMessageClosesPendingToolCalls(t *testing.T) {
	s := startServer(t)
	c := s.newTenant(t)
	sid := c.echoSession([]aap.ServerToolRef{{Name: "clock"}}, "lookup")
	calls := toolCalls(c.say(sid, "/tool lookup {}\n/tool clock {}").Messages)
	if len(calls) != 2 {
		t.Fatalf("calls = %+v", calls)
	}
	resp := c.say(sid, "never mind")
	if resp.StopReason != aap.StopEndTurn {
		t.Fatalf("stop = %s", resp.StopReason)
	}
	h := c.history(sid, aap.HistoryFull)
	// user, assistant(2 calls), tool, tool, user, assistant
	if len(h) != 6 {
		t.Fatalf("history = %+v", h)
	}
	for i, c := range calls {
		m := h[2+i]
		if m.Role != aap.RoleTool || m.ToolCallID != c.ToolCallID || m.Content.PlainText() != agents.CancelledToolCallText {
			t.Errorf("history[%d] = %+v", 2+i, m)
		}
	}
	if h[4].Role != aap.RoleUser || h[4].Content.Text != "never mind" {
		t.Errorf("history[4] = %+v", h[4])
	}
}

func TestOverridesPersistForTheSession(t *testing.T) {
	s := startServer(t)
	c := s.newTenant(t)
	sid := c.createSession(map[string]any{"agent": map[string]any{"name": "echo", "options": map[string]string{"prefix": "A: "}}})
	c.turn(sid, map[string]any{
		"agent":    map[string]any{"options": map[string]string{"style": "shout"}, "tools": []any{map[string]any{"name": "clock", "trust": true}}},
		"tools":    []any{map[string]any{"name": "lookup", "description": "d", "parameters": map[string]any{"type": "object"}}},
		"messages": []any{map[string]any{"role": "user", "content": "hi"}},
	})
	info := c.getSession(sid)
	if !reflect.DeepEqual(info.Agent.Options, map[string]string{"prefix": "A: ", "style": "shout"}) {
		t.Errorf("options = %v (want merged by key)", info.Agent.Options)
	}
	if !reflect.DeepEqual(info.Agent.Tools, []aap.ServerToolRef{{Name: "clock", Trust: true}}) || len(info.Tools) != 1 || info.Tools[0].Name != "lookup" {
		t.Errorf("tools = %+v / %+v", info.Agent.Tools, info.Tools)
	}
	if got := c.say(sid, "again").Messages[0].Content.PlainText(); got != "A: AGAIN" {
		t.Errorf("later turn answered %q", got)
	}
	_, err := c.api().SendTurn(t.Context(), sid, turnRequest(t, map[string]any{"agent": map[string]any{"name": "other"}, "messages": []any{map[string]any{"role": "user", "content": "x"}}}))
	refusal(t, err, http.StatusBadRequest, "")
}

func TestHistoryTypesAndOrder(t *testing.T) {
	s := startServer(t)
	c := s.newTenant(t)
	sid := c.echoSession(nil)
	for _, text := range []string{"one", "two", "three"} {
		c.say(sid, text)
	}
	for _, typ := range []aap.HistoryType{aap.HistoryFull, aap.HistoryCompacted} {
		h := c.history(sid, typ)
		var got []string
		for _, m := range h {
			got = append(got, m.Content.PlainText())
		}
		want := []string{"one", "Echo: one", "two", "Echo: two", "three", "Echo: three"}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s history = %v", typ, got)
		}
	}
	// Raw: the body's shape and the refusal of a missing or unknown type
	// are the wire.
	raw := c.do("GET", "/sessions/"+sid+"/history?type=full", nil).expect(t, http.StatusOK)
	var shape map[string]map[string]json.RawMessage
	raw.json(t, &shape)
	if _, ok := shape["history"]["full"]; !ok || len(shape["history"]) != 1 {
		t.Errorf("history body = %s", raw.body)
	}
	c.do("GET", "/sessions/"+sid+"/history", nil).expect(t, http.StatusBadRequest).problem(t)
	c.do("GET", "/sessions/"+sid+"/history?type=partial", nil).expect(t, http.StatusBadRequest).problem(t)
}

// Raw requests: CORS is headers on the wire.
func TestCORSAllowsBrowserApplications(t *testing.T) {
	s := startServer(t)
	c := s.newTenant(t)
	pre := (&client{t: t, base: s.base}).do("OPTIONS", "/sessions", nil,
		"Origin", "https://playground.example", "Access-Control-Request-Method", "POST",
		"Access-Control-Request-Headers", "authorization,content-type").expect(t, http.StatusNoContent)
	if pre.Header.Get("Access-Control-Allow-Origin") == "" || !strings.Contains(pre.Header.Get("Access-Control-Allow-Headers"), "Authorization") {
		t.Errorf("preflight headers = %v", pre.Header)
	}
	sid := c.echoSession(nil)
	res := c.openStream(sid, streamUser("delta", "hi"), "Origin", "https://playground.example")
	defer res.Body.Close()
	if res.Header.Get("Access-Control-Allow-Origin") == "" || !strings.Contains(res.Header.Get("Access-Control-Expose-Headers"), "Aapd-Turn-Id") {
		t.Errorf("stream CORS headers = %v", res.Header)
	}
	restricted := startServer(t, func(c *Config) { c.CORSOrigins = []string{"https://app.example"} })
	r := (&client{t: t, base: restricted.base}).do("GET", "/meta", nil, "Origin", "https://evil.example")
	if r.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("a disallowed origin was allowed")
	}
}

// The AAP web playground creates a session with every option at its default
// and every server tool of /meta, untrusted, then streams.
func TestPlaygroundStyleSessionIsAccepted(t *testing.T) {
	s := startServer(t)
	c := s.newTenant(t)
	agent := c.meta().Agents[0]
	opts := map[string]string{}
	for _, o := range agent.Options {
		opts[o.Name] = o.Default
	}
	var refs []aap.ServerToolRef
	for _, tl := range agent.Tools {
		refs = append(refs, aap.ServerToolRef{Name: tl.Name, Trust: false})
	}
	sid := c.createSession(map[string]any{"agent": map[string]any{"name": agent.Name, "tools": refs, "options": opts}})
	_, events := c.streamTurn(sid, streamUser("delta", "hello"))
	if events[len(events)-1].StopReason != aap.StopEndTurn {
		t.Errorf("events = %v", types(events))
	}
	// Sending only the options that changed, as the playground does.
	resp := c.turn(sid, map[string]any{"agent": map[string]any{"options": map[string]string{"style": "shout"}},
		"messages": []any{map[string]any{"role": "user", "content": "quiet"}}})
	if got := resp.Messages[0].Content.PlainText(); got != "ECHO: QUIET" {
		t.Errorf("answer = %q", got)
	}
}

// A raw stream: its bytes (comments, the Content-Type, each event's lines)
// are what is under test.
func TestStreamsSendKeepAliveCommentsWhileIdle(t *testing.T) {
	s := startServer(t, func(c *Config) { c.KeepAlive = 100 * time.Millisecond })
	c := s.newTenant(t)
	sid := c.echoSession(nil)
	res := c.openStream(sid, streamUser("delta", slowWords(2, 450)))
	defer res.Body.Close()
	if ct := res.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("Content-Type = %q", ct)
	}
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(body), "id: 1\nevent: turn_start\ndata: {}\n\n") {
		t.Errorf("turn_start is not event 1 with data {}: %q", body)
	}
	if n := strings.Count(string(body), "\n: keep-alive\n"); n < 2 {
		t.Errorf("%d keep-alive comments in %s", n, body)
	}
	if !strings.HasSuffix(string(body), "event: turn_stop\ndata: {\"stopReason\":\"end_turn\"}\n\n") {
		t.Errorf("stream did not end with turn_stop: %q", body)
	}
}

// Extension (docs/protocols.md): a failed turn says why, with the same
// error object on its turn_stop, its record and its stream "none" answer.
func TestFailedTurnStopCarriesAnErrorObject(t *testing.T) {
	s := startServer(t)
	c := s.newTenant(t)
	sid := c.echoSession(nil)
	res, events := c.stream(sid, streamUser("delta", "/error boom"))
	last := events[len(events)-1].parse(t)
	if last.Type != aap.EventTurnStop || last.StopReason != aap.StopError || last.Error == nil {
		t.Fatalf("last event = %+v", last)
	}
	if last.Error.Type != aap.TurnErrorModel || !strings.Contains(last.Error.Message, "boom") {
		t.Errorf("turn_stop error = %+v, want a model_error that says boom", last.Error)
	}
	var info v3.TurnInfo
	c.do("GET", "/sessions/"+sid+"/turns/"+res.Header.Get(httpapi.TurnIDHeader), nil).expect(t, http.StatusOK).json(t, &info)
	if info.Status != "failed" || info.Error == nil || *info.Error != *last.Error {
		t.Errorf("record = %+v, error %+v; want the turn_stop's %+v", info, info.Error, last.Error)
	}
	var resp aap.TurnResponse
	c.do("POST", "/sessions/"+sid+"/turns", user("/error again")).expect(t, http.StatusOK).json(t, &resp)
	if resp.StopReason != aap.StopError || resp.Error == nil || resp.Error.Type != aap.TurnErrorModel {
		t.Errorf("stream none answer = %+v", resp)
	}
	// A turn that did not fail has no error object.
	_, events = c.stream(sid, streamUser("message", "fine"))
	if e := events[len(events)-1]; strings.Contains(e.Data, "error") {
		t.Errorf("turn_stop of a good turn = %s", e.Data)
	}
}
