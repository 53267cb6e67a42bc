package main

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/agents"
)

// The rules of spec/ a rule-by-rule audit found aapd breaking, each tested
// over HTTP against a real server (issue 12).

// schema.md, response.md: "Tool names must be unique across application
// tools and agent tools in a single request" — also when a turn changes
// only agent.tools.
func TestToolNamesStayUniqueWhenATurnChangesOnlyAgentTools(t *testing.T) {
	s := startServer(t)
	c := s.newTenant(t)
	sid := c.echoSession(nil, "clock") // a client tool named like the echo agent's server tool
	r := c.do("POST", "/sessions/"+sid+"/turns", map[string]any{
		"agent":    map[string]any{"tools": []any{map[string]any{"name": "clock", "trust": true}}},
		"messages": []any{map[string]any{"role": "user", "content": "hi"}},
	})
	if p := checkProblem(t, r, http.StatusBadRequest, "invalid-request"); p != nil && p["field"] != "agent.tools[0].name" {
		t.Errorf("field = %v, want agent.tools[0].name", p["field"])
	}
	// Renaming the client tool in the same turn is fine.
	c.turn(sid, map[string]any{
		"agent":    map[string]any{"tools": []any{map[string]any{"name": "clock", "trust": true}}},
		"tools":    []any{clientTool("my_clock")},
		"messages": []any{map[string]any{"role": "user", "content": "hi"}},
	})
}

// endpoints.md: secret options are returned as an opaque placeholder.
// Sending the placeholder back (a client that resends the options it read)
// keeps the stored secret; a secret set to "" reads as "".
func TestResentSecretPlaceholderKeepsTheStoredSecret(t *testing.T) {
	s := startServer(t)
	c, tn := s.newTenantWithID(t)
	sid := c.createSession(map[string]any{"agent": map[string]any{"name": "echo", "options": map[string]string{"token": "hunter2"}}})
	var info aap.SessionInfo
	c.do("GET", "/sessions/"+sid, nil).expect(t, http.StatusOK).json(t, &info)
	c.turn(sid, map[string]any{"agent": map[string]any{"options": info.Agent.Options}, "messages": []any{map[string]any{"role": "user", "content": "hi"}}})
	sess, err := s.Store.SessionGet(t.Context(), tn.ID, sid)
	if err != nil || sess.SecretOptions["token"] != "hunter2" {
		t.Errorf("stored token = %q (%v), want hunter2 kept", sess.SecretOptions["token"], err)
	}
	// A new value replaces it; "" is a value, and reads as "".
	c.turn(sid, map[string]any{"agent": map[string]any{"options": map[string]string{"token": ""}}, "messages": []any{map[string]any{"role": "user", "content": "hi"}}})
	c.do("GET", "/sessions/"+sid, nil).expect(t, http.StatusOK).json(t, &info)
	if v, ok := info.Agent.Options["token"]; !ok || v != "" {
		t.Errorf("a secret set to \"\" reads as %q (present %v)", v, ok)
	}
	if got := c.say(sid, "/options").Messages[0].Content.PlainText(); !strings.Contains(got, "token=unset") {
		t.Errorf("the agent sees %q", got)
	}
	// With no stored value, "***" is a value like any other.
	sid2 := c.createSession(map[string]any{"agent": map[string]any{"name": "echo"}})
	c.turn(sid2, map[string]any{"agent": map[string]any{"options": map[string]string{"token": "***"}}, "messages": []any{map[string]any{"role": "user", "content": "hi"}}})
	if sess, err := s.Store.SessionGet(t.Context(), tn.ID, sid2); err != nil || sess.SecretOptions["token"] != "***" {
		t.Errorf("token set to *** with nothing stored = %q (%v)", sess.SecretOptions["token"], err)
	}
}

// schema.md: a UserMessage's content and a ToolResult's are
// ContentBlock[], any block: thinking included.
func TestThinkingBlocksAreAllowedInUserMessages(t *testing.T) {
	s := startServer(t)
	c := s.newTenant(t)
	sid := c.createSession(map[string]any{"agent": map[string]any{"name": "echo"},
		"messages": msgs(msg("user", "content", []any{map[string]any{"type": "thinking", "thinking": "pondering"}, map[string]any{"type": "text", "text": "seeded"}}))})
	resp := c.turn(sid, map[string]any{"messages": []any{msg("user", "content", []any{
		map[string]any{"type": "thinking", "thinking": "hmm"}, map[string]any{"type": "text", "text": "hello"}})}})
	if got := resp.Messages[0].Content.PlainText(); got != "Echo: hello" {
		t.Errorf("answer = %q", got)
	}
	h := c.history(sid, aap.HistoryFull)
	if len(h) < 2 || !h[1].Content.IsBlocks() || h[1].Content.Blocks[0].Type != aap.BlockThinking {
		t.Errorf("history = %+v, want the thinking block kept", h)
	}
}

// schema.md: an AssistantMessage's content is ContentBlock[], images
// included, and seed history may hold any HistoryMessage.
func TestImagesAreAllowedInSeededAssistantMessages(t *testing.T) {
	s := startServer(t)
	c := s.newTenant(t)
	sid := c.createSession(map[string]any{"agent": map[string]any{"name": "echo"}, "messages": msgs(
		msg("user", "content", "draw a cat"),
		msg("assistant", "content", []any{map[string]any{"type": "text", "text": "here"}, map[string]any{"type": "image", "url": "https://example.com/cat.png"}}),
	)})
	c.say(sid, "thanks")
	if h := c.history(sid, aap.HistoryFull); len(h) != 4 || h[1].Content.Blocks[1].URL != "https://example.com/cat.png" {
		t.Errorf("history = %+v", h)
	}
}

// schema.md: a tool's name is any string; aapd takes MCP's rule, which
// allows '.', and maps such names for providers that refuse them.
func TestDotsAreAllowedInToolNames(t *testing.T) {
	s := startServer(t)
	c := s.newTenant(t)
	sid := c.echoSession(nil, "fs.read_file")
	calls := toolCalls(c.say(sid, `/tool fs.read_file {"path":"a"}`).Messages)
	if len(calls) != 1 || calls[0].Name != "fs.read_file" {
		t.Fatalf("calls = %+v", calls)
	}
	resp := c.turn(sid, map[string]any{"messages": []any{msg("tool", "toolCallId", calls[0].ToolCallID, "content", "contents")}})
	if resp.StopReason != aap.StopEndTurn {
		t.Errorf("after the result: %+v", resp)
	}
}

// schema.md: images are https:// URLs or base64 data: URIs. Schemes are
// case-insensitive (RFC 3986), so HTTPS:// is one; a data: URI that is not
// base64 is not one of the kinds the specification names, and is refused.
func TestImageURLSchemesAreCaseInsensitiveAndDataURIsBase64(t *testing.T) {
	s := startServer(t)
	c := s.newTenant(t)
	sid := c.echoSession(nil)
	for _, url := range []string{"HTTPS://example.com/cat.png", "Data:Image/PNG;Base64,iVBORw0KGgo="} {
		resp := c.turn(sid, map[string]any{"messages": []any{msg("user", "content", []any{map[string]any{"type": "image", "url": url}})}})
		if got := resp.Messages[0].Content.PlainText(); !strings.Contains(got, "[1 image(s)]") {
			t.Errorf("%s: answer %q", url, got)
		}
	}
	r := c.do("POST", "/sessions/"+sid+"/turns", map[string]any{"messages": []any{msg("user", "content",
		[]any{map[string]any{"type": "image", "url": "data:image/svg+xml,%3Csvg%2F%3E"}})}})
	if p := checkProblem(t, r, http.StatusBadRequest, "invalid-request"); p != nil && p["field"] != "messages[0].content[0].url" {
		t.Errorf("field = %v", p["field"])
	}
}

// schema.md: ToolSpec.description is required.
func TestClientToolWithoutDescriptionIsRefused(t *testing.T) {
	s := startServer(t)
	c := s.newTenant(t)
	r := c.do("POST", "/sessions", map[string]any{"agent": map[string]any{"name": "echo"},
		"tools": []any{map[string]any{"name": "lookup", "parameters": map[string]any{"type": "object"}}}})
	if p := checkProblem(t, r, http.StatusBadRequest, "invalid-request"); p != nil && !strings.Contains(p["detail"].(string), `"description" is required`) {
		t.Errorf("detail = %v", p["detail"])
	}
	sid := c.echoSession(nil)
	r = c.do("POST", "/sessions/"+sid+"/turns", map[string]any{"messages": []any{msg("user", "content", "hi")},
		"tools": []any{map[string]any{"name": "lookup", "parameters": map[string]any{}}}})
	checkProblem(t, r, http.StatusBadRequest, "invalid-request")
	// An empty description is a description.
	c.createSession(map[string]any{"agent": map[string]any{"name": "echo"},
		"tools": []any{map[string]any{"name": "lookup", "description": "", "parameters": map[string]any{"type": "object"}}}})
}

// endpoints.md: capabilities declare what an agent supports; an agent's
// can be switched off in the agents file, and GET /meta and every request
// follow.
func TestCapabilitiesSwitchedOffInTheAgentsFileAreDeclaredAndEnforced(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agents.yaml")
	if err := os.WriteFile(path, []byte(`
agents:
  - name: plain
    model: {provider: echo}
    capabilities: {image_data: false, client_tools: false, stream_delta: false, history_compacted: false}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, func(c *Config) { c.AgentsFile = path })
	c := s.newTenant(t)
	var meta aap.Meta
	c.do("GET", "/meta", nil).expect(t, http.StatusOK).json(t, &meta)
	caps := meta.Agents[0].Capabilities
	if caps.Image == nil || caps.Image.Data != nil || caps.Image.HTTP == nil || caps.Application != nil ||
		caps.Stream.Delta != nil || caps.Stream.Message == nil || caps.History.Compacted != nil || caps.History.Full == nil {
		t.Fatalf("capabilities in /meta = %+v", caps)
	}
	checkProblem(t, c.do("POST", "/sessions", map[string]any{"agent": map[string]any{"name": "plain"}, "tools": []any{clientTool("x")}}),
		http.StatusBadRequest, "invalid-request")
	sid := c.createSession(map[string]any{"agent": map[string]any{"name": "plain"}})
	checkProblem(t, c.do("POST", "/sessions/"+sid+"/turns", map[string]any{"messages": []any{msg("user", "content",
		[]any{map[string]any{"type": "image", "url": "data:image/png;base64,iVBORw0KGgo="}})}}), http.StatusBadRequest, "invalid-request")
	checkProblem(t, c.do("POST", "/sessions/"+sid+"/turns", streamUser("delta", "hi")), http.StatusBadRequest, "invalid-request")
	checkProblem(t, c.do("GET", "/sessions/"+sid+"/history?type=compacted", nil), http.StatusNotFound, "not-found")
	// What stays on works.
	c.say(sid, "hi")
	c.do("GET", "/sessions/"+sid+"/history?type=full", nil).expect(t, http.StatusOK)
}

// tool-call.md, response.md: the server stores a tool message for a denied
// permission, and aapd closes the calls a user message moves past; both are
// sent as tool_result events (first in the turn) and in the stream "none"
// answer, so a client keeping its own history, as the official TypeScript
// client does from the events it receives, has them too.
func TestMessagesTheServerAddsToTheHistoryAreSentOnTheStream(t *testing.T) {
	s := startServer(t)
	c := s.newTenant(t)
	sid := c.echoSession([]aap.ServerToolRef{{Name: "clock"}}, "lookup")
	calls := toolCalls(c.say(sid, "/tool clock {}").Messages)
	_, events := c.stream(sid, map[string]any{"stream": "message", "messages": []any{map[string]any{
		"role": "tool_permission", "toolCallId": calls[0].ToolCallID, "granted": false, "reason": "no"}}})
	if len(events) < 3 || events[1].Event != "tool_result" {
		t.Fatalf("events = %v", eventTypes(events))
	}
	if e := events[1].parse(t); e.ToolCallID != calls[0].ToolCallID || e.Content.PlainText() != agents.DenialText("no") {
		t.Errorf("denial event = %+v", e)
	}

	calls = toolCalls(c.say(sid, "/tool lookup {}\n/tool clock {}").Messages)
	resp := c.say(sid, "never mind")
	if len(resp.Messages) != 3 {
		t.Fatalf("answer = %+v, want the two closed calls and the reply", resp.Messages)
	}
	for i, call := range calls {
		if m := resp.Messages[i]; m.Role != aap.RoleTool || m.ToolCallID != call.ToolCallID || m.Content.PlainText() != agents.CancelledToolCallText {
			t.Errorf("answer[%d] = %+v", i, m)
		}
	}
	// Streamed, the same messages come as tool_result events.
	calls = toolCalls(c.say(sid, "/tool lookup {}").Messages)
	_, events = c.stream(sid, streamUser("delta", "moving on"))
	if types := eventTypes(events); len(types) < 3 || types[1] != "tool_result" || events[1].parse(t).ToolCallID != calls[0].ToolCallID {
		t.Errorf("events = %v", types)
	}
}
