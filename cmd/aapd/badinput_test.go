package main

import (
	"encoding/base64"
	"net/http"
	"strings"
	"testing"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/aapclient"
	"github.com/aapd/aapd/store"
)

// Raw requests: malformed and hostile input is the wire itself.

// badCase is a request the server must refuse with a problem, never a 5xx.
type badCase struct {
	name   string
	method string
	path   string // may contain {sid}: the test's session
	body   any    // string bodies are sent as they are
	status int
	slug   string
	// field, when set, is the problem's expected "field" member: the JSON
	// path (or query parameter) of the offending value.
	field string
	// detail, when set, must appear in the problem's detail: how decoding
	// errors (which carry no field member) name the offending element.
	detail string
	// allow, for a 405, are the methods the Allow header must list (RFC
	// 9110 section 15.5.6).
	allow []string
}

// Bodies reused by the cases.
func createBody(extra map[string]any) map[string]any {
	b := map[string]any{"agent": map[string]any{"name": "echo"}}
	for k, v := range extra {
		b[k] = v
	}
	return b
}

func agentBody(agent map[string]any, extra ...any) map[string]any {
	b := map[string]any{"agent": agent}
	for i := 0; i+1 < len(extra); i += 2 {
		b[extra[i].(string)] = extra[i+1]
	}
	return b
}

func clientTool(name string) map[string]any {
	return map[string]any{"name": name, "description": "d", "parameters": map[string]any{"type": "object"}}
}

func msg(role string, kv ...any) map[string]any {
	m := map[string]any{"role": role}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1]
	}
	return m
}

func msgs(m ...any) []any { return m }

func cursorOf(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

func TestBadInputs(t *testing.T) {
	t.Parallel()
	s := startParallelServer(t)
	c, tn := s.newTenantWithID(t)
	tenantID := tn.ID
	// The session the turn cases target: the trusted clock server tool is
	// enabled and "lookup" is a client tool; no tool call is pending.
	sid := c.echoSession([]aap.ServerToolRef{{Name: "clock", Trust: true}}, "lookup")
	unknownSID := store.NewSessionID()

	big := `{"agent":{"name":"echo"},"messages":[{"role":"user","content":"` + strings.Repeat("a", 1<<20+1024) + `"}]}`
	bigTurn := `{"messages":[{"role":"user","content":"` + strings.Repeat("a", 1<<20+1024) + `"}]}`
	userHi := msg("user", "content", "hi")
	turn := func(kv ...any) map[string]any {
		b := map[string]any{"messages": msgs(userHi)}
		for i := 0; i+1 < len(kv); i += 2 {
			b[kv[i].(string)] = kv[i+1]
		}
		return b
	}

	const (
		bad      = http.StatusBadRequest
		invalid  = "invalid-request"
		notFound = "not-found"
	)
	cases := []badCase{
		// ---- POST /sessions: the body is not the JSON object it must be.
		{name: "malformed JSON", method: "POST", path: "/sessions", body: `{"agent":`, status: bad, slug: invalid, detail: "malformed JSON"},
		{name: "a misspelt member is named", method: "POST", path: "/sessions", body: `{"agnet":{"name":"echo"}}`, status: bad, slug: invalid,
			detail: `"agent" is required; the body's member "agnet" (did you mean "agent"?) is not one of a create-session request's`},
		{name: "malformed JSON inside", method: "POST", path: "/sessions", body: `{"agent":{"name":"echo",}}`, status: bad, slug: invalid},
		{name: "trailing garbage", method: "POST", path: "/sessions", body: `{"agent":{"name":"echo"}} {"x":1}`, status: bad, slug: invalid},
		{name: "trailing text", method: "POST", path: "/sessions", body: `{"agent":{"name":"echo"}}garbage`, status: bad, slug: invalid},
		{name: "array instead of object", method: "POST", path: "/sessions", body: `[{"agent":{"name":"echo"}}]`, status: bad, slug: invalid},
		{name: "string instead of object", method: "POST", path: "/sessions", body: `"echo"`, status: bad, slug: invalid},
		{name: "null body", method: "POST", path: "/sessions", body: `null`, status: bad, slug: invalid},
		{name: "empty body", method: "POST", path: "/sessions", body: ``, status: bad, slug: invalid},
		{name: "whitespace body", method: "POST", path: "/sessions", body: " \n\t ", status: bad, slug: invalid},
		{name: "oversized body", method: "POST", path: "/sessions", body: big, status: http.StatusRequestEntityTooLarge, slug: "payload-too-large"},

		// ---- POST /sessions: wrong JSON types.
		{name: "agent as string", method: "POST", path: "/sessions", body: map[string]any{"agent": "echo"}, status: bad, slug: invalid, detail: "agent"},
		{name: "agent as array", method: "POST", path: "/sessions", body: map[string]any{"agent": []any{"echo"}}, status: bad, slug: invalid, detail: "agent"},
		{name: "agent.name as number", method: "POST", path: "/sessions", body: agentBody(map[string]any{"name": 7}), status: bad, slug: invalid, detail: "agent.name"},
		{name: "agent.tools not an array", method: "POST", path: "/sessions", body: agentBody(map[string]any{"name": "echo", "tools": "clock"}), status: bad, slug: invalid, detail: "agent.tools"},
		{name: "agent.tools trust as string", method: "POST", path: "/sessions", body: agentBody(map[string]any{"name": "echo", "tools": []any{map[string]any{"name": "clock", "trust": "yes"}}}), status: bad, slug: invalid, detail: "agent.tools[0]"},
		{name: "options value a number", method: "POST", path: "/sessions", body: agentBody(map[string]any{"name": "echo", "options": map[string]any{"style": 1}}), status: bad, slug: invalid, detail: "agent.options"},
		{name: "options an array", method: "POST", path: "/sessions", body: agentBody(map[string]any{"name": "echo", "options": []any{"style"}}), status: bad, slug: invalid, detail: "agent.options"},
		{name: "messages not an array", method: "POST", path: "/sessions", body: createBody(map[string]any{"messages": map[string]any{"role": "user", "content": "hi"}}), status: bad, slug: invalid, detail: "messages"},
		{name: "message not an object", method: "POST", path: "/sessions", body: createBody(map[string]any{"messages": msgs("hi")}), status: bad, slug: invalid, detail: "messages[0]"},
		{name: "content a number", method: "POST", path: "/sessions", body: createBody(map[string]any{"messages": msgs(msg("user", "content", 42))}), status: bad, slug: invalid, detail: "messages[0]"},
		{name: "content missing", method: "POST", path: "/sessions", body: createBody(map[string]any{"messages": msgs(msg("user"))}), status: bad, slug: invalid, detail: "messages[0]"},
		{name: "role missing", method: "POST", path: "/sessions", body: createBody(map[string]any{"messages": msgs(map[string]any{"content": "hi"})}), status: bad, slug: invalid, detail: "messages[0]"},
		{name: "unknown role", method: "POST", path: "/sessions", body: createBody(map[string]any{"messages": msgs(msg("developer", "content", "hi"))}), status: bad, slug: invalid, detail: "messages[0]"},
		{name: "tools not an array", method: "POST", path: "/sessions", body: createBody(map[string]any{"tools": clientTool("lookup")}), status: bad, slug: invalid, detail: "tools"},

		// ---- POST /sessions: the agent and its configuration.
		{name: "missing agent", method: "POST", path: "/sessions", body: map[string]any{}, status: bad, slug: invalid, detail: "agent"},
		{name: "agent null", method: "POST", path: "/sessions", body: map[string]any{"agent": nil}, status: bad, slug: invalid, detail: "agent"},
		{name: "missing agent.name", method: "POST", path: "/sessions", body: agentBody(map[string]any{}), status: bad, slug: invalid, field: "agent.name"},
		{name: "empty agent.name", method: "POST", path: "/sessions", body: agentBody(map[string]any{"name": ""}), status: bad, slug: invalid, field: "agent.name"},
		{name: "unknown agent", method: "POST", path: "/sessions", body: agentBody(map[string]any{"name": "nope"}), status: bad, slug: invalid, field: "agent.name", detail: "nope"},
		{name: "undeclared option", method: "POST", path: "/sessions", body: agentBody(map[string]any{"name": "echo", "options": map[string]any{"colour": "red"}}), status: bad, slug: invalid, field: "agent.options.colour"},
		{name: "select value not in the list", method: "POST", path: "/sessions", body: agentBody(map[string]any{"name": "echo", "options": map[string]any{"style": "whisper"}}), status: bad, slug: invalid, field: "agent.options.style", detail: "whisper"},
		{name: "unknown server tool", method: "POST", path: "/sessions", body: agentBody(map[string]any{"name": "echo", "tools": []any{map[string]any{"name": "web_search"}}}), status: bad, slug: invalid, field: "agent.tools[0].name", detail: "web_search"},
		{name: "duplicated server tool ref", method: "POST", path: "/sessions", body: agentBody(map[string]any{"name": "echo", "tools": []any{map[string]any{"name": "clock"}, map[string]any{"name": "clock", "trust": true}}}), status: bad, slug: invalid, field: "agent.tools[1].name"},
		{name: "client tool with invalid name", method: "POST", path: "/sessions", body: createBody(map[string]any{"tools": []any{clientTool("get weather")}}), status: bad, slug: invalid, field: "tools[0].name"},
		{name: "client tool with empty name", method: "POST", path: "/sessions", body: createBody(map[string]any{"tools": []any{clientTool("")}}), status: bad, slug: invalid, field: "tools[0].name"},
		{name: "client tool name too long", method: "POST", path: "/sessions", body: createBody(map[string]any{"tools": []any{clientTool(strings.Repeat("x", 129))}}), status: bad, slug: invalid, field: "tools[0].name"},
		{name: "client tools with duplicate names", method: "POST", path: "/sessions", body: createBody(map[string]any{"tools": []any{clientTool("lookup"), clientTool("other"), clientTool("lookup")}}), status: bad, slug: invalid, field: "tools[2].name"},
		{name: "client tool clashing with an enabled server tool", method: "POST", path: "/sessions", body: agentBody(map[string]any{"name": "echo", "tools": []any{map[string]any{"name": "clock"}}}, "tools", []any{clientTool("clock")}), status: bad, slug: invalid, field: "tools[0].name", detail: "clock"},
		{name: "client tool missing parameters", method: "POST", path: "/sessions", body: createBody(map[string]any{"tools": []any{map[string]any{"name": "lookup", "description": "d"}}}), status: bad, slug: invalid, detail: "tools[0]"},
		{name: "client tool parameters not an object", method: "POST", path: "/sessions", body: createBody(map[string]any{"tools": []any{map[string]any{"name": "lookup", "description": "d", "parameters": "object"}}}), status: bad, slug: invalid, detail: "tools[0]"},
		{name: "client tool missing name", method: "POST", path: "/sessions", body: createBody(map[string]any{"tools": []any{map[string]any{"description": "d", "parameters": map[string]any{}}}}), status: bad, slug: invalid, detail: "tools[0]"},

		// ---- POST /sessions: seed history.
		{name: "seed message with role tool_permission", method: "POST", path: "/sessions", body: createBody(map[string]any{"messages": msgs(msg("tool_permission", "toolCallId", "call_1", "granted", true))}), status: bad, slug: invalid, field: "messages[0].role"},
		{name: "seed tool result without a call", method: "POST", path: "/sessions", body: createBody(map[string]any{"messages": msgs(msg("user", "content", "hi"), msg("tool", "toolCallId", "call_1", "content", "x"))}), status: bad, slug: invalid, field: "messages[1].toolCallId"},
		{name: "seed tool result for another call", method: "POST", path: "/sessions", body: createBody(map[string]any{"tools": []any{clientTool("lookup")}, "messages": msgs(
			msg("assistant", "content", []any{map[string]any{"type": "tool_use", "toolCallId": "call_1", "name": "lookup", "input": map[string]any{}}}),
			msg("tool", "toolCallId", "call_2", "content", "x"))}), status: bad, slug: invalid, field: "messages[1].toolCallId"},
		{name: "seed moves on before a tool result", method: "POST", path: "/sessions", body: createBody(map[string]any{"tools": []any{clientTool("lookup")}, "messages": msgs(
			msg("assistant", "content", []any{map[string]any{"type": "tool_use", "toolCallId": "call_1", "name": "lookup", "input": map[string]any{}}}),
			msg("user", "content", "hi"))}), status: bad, slug: invalid, field: "messages[1]"},
		{name: "seed system message with block content", method: "POST", path: "/sessions", body: createBody(map[string]any{"messages": msgs(msg("system", "content", []any{map[string]any{"type": "text", "text": "Be brief."}}))}), status: bad, slug: invalid, detail: "messages[0]"},
		{name: "seed tool result without toolCallId", method: "POST", path: "/sessions", body: createBody(map[string]any{"messages": msgs(msg("tool", "content", "x"))}), status: bad, slug: invalid, detail: "messages[0]"},
		{name: "seed user message with a tool_use block", method: "POST", path: "/sessions", body: createBody(map[string]any{"messages": msgs(msg("user", "content", []any{map[string]any{"type": "tool_use", "toolCallId": "c", "name": "x", "input": map[string]any{}}}))}), status: bad, slug: invalid, field: "messages[0].content[0].type"},
		{name: "bad image url", method: "POST", path: "/sessions", body: createBody(map[string]any{"messages": msgs(msg("user", "content", []any{map[string]any{"type": "image", "url": "ftp://example.com/cat.png"}}))}), status: bad, slug: invalid, field: "messages[0].content[0].url"},
		{name: "plain http image url", method: "POST", path: "/sessions", body: createBody(map[string]any{"messages": msgs(msg("user", "content", []any{map[string]any{"type": "text", "text": "look"}, map[string]any{"type": "image", "url": "http://example.com/cat.png"}}))}), status: bad, slug: invalid, field: "messages[0].content[1].url"},
		{name: "image without url", method: "POST", path: "/sessions", body: createBody(map[string]any{"messages": msgs(msg("user", "content", []any{map[string]any{"type": "image"}}))}), status: bad, slug: invalid, detail: "messages[0]: content[0]:"},
		{name: "unknown content block type", method: "POST", path: "/sessions", body: createBody(map[string]any{"messages": msgs(msg("user", "content", "hi"), msg("assistant", "content", []any{map[string]any{"type": "text", "text": "a"}, map[string]any{"type": "audio", "data": "x"}}))}), status: bad, slug: invalid, detail: "messages[1]: content[1]:"},
		{name: "content block without type", method: "POST", path: "/sessions", body: createBody(map[string]any{"messages": msgs(msg("user", "content", []any{map[string]any{"text": "hi"}}))}), status: bad, slug: invalid, detail: "messages[0]: content[0]:"},
		{name: "text block without text", method: "POST", path: "/sessions", body: createBody(map[string]any{"messages": msgs(msg("user", "content", []any{map[string]any{"type": "text"}}))}), status: bad, slug: invalid, detail: "messages[0]: content[0]:"},
		{name: "text block with numeric text", method: "POST", path: "/sessions", body: createBody(map[string]any{"messages": msgs(msg("user", "content", []any{map[string]any{"type": "text", "text": 5}}))}), status: bad, slug: invalid, detail: "messages[0]: content[0]:"},
		{name: "tool_use block without input", method: "POST", path: "/sessions", body: createBody(map[string]any{"messages": msgs(msg("assistant", "content", []any{map[string]any{"type": "tool_use", "toolCallId": "call_1", "name": "lookup"}}))}), status: bad, slug: invalid, detail: "messages[0]: content[0]:"},
		{name: "tool_use block with invalid tool name", method: "POST", path: "/sessions", body: createBody(map[string]any{"messages": msgs(msg("assistant", "content", []any{map[string]any{"type": "tool_use", "toolCallId": "call_1", "name": "no spaces", "input": map[string]any{}}}))}), status: bad, slug: invalid, field: "messages[0].content[0].name"},
		{name: "tool call id used twice in seed", method: "POST", path: "/sessions", body: createBody(map[string]any{"tools": []any{clientTool("lookup")}, "messages": msgs(
			msg("assistant", "content", []any{map[string]any{"type": "tool_use", "toolCallId": "call_1", "name": "lookup", "input": map[string]any{}}, map[string]any{"type": "tool_use", "toolCallId": "call_1", "name": "lookup", "input": map[string]any{}}}))}), status: bad, slug: invalid, field: "messages[0].content"},

		// ---- POST /sessions/:id/turns.
		{name: "turn: malformed JSON", method: "POST", path: "/sessions/{sid}/turns", body: `{"messages":[`, status: bad, slug: invalid, detail: "malformed JSON"},
		{name: "turn: trailing garbage", method: "POST", path: "/sessions/{sid}/turns", body: `{"messages":[{"role":"user","content":"hi"}]}]`, status: bad, slug: invalid},
		{name: "turn: array instead of object", method: "POST", path: "/sessions/{sid}/turns", body: `[{"role":"user","content":"hi"}]`, status: bad, slug: invalid},
		{name: "turn: empty body", method: "POST", path: "/sessions/{sid}/turns", body: ``, status: bad, slug: invalid},
		{name: "turn: oversized body", method: "POST", path: "/sessions/{sid}/turns", body: bigTurn, status: http.StatusRequestEntityTooLarge, slug: "payload-too-large"},
		{name: "turn: a misspelt member is named", method: "POST", path: "/sessions/{sid}/turns", body: `{"message":"hi"}`, status: bad, slug: invalid,
			field: "messages", detail: `the body's member "message" (did you mean "messages"?) is not one of a turn request's`},
		{name: "turn: stream a number", method: "POST", path: "/sessions/{sid}/turns", body: turn("stream", 1), status: bad, slug: invalid, detail: "stream"},
		{name: "turn: stream a boolean", method: "POST", path: "/sessions/{sid}/turns", body: turn("stream", true), status: bad, slug: invalid, detail: "stream"},
		{name: "turn: unknown stream mode", method: "POST", path: "/sessions/{sid}/turns", body: turn("stream", "fast"), status: bad, slug: invalid, field: "stream", detail: "fast"},
		{name: "turn: stream mode in capitals", method: "POST", path: "/sessions/{sid}/turns", body: turn("stream", "DELTA"), status: bad, slug: invalid, field: "stream"},
		{name: "turn: messages not an array", method: "POST", path: "/sessions/{sid}/turns", body: map[string]any{"messages": userHi}, status: bad, slug: invalid, detail: "messages"},
		{name: "turn: content a number", method: "POST", path: "/sessions/{sid}/turns", body: map[string]any{"messages": msgs(msg("user", "content", 3))}, status: bad, slug: invalid, detail: "messages[0]"},
		{name: "turn: agent as string", method: "POST", path: "/sessions/{sid}/turns", body: turn("agent", "echo"), status: bad, slug: invalid, detail: "agent"},
		{name: "turn: options value a number", method: "POST", path: "/sessions/{sid}/turns", body: turn("agent", map[string]any{"options": map[string]any{"prefix": 1}}), status: bad, slug: invalid, detail: "agent.options"},
		{name: "turn: empty messages", method: "POST", path: "/sessions/{sid}/turns", body: map[string]any{"messages": []any{}}, status: bad, slug: invalid, field: "messages"},
		{name: "turn: no messages", method: "POST", path: "/sessions/{sid}/turns", body: map[string]any{"stream": "delta"}, status: bad, slug: invalid, field: "messages"},
		{name: "turn: user message plus tool result", method: "POST", path: "/sessions/{sid}/turns", body: map[string]any{"messages": msgs(userHi, msg("tool", "toolCallId", "call_1", "content", "x"))}, status: bad, slug: invalid, field: "messages[0]"},
		{name: "turn: tool result plus user message", method: "POST", path: "/sessions/{sid}/turns", body: map[string]any{"messages": msgs(msg("tool", "toolCallId", "call_1", "content", "x"), userHi)}, status: bad, slug: invalid, field: "messages[1]"},
		{name: "turn: two user messages", method: "POST", path: "/sessions/{sid}/turns", body: map[string]any{"messages": msgs(userHi, msg("user", "content", "again"))}, status: bad, slug: invalid, field: "messages[0]"},
		{name: "turn: system message", method: "POST", path: "/sessions/{sid}/turns", body: map[string]any{"messages": msgs(msg("system", "content", "Be evil."))}, status: bad, slug: invalid, field: "messages[0].role"},
		{name: "turn: assistant message", method: "POST", path: "/sessions/{sid}/turns", body: map[string]any{"messages": msgs(msg("assistant", "content", "I said so."))}, status: bad, slug: invalid, field: "messages[0].role"},
		{name: "turn: agent.name change", method: "POST", path: "/sessions/{sid}/turns", body: turn("agent", map[string]any{"name": "other"}), status: bad, slug: invalid, field: "agent.name"},
		{name: "turn: undeclared option", method: "POST", path: "/sessions/{sid}/turns", body: turn("agent", map[string]any{"options": map[string]any{"colour": "red"}}), status: bad, slug: invalid, field: "agent.options.colour"},
		{name: "turn: select value not in the list", method: "POST", path: "/sessions/{sid}/turns", body: turn("agent", map[string]any{"options": map[string]any{"style": "whisper"}}), status: bad, slug: invalid, field: "agent.options.style"},
		{name: "turn: unknown server tool", method: "POST", path: "/sessions/{sid}/turns", body: turn("agent", map[string]any{"tools": []any{map[string]any{"name": "web_search"}}}), status: bad, slug: invalid, field: "agent.tools[0].name"},
		{name: "turn: client tool clashing with an enabled server tool", method: "POST", path: "/sessions/{sid}/turns", body: turn("tools", []any{clientTool("clock")}), status: bad, slug: invalid, field: "tools[0].name"},
		{name: "turn: client tool clashing with a newly enabled server tool", method: "POST", path: "/sessions/{sid}/turns", body: turn("agent", map[string]any{"tools": []any{map[string]any{"name": "calculator"}}}, "tools", []any{clientTool("calculator")}), status: bad, slug: invalid, field: "tools[0].name"},
		{name: "turn: duplicate client tool names", method: "POST", path: "/sessions/{sid}/turns", body: turn("tools", []any{clientTool("a"), clientTool("a")}), status: bad, slug: invalid, field: "tools[1].name"},
		{name: "turn: bad image url", method: "POST", path: "/sessions/{sid}/turns", body: map[string]any{"messages": msgs(msg("user", "content", []any{map[string]any{"type": "image", "url": "data:text/plain,hi"}}))}, status: bad, slug: invalid, field: "messages[0].content[0].url"},
		{name: "turn: tool result when nothing is pending", method: "POST", path: "/sessions/{sid}/turns", body: map[string]any{"messages": msgs(msg("tool", "toolCallId", "call_1", "content", "x"))}, status: bad, slug: invalid, field: "messages"},
		{name: "turn: tool permission when nothing is pending", method: "POST", path: "/sessions/{sid}/turns", body: map[string]any{"messages": msgs(msg("tool_permission", "toolCallId", "call_1", "granted", true))}, status: bad, slug: invalid, field: "messages"},
		{name: "turn: tool permission without granted", method: "POST", path: "/sessions/{sid}/turns", body: map[string]any{"messages": msgs(msg("tool_permission", "toolCallId", "call_1"))}, status: bad, slug: invalid, detail: "messages[0]"},
		{name: "turn: tool result answered twice", method: "POST", path: "/sessions/{sid}/turns", body: map[string]any{"messages": msgs(msg("tool", "toolCallId", "call_1", "content", "x"), msg("tool", "toolCallId", "call_1", "content", "y"))}, status: bad, slug: invalid, field: "messages[1].toolCallId"},

		// ---- GET /sessions.
		{name: "list: limit=0", method: "GET", path: "/sessions?limit=0", status: bad, slug: invalid, field: "limit"},
		{name: "list: limit=101", method: "GET", path: "/sessions?limit=101", status: bad, slug: invalid, field: "limit"},
		{name: "list: limit=-1", method: "GET", path: "/sessions?limit=-1", status: bad, slug: invalid, field: "limit"},
		{name: "list: limit=abc", method: "GET", path: "/sessions?limit=abc", status: bad, slug: invalid, field: "limit"},
		{name: "list: limit=1.5", method: "GET", path: "/sessions?limit=1.5", status: bad, slug: invalid, field: "limit"},
		{name: "list: limit huge", method: "GET", path: "/sessions?limit=99999999999999999999999", status: bad, slug: invalid, field: "limit"},
		{name: "list: after=garbage", method: "GET", path: "/sessions?after=garbage", status: bad, slug: invalid, field: "after"},
		{name: "list: after not base64", method: "GET", path: "/sessions?after=%25%25%25", status: bad, slug: invalid, field: "after"},
		{name: "list: after a bare session id", method: "GET", path: "/sessions?after=" + unknownSID, status: bad, slug: invalid, field: "after"},
		{name: "list: after encodes a non-session", method: "GET", path: "/sessions?after=" + cursorOf("turn_123"), status: bad, slug: invalid, field: "after"},
		{name: "list: after encodes invalid UTF-8", method: "GET", path: "/sessions?after=" + cursorOf("sess_\xff\xfe"), status: bad, slug: invalid, field: "after"},
		{name: "list: after encodes a NUL byte", method: "GET", path: "/sessions?after=" + cursorOf("sess_\x00"), status: bad, slug: invalid, field: "after"},

		// ---- GET /sessions/:id/history.
		{name: "history: type missing", method: "GET", path: "/sessions/{sid}/history", status: bad, slug: invalid, field: "type"},
		{name: "history: type empty", method: "GET", path: "/sessions/{sid}/history?type=", status: bad, slug: invalid, field: "type"},
		{name: "history: type invalid", method: "GET", path: "/sessions/{sid}/history?type=partial", status: bad, slug: invalid, field: "type"},
		{name: "history: type in capitals", method: "GET", path: "/sessions/{sid}/history?type=FULL", status: bad, slug: invalid, field: "type"},

		// ---- Unknown and malformed session ids.
		{name: "get unknown session", method: "GET", path: "/sessions/" + unknownSID, status: http.StatusNotFound, slug: notFound},
		{name: "delete unknown session", method: "DELETE", path: "/sessions/" + unknownSID, status: http.StatusNotFound, slug: notFound},
		{name: "history of unknown session", method: "GET", path: "/sessions/" + unknownSID + "/history?type=full", status: http.StatusNotFound, slug: notFound},
		{name: "turn on unknown session", method: "POST", path: "/sessions/" + unknownSID + "/turns", body: turn(), status: http.StatusNotFound, slug: notFound},
		{name: "streamed turn on unknown session", method: "POST", path: "/sessions/" + unknownSID + "/turns", body: turn("stream", "delta"), status: http.StatusNotFound, slug: notFound},
		{name: "malformed session id", method: "GET", path: "/sessions/not-a-session", status: http.StatusNotFound, slug: notFound},
		{name: "malformed session id: delete", method: "DELETE", path: "/sessions/12345", status: http.StatusNotFound, slug: notFound},
		{name: "malformed session id: turn", method: "POST", path: "/sessions/abc/turns", body: turn(), status: http.StatusNotFound, slug: notFound},
		{name: "malformed session id: history", method: "GET", path: "/sessions/abc/history?type=full", status: http.StatusNotFound, slug: notFound},
		{name: "overlong session id", method: "GET", path: "/sessions/sess_" + strings.Repeat("0", 200), status: http.StatusNotFound, slug: notFound},
		{name: "session id of bare prefix", method: "GET", path: "/sessions/sess_", status: http.StatusNotFound, slug: notFound},
		{name: "session id with invalid UTF-8", method: "GET", path: "/sessions/sess_%FF%FE", status: http.StatusNotFound, slug: notFound},
		{name: "session id with NUL", method: "GET", path: "/sessions/sess_%00", status: http.StatusNotFound, slug: notFound},
		{name: "turn on session id with invalid UTF-8", method: "POST", path: "/sessions/sess_%C3%28/turns", body: turn(), status: http.StatusNotFound, slug: notFound},
		{name: "history of session id with invalid UTF-8", method: "GET", path: "/sessions/sess_%FF/history?type=full", status: http.StatusNotFound, slug: notFound},
		{name: "delete session id with NUL", method: "DELETE", path: "/sessions/sess_abc%00def", status: http.StatusNotFound, slug: notFound},

		// ---- Routing.
		{name: "unknown route", method: "GET", path: "/session", status: http.StatusNotFound, slug: notFound},
		{name: "unknown nested route", method: "GET", path: "/sessions/{sid}/turns/latest", status: http.StatusNotFound, slug: notFound},
		{name: "v1 singular route", method: "PUT", path: "/session", body: createBody(nil), status: http.StatusNotFound, slug: notFound},
		{name: "wrong method on /sessions", method: "PUT", path: "/sessions", body: createBody(nil), status: http.StatusMethodNotAllowed, slug: "method-not-allowed", allow: []string{"GET", "POST"}},
		{name: "wrong method on a session", method: "PATCH", path: "/sessions/{sid}", body: map[string]any{}, status: http.StatusMethodNotAllowed, slug: "method-not-allowed", allow: []string{"GET", "DELETE"}},
		{name: "wrong method on turns", method: "DELETE", path: "/sessions/{sid}/turns", status: http.StatusMethodNotAllowed, slug: "method-not-allowed", allow: []string{"GET", "POST"}},
		{name: "wrong method on history", method: "POST", path: "/sessions/{sid}/history", body: map[string]any{}, status: http.StatusMethodNotAllowed, slug: "method-not-allowed", allow: []string{"GET"}},
		{name: "wrong method on meta", method: "POST", path: "/meta", body: map[string]any{}, status: http.StatusMethodNotAllowed, slug: "method-not-allowed", allow: []string{"GET"}},
	}

	// The cases run in parallel within one group, so that the checks after
	// it see the session once they are all done.
	t.Run("cases", func(t *testing.T) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				r := c.as(t).do(tc.method, strings.ReplaceAll(tc.path, "{sid}", sid), tc.body)
				p := checkProblem(t, r, tc.status, tc.slug)
				if p == nil {
					return
				}
				if tc.field != "" && p["field"] != tc.field {
					t.Errorf("field = %v, want %q (detail %v)", p["field"], tc.field, p["detail"])
				}
				if tc.detail != "" {
					if d, _ := p["detail"].(string); !strings.Contains(d, tc.detail) {
						t.Errorf("detail %q does not name %q", d, tc.detail)
					}
				}
				for _, m := range tc.allow {
					if allow := r.Header.Get("Allow"); !strings.Contains(allow, m) {
						t.Errorf("405 without %s in its Allow header %q", m, allow)
					}
				}
				if tc.status == http.StatusNotFound && p["field"] != nil {
					t.Errorf("a not-found problem names a field: %v", p["field"])
				}
			})
		}
	})

	// No refused request created a session or changed this one: no
	// history, no pending calls, its configuration as created.
	if list := c.listSessions(aapclient.ListOptions{}); len(list.Sessions) != 1 || list.Sessions[0].SessionID != sid {
		t.Errorf("after the refused requests the tenant has sessions %+v, want only %s", list.Sessions, sid)
	}
	if h := c.history(sid, aap.HistoryFull); len(h) != 0 {
		t.Errorf("refused turns left history: %+v", h)
	}
	stored, err := s.Store.SessionGet(t.Context(), tenantID, sid)
	if err != nil {
		t.Fatal(err)
	}
	if len(stored.Options) != 0 || len(stored.SecretOptions) != 0 || len(stored.Pending) != 0 || stored.ActiveTurnID != "" ||
		len(stored.AgentTools) != 1 || stored.AgentTools[0] != (aap.ServerToolRef{Name: "clock", Trust: true}) ||
		len(stored.ClientTools) != 1 || stored.ClientTools[0].Name != "lookup" {
		t.Errorf("refused turns changed the session: %+v", stored)
	}
}

// A turn request may carry members the specification does not name (a
// client's extensions): they are ignored, and the turn runs.
func TestTurnRequestMembersTheSpecDoesNotNameAreIgnored(t *testing.T) {
	t.Parallel()
	c := startParallelServer(t).newTenant(t)
	sid := c.echoSession(nil)
	r := c.do("POST", "/sessions/"+sid+"/turns", `{"messages":[{"role":"user","content":"hi"}],"x-client":{"trace":"abc"}}`).expect(t, http.StatusOK)
	var resp aap.TurnResponse
	r.json(t, &resp)
	if resp.StopReason != aap.StopEndTurn {
		t.Errorf("stop reason %q, want end_turn", resp.StopReason)
	}
}
