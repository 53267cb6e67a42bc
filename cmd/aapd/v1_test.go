package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/httpapi"
	v1 "github.com/aapd/aapd/httpapi/v1"
	v3 "github.com/aapd/aapd/httpapi/v3"
	"github.com/aapd/aapd/store"
	"github.com/aapd/aapd/store/storetest"
)

// AAP v1 under /v1 (httpapi/v1, docs/protocols.md), end to end: one test
// per rule of the v1 seeds (shared/seeds/000_* and 004_*), named after it,
// and the same sessions reachable through v1 and v3. Every exchange is
// checked against the OpenAPI document, streams event by event.

// v1Tool is a client tool as v1 declares it.
func v1Tool(name string) map[string]any {
	return map[string]any{"name": name, "description": "client tool " + name,
		"inputSchema": map[string]any{"type": "object", "properties": map[string]any{"location": map[string]any{"type": "string"}}}}
}

// v1Put is a PUT /v1/session body for the echo agent whose messages are
// the texts, alternately user and assistant, the last a user's.
func v1Put(stream string, texts ...string) map[string]any {
	var msgs []any
	for i, text := range texts {
		role := "user"
		if (len(texts)-1-i)%2 == 1 {
			role = "assistant"
		}
		msgs = append(msgs, map[string]any{"role": role, "content": text})
	}
	body := map[string]any{"agent": map[string]any{"name": "echo"}, "messages": msgs}
	if stream != "" {
		body["stream"] = stream
	}
	return body
}

// v1Create creates a session over v1 with stream none and returns its
// answer.
func (c *client) v1Create(body any) v1.AgentResponse {
	c.t.Helper()
	var out v1.AgentResponse
	r := c.do("PUT", "/v1/session", body).expect(c.t, http.StatusCreated)
	r.json(c.t, &out)
	if !strings.HasPrefix(out.SessionID, "sess_") || r.Header.Get("Location") != "/v1/session/"+out.SessionID {
		c.t.Fatalf("PUT /v1/session: sessionId %q, Location %q", out.SessionID, r.Header.Get("Location"))
	}
	return out
}

// v1Stream sends a v1 request that streams and reads every event.
func (c *client) v1Stream(method, path string, body any) (*http.Response, []sseEvent) {
	c.t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(method, c.base+path, bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+c.key)
	req.Header.Set("Accept", "text/event-stream")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	checkOpenAPIStream(c.t, req, b, res)
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(res.Body)
		c.t.Fatalf("%s %s: status %d: %s", method, path, res.StatusCode, b)
	}
	return res, readEvents(c.t, bufio.NewReader(res.Body), -1)
}

// v1Session is the body of GET /v1/session/:id, decoded.
type v1Session struct {
	SessionID string          `json:"sessionId"`
	Agent     aap.AgentConfig `json:"agent"`
	Tools     []v1.ToolSpec   `json:"tools"`
	History   *struct {
		Compacted []aap.Message `json:"compacted"`
		Full      []aap.Message `json:"full"`
	} `json:"history"`
}

func (c *client) v1Get(sid string) (v1Session, response) {
	c.t.Helper()
	var out v1Session
	r := c.do("GET", "/v1/session/"+sid, nil).expect(c.t, http.StatusOK)
	r.json(c.t, &out)
	return out, r
}

func v1List(t *testing.T, c *client, query string) v1.SessionList {
	t.Helper()
	var list v1.SessionList
	c.do("GET", "/v1/sessions"+query, nil).expect(t, http.StatusOK).json(t, &list)
	return list
}

// Seed 004, GET /meta: "Returns the protocol version and the list of
// agents", version 1, auth optional; the agents are GET /meta's, their
// tools with inputSchema, their capabilities (application among them) as
// declared.
func TestV1MetaIsVersion1WithTheAgentsOfMeta(t *testing.T) {
	t.Parallel()
	s := startParallelServer(t)
	anon := &client{t: t, base: s.base}
	var meta v1.Meta
	anon.do("GET", "/v1/meta", nil).expect(t, http.StatusOK).json(t, &meta)
	var v3 aap.Meta
	anon.do("GET", "/meta", nil).expect(t, http.StatusOK).json(t, &v3)
	if meta.Version != 1 || len(meta.Agents) != len(v3.Agents) || len(meta.Agents) == 0 {
		t.Fatalf("v1 meta = %+v", meta)
	}
	for i, a := range meta.Agents {
		want := v3.Agents[i]
		if a.Name != want.Name || a.Version != want.Version || !reflect.DeepEqual(a.Capabilities, want.Capabilities) || !reflect.DeepEqual(a.Options, want.Options) {
			t.Errorf("agent %d = %+v, want %+v", i, a, want)
		}
		if a.Capabilities == nil || a.Capabilities.Application == nil || a.Capabilities.Application.Tools == nil {
			t.Errorf("agent %s: no capabilities.application.tools", a.Name)
		}
		if len(a.Tools) != len(want.Tools) || len(a.Tools) == 0 {
			t.Fatalf("agent %s tools = %+v", a.Name, a.Tools)
		}
		for j, tool := range a.Tools {
			if tool.Name != want.Tools[j].Name || !bytes.Equal(tool.InputSchema, want.Tools[j].Parameters) {
				t.Errorf("tool %s: inputSchema %s, want v3's parameters %s", tool.Name, tool.InputSchema, want.Tools[j].Parameters)
			}
		}
	}
	closed := startParallelServer(t, func(c *Config) { c.MetaRequiresAuth = true })
	(&client{t: t, base: closed.base}).do("GET", "/v1/meta", nil).expect(t, http.StatusUnauthorized)
	closed.newTenant(t).do("GET", "/v1/meta", nil).expect(t, http.StatusOK)
}

// Seed 004, PUT /session: "The last message must be a user message, which
// becomes the first turn"; the response "Returns the sessionId followed by
// the agent's response", as JSON for stream none.
func TestV1CreateRunsTheLastUserMessageAsTheFirstTurn(t *testing.T) {
	t.Parallel()
	s := startParallelServer(t)
	c := s.newTenant(t)
	out := c.v1Create(v1Put("", "What's the capital of France?", "Paris.", "And of Japan?"))
	if out.StopReason != aap.StopEndTurn || len(out.Messages) != 1 || out.Messages[0].Content.PlainText() != "Echo: And of Japan?" {
		t.Fatalf("first turn = %+v", out)
	}
	sess, _ := c.v1Get(out.SessionID)
	var texts []string
	for _, m := range sess.History.Full {
		texts = append(texts, string(m.Role)+": "+m.Content.PlainText())
	}
	want := []string{"user: What's the capital of France?", "assistant: Paris.", "user: And of Japan?", "assistant: Echo: And of Japan?"}
	if !reflect.DeepEqual(texts, want) {
		t.Errorf("history = %q, want %q", texts, want)
	}
	// The first turn is a turn like any other: one record, completed.
	var turns v3.TurnList
	c.do("GET", "/sessions/"+out.SessionID+"/turns", nil).expect(t, http.StatusOK).json(t, &turns)
	if len(turns.Turns) != 1 || turns.Turns[0].Status != "completed" {
		t.Errorf("turns = %+v", turns.Turns)
	}
}

// Seed 004, PUT /session: "For SSE modes, sessionId is returned in the
// session_start event at the beginning of the stream" — in both delta and
// message modes, the turn's own events following as POST's do.
func TestV1CreateStreamStartsWithSessionStart(t *testing.T) {
	t.Parallel()
	s := startParallelServer(t)
	c := s.newTenant(t)
	for mode, want := range map[string][]string{
		"delta":   {"session_start", "turn_start", "thinking_delta", "text_delta", "text_delta", "text_delta", "turn_stop"},
		"message": {"session_start", "turn_start", "thinking", "text", "turn_stop"},
	} {
		res, events := c.v1Stream("PUT", "/v1/session", v1Put(mode, "/think hmm\nhello world"))
		if got := eventTypes(events); !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: events %v, want %v", mode, got, want)
		}
		var start v1.SessionStart
		if err := json.Unmarshal([]byte(events[0].Data), &start); err != nil || !strings.HasPrefix(start.SessionID, "sess_") || events[0].ID != "" {
			t.Fatalf("%s: session_start %+v (%v), id %q", mode, events[0], err, events[0].ID)
		}
		if res.Header.Get("Location") != "/v1/session/"+start.SessionID || res.Header.Get(httpapi.TurnIDHeader) == "" {
			t.Errorf("%s: headers %v", mode, res.Header)
		}
		if events[1].ID != "1" {
			t.Errorf("%s: turn_start has id %q, want 1: the turn's own numbering", mode, events[1].ID)
		}
		sess, _ := c.v1Get(start.SessionID)
		if n := len(sess.History.Full); n != 2 || sess.History.Full[1].Content.AsBlocks()[1].Text != "Echo: hello world" {
			t.Errorf("%s: history %+v", mode, sess.History.Full)
		}
	}
}

// Seed 000, SSEEvent: session_start is for "PUT /session only", and
// AgentResponse's sessionId is "present in PUT /session response only".
func TestV1SessionStartAndSessionIDArePUTOnly(t *testing.T) {
	t.Parallel()
	s := startParallelServer(t)
	c := s.newTenant(t)
	sid := c.v1Create(v1Put("", "one")).SessionID
	_, events := c.v1Stream("POST", "/v1/session/"+sid, streamUser("delta", "two"))
	if len(events) == 0 || events[0].Event != "turn_start" {
		t.Fatalf("POST stream starts with %v", eventTypes(events))
	}
	r := c.do("POST", "/v1/session/"+sid, user("three")).expect(t, http.StatusOK)
	var body map[string]json.RawMessage
	r.json(t, &body)
	if _, ok := body["sessionId"]; ok || string(body["stopReason"]) != `"end_turn"` {
		t.Errorf("POST answer %s", r.body)
	}
}

// Seed 004, PUT /session: agent (with agent.name) and messages are
// required; the last message must be a user message. Each refusal is a 400
// naming the member, and leaves no session.
func TestV1CreateLastMessageMustBeAUserMessage(t *testing.T) {
	t.Parallel()
	s := startParallelServer(t)
	c := s.newTenant(t)
	for _, tc := range []struct {
		name  string
		body  any
		field string
	}{
		{"last is assistant", map[string]any{"agent": map[string]any{"name": "echo"}, "messages": []any{
			map[string]any{"role": "user", "content": "hi"}, map[string]any{"role": "assistant", "content": "hello"}}}, "messages[1].role"},
		{"no messages", map[string]any{"agent": map[string]any{"name": "echo"}}, "messages"},
		{"empty messages", map[string]any{"agent": map[string]any{"name": "echo"}, "messages": []any{}}, "messages"},
		{"no agent", map[string]any{"messages": []any{map[string]any{"role": "user", "content": "hi"}}}, ""},
		{"no agent name", map[string]any{"agent": map[string]any{}, "messages": []any{map[string]any{"role": "user", "content": "hi"}}}, "agent.name"},
		{"unknown agent", map[string]any{"agent": map[string]any{"name": "nobody"}, "messages": []any{map[string]any{"role": "user", "content": "hi"}}}, "agent.name"},
		{"unknown stream mode", v1Put("chunk", "hi"), "stream"},
		{"tool with v3's parameters", func() any {
			b := v1Put("", "hi")
			b["tools"] = []any{map[string]any{"name": "t", "description": "d", "parameters": map[string]any{}}}
			return b
		}(), "tools[0].inputSchema"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := checkProblem(t, c.as(t).do("PUT", "/v1/session", tc.body), http.StatusBadRequest, "invalid-request")
			if f, _ := p["field"].(string); p != nil && f != tc.field {
				t.Errorf("field = %v, want %s (detail %v)", p["field"], tc.field, p["detail"])
			}
		})
	}
	if list := v1List(t, c, ""); len(list.Sessions) != 0 {
		t.Errorf("refused PUTs left sessions %v", list.Sessions)
	}
}

// Seed 004, GET /sessions: "Returns a paginated list of session IDs";
// "after — Pass the nextCursor value from the previous response", while
// seed 000 names it next. Both are sent, the same cursor, and taken back;
// both are absent on the last page.
func TestV1SessionsListIDsWithNextAndNextCursor(t *testing.T) {
	t.Parallel()
	s := startParallelServer(t)
	c := s.newTenant(t)
	var made []string
	for range 3 {
		made = append([]string{c.v1Create(v1Put("", "hi")).SessionID}, made...) // newest first
	}
	first := v1List(t, c, "?limit=2")
	if !reflect.DeepEqual(first.Sessions, made[:2]) || first.Next == "" || first.NextCursor != first.Next {
		t.Fatalf("first page = %+v, want %v with next = nextCursor", first, made[:2])
	}
	last := v1List(t, c, "?limit=2&after="+first.NextCursor)
	if !reflect.DeepEqual(last.Sessions, made[2:]) || last.Next != "" || last.NextCursor != "" {
		t.Fatalf("last page = %+v, want %v and no cursor", last, made[2:])
	}
	r := c.do("GET", "/v1/sessions?limit=2", nil).expect(t, http.StatusOK)
	if !bytes.Contains(r.body, []byte(`"next":`)) || !bytes.Contains(r.body, []byte(`"nextCursor":`)) {
		t.Errorf("body %s lacks next or nextCursor", r.body)
	}
	checkProblem(t, c.do("GET", "/v1/sessions?after=nonsense", nil), http.StatusBadRequest, "invalid-request")
	// The v3 listing holds the same sessions in the same order.
	if ids := sessionIDs(t, c, ""); !reflect.DeepEqual(ids, made) {
		t.Errorf("v3 lists %v, v1 made %v", ids, made)
	}
}

// Seed 004, GET /session/:id: "agent — the agent configuration for this
// session" (seed 000: "secret option values in agent.options must be
// redacted"), "tools — application-side tools declared for this session"
// with inputSchema, and the histories the agent declares (the echo agent
// declares both).
func TestV1SessionShowsAgentToolsAndHistoriesWithSecretsRedacted(t *testing.T) {
	t.Parallel()
	s := startParallelServer(t)
	c := s.newTenant(t)
	body := v1Put("", "hi")
	body["agent"] = map[string]any{"name": "echo", "tools": []any{map[string]any{"name": "clock", "trust": true}},
		"options": map[string]any{"prefix": "> ", "token": "s3cret"}}
	body["tools"] = []any{v1Tool("get_weather")}
	sid := c.v1Create(body).SessionID
	sess, r := c.v1Get(sid)
	if bytes.Contains(r.body, []byte("s3cret")) || sess.Agent.Options["token"] != aap.SecretPlaceholder || sess.Agent.Options["prefix"] != "> " {
		t.Errorf("agent = %+v (body %s)", sess.Agent, r.body)
	}
	if len(sess.Agent.Tools) != 1 || sess.Agent.Tools[0] != (aap.ServerToolRef{Name: "clock", Trust: true}) {
		t.Errorf("agent.tools = %+v", sess.Agent.Tools)
	}
	if len(sess.Tools) != 1 || sess.Tools[0].Name != "get_weather" || !strings.Contains(string(sess.Tools[0].InputSchema), `"location"`) {
		t.Errorf("tools = %+v", sess.Tools)
	}
	if sess.History == nil || len(sess.History.Full) != 2 || !reflect.DeepEqual(sess.History.Full, sess.History.Compacted) {
		t.Errorf("history = %+v", sess.History)
	}
}

// Seed 004, POST /session/:id: agent overrides and tools "must persist
// for the lifetime of the session"; options are merged by key (seed 000).
func TestV1TurnOverridesPersistForTheSession(t *testing.T) {
	t.Parallel()
	s := startParallelServer(t)
	c := s.newTenant(t)
	body := v1Put("", "hi")
	body["agent"] = map[string]any{"name": "echo", "options": map[string]any{"style": "shout"}}
	body["tools"] = []any{v1Tool("get_weather")}
	sid := c.v1Create(body).SessionID
	var resp v1.AgentResponse
	c.do("POST", "/v1/session/"+sid, map[string]any{
		"agent":    map[string]any{"options": map[string]any{"prefix": "v1> "}},
		"tools":    []any{v1Tool("get_time")},
		"messages": []any{map[string]any{"role": "user", "content": "hello"}},
	}).expect(t, http.StatusOK).json(t, &resp)
	if got := resp.Messages[0].Content.PlainText(); got != "V1> HELLO" {
		t.Errorf("answer %q, want the merged options' V1> HELLO (shouted, prefix and all)", got)
	}
	sess, _ := c.v1Get(sid)
	if sess.Agent.Options["style"] != "shout" || sess.Agent.Options["prefix"] != "v1> " || len(sess.Tools) != 1 || sess.Tools[0].Name != "get_time" {
		t.Errorf("session after overrides = %+v", sess)
	}
	resp = v1.AgentResponse{}
	c.do("POST", "/v1/session/"+sid, user("again")).expect(t, http.StatusOK).json(t, &resp)
	if got := resp.Messages[0].Content.PlainText(); got != "V1> AGAIN" {
		t.Errorf("next turn %q: the overrides did not persist", got)
	}
}

// Seed 004, POST /session/:id: "Send a new user turn or tool calling
// results"; seed 000: "a single user message, or a mixed list of tool
// results and tool permissions" — a client tool and an untrusted server
// tool called together, answered together.
func TestV1ToolResultsAndPermissionsAreSentTogether(t *testing.T) {
	t.Parallel()
	s := startParallelServer(t)
	c := s.newTenant(t)
	body := v1Put("message", "/tool get_weather {\"location\":\"Tokyo\"}\n/tool calculator {\"expression\":\"6*7\"}")
	body["agent"] = map[string]any{"name": "echo", "tools": []any{map[string]any{"name": "calculator"}}}
	body["tools"] = []any{v1Tool("get_weather")}
	_, events := c.v1Stream("PUT", "/v1/session", body)
	if got := eventTypes(events); !reflect.DeepEqual(got, []string{"session_start", "turn_start", "tool_call", "tool_call", "turn_stop"}) {
		t.Fatalf("events %v", got)
	}
	var start v1.SessionStart
	json.Unmarshal([]byte(events[0].Data), &start)
	calls := map[string]string{}
	for _, e := range events[2:4] {
		ev := e.parse(t)
		calls[ev.Name] = ev.ToolCallID
	}
	if events[4].parse(t).StopReason != aap.StopToolUse {
		t.Fatalf("turn_stop %s", events[4].Data)
	}
	var resp v1.AgentResponse
	c.do("POST", "/v1/session/"+start.SessionID, map[string]any{"messages": []any{
		map[string]any{"role": "tool", "toolCallId": calls["get_weather"], "content": "Tokyo: 18°C"},
		map[string]any{"role": "tool_permission", "toolCallId": calls["calculator"], "granted": true},
	}}).expect(t, http.StatusOK).json(t, &resp)
	if resp.StopReason != aap.StopEndTurn || len(resp.Messages) != 2 || resp.Messages[0].Content.PlainText() != "42" {
		t.Fatalf("after results and permission: %+v", resp)
	}
	sess, _ := c.v1Get(start.SessionID)
	for _, m := range sess.History.Full {
		if m.Role == aap.RoleToolPermission {
			t.Errorf("a tool_permission message was stored: %+v", m)
		}
	}
}

// Seed 004, DELETE /session/:id: "Deletes a session and its associated
// history", 204 No Content; the session is then unknown (404) through
// either door.
func TestV1DeleteAnswers204AndTheSessionIsGone(t *testing.T) {
	t.Parallel()
	s := startParallelServer(t)
	c := s.newTenant(t)
	sid := c.v1Create(v1Put("", "hi")).SessionID
	r := c.do("DELETE", "/v1/session/"+sid, nil).expect(t, http.StatusNoContent)
	if len(r.body) != 0 {
		t.Errorf("204 with a body %q", r.body)
	}
	checkProblem(t, c.do("GET", "/v1/session/"+sid, nil), http.StatusNotFound, "not-found")
	checkProblem(t, c.do("GET", "/sessions/"+sid, nil), http.StatusNotFound, "not-found")
	checkProblem(t, c.do("DELETE", "/v1/session/"+sid, nil), http.StatusNotFound, "not-found")
	checkProblem(t, c.do("POST", "/v1/session/"+sid, user("hi")), http.StatusNotFound, "not-found")
}

// With an Idempotency-Key, a retried PUT gets the same session and first
// turn back, and runs nothing twice.
func TestV1CreateIsIdempotentWithAKey(t *testing.T) {
	t.Parallel()
	s := startParallelServer(t)
	c := s.newTenant(t)
	body := v1Put("", "once")
	first := c.do("PUT", "/v1/session", body, httpapi.IdempotencyKeyHeader, "v1-put-1").expect(t, http.StatusCreated)
	again := c.do("PUT", "/v1/session", body, httpapi.IdempotencyKeyHeader, "v1-put-1").expect(t, http.StatusCreated)
	if !bytes.Equal(first.body, again.body) || again.Header.Get(httpapi.ReplayedHeader) != "true" {
		t.Fatalf("retry answered %s (replayed %q), first %s", again.body, again.Header.Get(httpapi.ReplayedHeader), first.body)
	}
	var out v1.AgentResponse
	first.json(t, &out)
	if sess, _ := c.v1Get(out.SessionID); len(sess.History.Full) != 2 {
		t.Errorf("history after a retry: %+v", sess.History.Full)
	}
	checkProblem(t, c.do("PUT", "/v1/session", v1Put("", "other"), httpapi.IdempotencyKeyHeader, "v1-put-1"),
		http.StatusUnprocessableEntity, "idempotency-key-reused")
	if list := v1List(t, c, ""); len(list.Sessions) != 1 {
		t.Errorf("sessions %v, want the one", list.Sessions)
	}
}

// One conversation, two doors: a session created over v1 has the same
// record and histories over v3, and takes v3 turns; a session created over
// v3 is read, listed and continued over v1.
func TestV1AndV3ShareSessions(t *testing.T) {
	t.Parallel()
	s := startParallelServer(t)
	c := s.newTenant(t)

	body := v1Put("", "seeded question", "seeded answer", "first turn")
	body["tools"] = []any{v1Tool("get_weather")}
	fromV1 := c.v1Create(body).SessionID
	c.say(fromV1, "a v3 turn")
	got, _ := c.v1Get(fromV1)
	for _, typ := range []aap.HistoryType{aap.HistoryFull, aap.HistoryCompacted} {
		want := c.history(fromV1, typ)
		inline := got.History.Full
		if typ == aap.HistoryCompacted {
			inline = got.History.Compacted
		}
		if !reflect.DeepEqual(inline, want) || len(want) != 6 {
			t.Errorf("%s history: v1 %+v, v3 %+v", typ, inline, want)
		}
	}
	var rec v3.SessionRecord
	c.do("GET", "/sessions/"+fromV1, nil).expect(t, http.StatusOK).json(t, &rec)
	if len(rec.Tools) != 1 || rec.Tools[0].Name != "get_weather" || !bytes.Equal(rec.Tools[0].Parameters, got.Tools[0].InputSchema) {
		t.Errorf("v3 tools %+v, v1 tools %+v", rec.Tools, got.Tools)
	}

	fromV3 := c.createSession(map[string]any{"agent": map[string]any{"name": "echo"},
		"messages": []any{map[string]any{"role": "system", "content": "be brief"}}})
	c.say(fromV3, "over v3")
	var resp v1.AgentResponse
	c.do("POST", "/v1/session/"+fromV3, user("over v1")).expect(t, http.StatusOK).json(t, &resp)
	if resp.Messages[0].Content.PlainText() != "Echo: over v1" {
		t.Errorf("v1 turn on a v3 session: %+v", resp)
	}
	sess, _ := c.v1Get(fromV3)
	if want := c.history(fromV3, aap.HistoryFull); !reflect.DeepEqual(sess.History.Full, want) || len(want) != 5 {
		t.Errorf("v3 session over v1: %+v, v3 says %+v", sess.History.Full, want)
	}
	if list := v1List(t, c, ""); !reflect.DeepEqual(list.Sessions, []string{fromV3, fromV1}) {
		t.Errorf("v1 lists %v", list.Sessions)
	}
}

// Another tenant's session is a 404 on every v1 route, the same 404 as a
// session that does not exist, and it changes nothing; the listing shows
// only the tenant's own.
func TestV1TenantIsolation(t *testing.T) {
	t.Parallel()
	s := startParallelServer(t)
	a, b := s.newTenant(t), s.newTenant(t)
	sid := a.v1Create(v1Put("", "tenant a's secret")).SessionID
	_, before := a.v1Get(sid)
	unknown := store.NewSessionID()
	for _, in := range []intrusion{
		{"get session", "GET", "/v1/session/{id}", nil},
		{"turn", "POST", "/v1/session/{id}", user("hi")},
		{"streamed turn", "POST", "/v1/session/{id}", streamUser("delta", "hi")},
		{"delete", "DELETE", "/v1/session/{id}", nil},
	} {
		t.Run(in.name, func(t *testing.T) {
			bb := b.as(t)
			want := notFoundShape(t, bb.do(in.method, strings.ReplaceAll(in.path, "{id}", unknown), in.body))
			if got := notFoundShape(t, bb.do(in.method, strings.ReplaceAll(in.path, "{id}", sid), in.body)); !reflect.DeepEqual(got, want) {
				t.Errorf("another tenant's session: %v, want the 404 of none %v", got, want)
			}
		})
	}
	if list := v1List(t, b, ""); len(list.Sessions) != 0 {
		t.Errorf("tenant b lists %v", list.Sessions)
	}
	if _, after := a.v1Get(sid); !bytes.Equal(after.body, before.body) {
		t.Errorf("tenant b changed the session: %s, was %s", after.body, before.body)
	}
}

// End users' tokens work on v1 as on v3: a session created with a token is
// its user's (v3 shows the owner), another user's is a 404, and each
// lists their own.
func TestV1EndUsersSeeOnlyTheirOwnSessions(t *testing.T) {
	t.Parallel()
	s := startParallelServer(t)
	tn := newOwnedTenant(t, s)
	mine := tn.user1.v1Create(v1Put("", "mine")).SessionID
	var rec v3.SessionRecord
	tn.key.do("GET", "/sessions/"+mine, nil).expect(t, http.StatusOK).json(t, &rec)
	if rec.Owner != "user1" {
		t.Errorf("owner = %q, want user1", rec.Owner)
	}
	checkProblem(t, tn.user2.do("GET", "/v1/session/"+mine, nil), http.StatusNotFound, "not-found")
	checkProblem(t, tn.user2.do("POST", "/v1/session/"+mine, user("hi")), http.StatusNotFound, "not-found")
	checkProblem(t, tn.user2.do("DELETE", "/v1/session/"+mine, nil), http.StatusNotFound, "not-found")
	if l := v1List(t, tn.user2, ""); len(l.Sessions) != 0 {
		t.Errorf("user2 lists %v", l.Sessions)
	}
	if l := v1List(t, tn.user1, ""); !reflect.DeepEqual(l.Sessions, []string{mine}) {
		t.Errorf("user1 lists %v", l.Sessions)
	}
	tn.user1.v1Get(mine)
}

// A key's scopes hold on v1 as on v3: a read-only key reads, and is
// refused (403) whatever would change a session.
func TestV1ScopesAreTheSameAsV3s(t *testing.T) {
	t.Parallel()
	s := startParallelServer(t)
	full, tenant := s.newTenantWithKey(t)
	sid := full.v1Create(v1Put("", "hi")).SessionID
	ro := s.keyWithScopes(t, tenant, "sessions:read")
	ro.do("GET", "/v1/sessions", nil).expect(t, http.StatusOK)
	ro.v1Get(sid)
	expectInsufficientScope(t, ro.do("PUT", "/v1/session", v1Put("", "hi")), "sessions:write")
	expectInsufficientScope(t, ro.do("POST", "/v1/session/"+sid, user("hi")), "sessions:write")
	expectInsufficientScope(t, ro.do("DELETE", "/v1/session/"+sid, nil), "sessions:write")
	wo := s.keyWithScopes(t, tenant, "sessions:write")
	expectInsufficientScope(t, wo.do("GET", "/v1/session/"+sid, nil), "sessions:read")
	expectInsufficientScope(t, wo.do("GET", "/v1/sessions", nil), "sessions:read")
	(&client{t: t, base: s.base}).do("GET", "/v1/sessions", nil).expect(t, http.StatusUnauthorized)
}

// A tenant's request rate holds on v1 routes too. The server has a
// database of its own: limits are shared among the live replicas of one.
func TestV1RoutesAreRateLimited(t *testing.T) {
	t.Parallel()
	s := startParallelServer(t, func(c *Config) { c.DatabaseURL = storetest.NewDatabase(t) })
	c, tn := s.newTenantWithID(t)
	if _, err := s.Store.TenantSetLimits(t.Context(), tn.ID, store.TenantLimits{RequestsPerSecond: 1, Burst: 2}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the limit to apply", 10*time.Second, func() bool {
		return c.do("GET", "/v1/sessions", nil).Header.Get("RateLimit-Policy") == `"tenant";q=2;w=2`
	})
	for range 100 {
		r := c.do("GET", "/v1/sessions", nil)
		if r.StatusCode == http.StatusTooManyRequests {
			checkProblem(t, r, http.StatusTooManyRequests, "rate-limited")
			return
		}
		r.expect(t, http.StatusOK)
	}
	t.Fatal("100 requests in a row passed a limit of one a second")
}

// A browser application may PUT: the CORS preflight of PUT /v1/session is
// allowed like AAP v3's POSTs.
func TestV1PutPassesTheCORSPreflight(t *testing.T) {
	t.Parallel()
	s := startParallelServer(t)
	anon := &client{t: t, base: s.base}
	r := anon.do("OPTIONS", "/v1/session", nil, "Origin", "https://playground.example",
		"Access-Control-Request-Method", "PUT", "Access-Control-Request-Headers", "authorization, content-type")
	r.expect(t, http.StatusNoContent)
	if m := r.Header.Get("Access-Control-Allow-Methods"); !strings.Contains(m, "PUT") {
		t.Errorf("Access-Control-Allow-Methods = %q, want PUT among them", m)
	}
}
