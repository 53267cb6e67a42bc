package aap_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/aapd/aapd/aap"
)

// compactJSON removes insignificant whitespace, for comparing shapes.
func compactJSON(t *testing.T, s string) string {
	t.Helper()
	var buf bytes.Buffer
	if err := json.Compact(&buf, []byte(s)); err != nil {
		t.Fatalf("bad JSON in test %q: %v", s, err)
	}
	return buf.String()
}

func mustMarshal(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("marshal %+v: %v", v, err)
	}
	return string(b)
}

// TestMessageJSONShapePerRole decodes each kind of message and writes it
// back: the output is exactly the spec's shape for the role, in the same
// form (string or blocks) as it came in.
func TestMessageJSONShapePerRole(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		in   string
		out  string // "" means the same as in
		role aap.Role
	}{
		{name: "system", in: `{"role":"system","content":"You are a helpful assistant."}`, role: aap.RoleSystem},
		{name: "user string", in: `{"role":"user","content":"What's the weather in Tokyo?"}`, role: aap.RoleUser},
		{name: "user empty string", in: `{"role":"user","content":""}`, role: aap.RoleUser},
		{name: "user blocks", in: `{"role":"user","content":[{"type":"text","text":"What is this?"},{"type":"image","url":"https://example.com/cat.png"}]}`, role: aap.RoleUser},
		{name: "user data image", in: `{"role":"user","content":[{"type":"image","url":"data:image/png;base64,iVBORw0KGgo="}]}`, role: aap.RoleUser},
		{name: "user empty blocks", in: `{"role":"user","content":[]}`, role: aap.RoleUser},
		{name: "assistant string", in: `{"role":"assistant","content":"The capital of France is Paris."}`, role: aap.RoleAssistant},
		{name: "assistant blocks", in: `{"role":"assistant","content":[
			{"type":"thinking","thinking":"The user wants the weather in Tokyo."},
			{"type":"text","text":"Let me check that for you."},
			{"type":"tool_use","toolCallId":"call_001","name":"get_weather","input":{"location":"Tokyo"}}]}`, role: aap.RoleAssistant},
		{name: "tool string", in: `{"role":"tool","toolCallId":"call_001","content":"Tokyo: 18°C, partly cloudy"}`, role: aap.RoleTool},
		{name: "tool blocks", in: `{"role":"tool","toolCallId":"call_001","content":[{"type":"text","text":"a chart"},{"type":"image","url":"https://example.com/chart.png"}]}`, role: aap.RoleTool},
		{name: "tool_permission granted", in: `{"role":"tool_permission","toolCallId":"call_002","granted":true}`, role: aap.RoleToolPermission},
		{name: "tool_permission denied with reason", in: `{"role":"tool_permission","toolCallId":"call_002","granted":false,"reason":"User declined"}`, role: aap.RoleToolPermission},
		{name: "tool_permission denied without reason", in: `{"role":"tool_permission","toolCallId":"call_002","granted":false}`, role: aap.RoleToolPermission},
		// Members of other roles are not kept or written.
		{name: "user with foreign members", in: `{"role":"user","content":"hi","toolCallId":"call_1","granted":true}`,
			out: `{"role":"user","content":"hi"}`, role: aap.RoleUser},
		{name: "tool_permission with content", in: `{"role":"tool_permission","toolCallId":"c","granted":true,"content":"x"}`,
			out: `{"role":"tool_permission","toolCallId":"c","granted":true}`, role: aap.RoleToolPermission},
		// Key order and whitespace of the input do not matter.
		{name: "reordered tool message", in: `{ "content" : "ok", "toolCallId" : "c1", "role" : "tool" }`,
			out: `{"role":"tool","toolCallId":"c1","content":"ok"}`, role: aap.RoleTool},
		{name: "tool_use input is compacted", in: `{"role":"assistant","content":[{"type":"tool_use","toolCallId":"c","name":"f","input":{ "a" : [1, 2] }}]}`,
			out: `{"role":"assistant","content":[{"type":"tool_use","toolCallId":"c","name":"f","input":{"a":[1,2]}}]}`, role: aap.RoleAssistant},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var m aap.Message
			if err := json.Unmarshal([]byte(tc.in), &m); err != nil {
				t.Fatalf("decode: %v", err)
			}
			if m.Role != tc.role {
				t.Errorf("role = %q, want %q", m.Role, tc.role)
			}
			want := tc.out
			if want == "" {
				want = compactJSON(t, tc.in)
			}
			if got := mustMarshal(t, m); got != want {
				t.Errorf("re-encoded\n got %s\nwant %s", got, want)
			}
		})
	}
}

func TestMessageConstructorsWriteTheSpecShapes(t *testing.T) {
	t.Parallel()
	cases := []struct {
		msg  aap.Message
		want string
	}{
		{aap.SystemMessage("Be brief."), `{"role":"system","content":"Be brief."}`},
		{aap.UserMessage("hi"), `{"role":"user","content":"hi"}`},
		{aap.AssistantMessage(aap.TextBlock("hello")), `{"role":"assistant","content":[{"type":"text","text":"hello"}]}`},
		{aap.AssistantMessage(), `{"role":"assistant","content":[]}`},
		{aap.ToolMessage("call_1", "42"), `{"role":"tool","toolCallId":"call_1","content":"42"}`},
		{aap.Message{Role: aap.RoleToolPermission, ToolCallID: "call_2", Granted: false, Reason: "no"},
			`{"role":"tool_permission","toolCallId":"call_2","granted":false,"reason":"no"}`},
	}
	for _, tc := range cases {
		if got := mustMarshal(t, tc.msg); got != tc.want {
			t.Errorf("got %s, want %s", got, tc.want)
		}
	}
	if _, err := json.Marshal(aap.Message{Role: "narrator"}); err == nil {
		t.Error("a message of an unknown role was encoded")
	}
}

// TestContentIsStringOrBlocksAsReceived checks that content keeps the form
// it was given in, while reading the same either way.
func TestContentIsStringOrBlocksAsReceived(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in       string
		isBlocks bool
		plain    string
		nBlocks  int
	}{
		{`"hello"`, false, "hello", 1},
		{`""`, false, "", 0},
		{`[{"type":"text","text":"hello"}]`, true, "hello", 1},
		{`[]`, true, "", 0},
		{`[{"type":"text","text":"a"},{"type":"image","url":"https://x.example/i.png"},{"type":"text","text":"b"}]`, true, "a\nb", 3},
		{`[{"type":"thinking","thinking":"hmm"}]`, true, "", 1},
		{` "padded" `, false, "padded", 1},
	}
	for _, tc := range cases {
		var c aap.Content
		if err := json.Unmarshal([]byte(tc.in), &c); err != nil {
			t.Errorf("%s: %v", tc.in, err)
			continue
		}
		if c.IsBlocks() != tc.isBlocks || c.PlainText() != tc.plain || len(c.AsBlocks()) != tc.nBlocks {
			t.Errorf("%s: blocks %v, plain %q, %d blocks", tc.in, c.IsBlocks(), c.PlainText(), len(c.AsBlocks()))
		}
		if got, want := mustMarshal(t, c), compactJSON(t, tc.in); got != want {
			t.Errorf("%s re-encoded as %s", tc.in, got)
		}
	}
	if got := mustMarshal(t, aap.Content{}); got != `""` {
		t.Errorf("zero content = %s, want an empty string", got)
	}
	if got := mustMarshal(t, aap.BlockContent()); got != `[]` {
		t.Errorf("BlockContent() = %s, want []", got)
	}
	if got := mustMarshal(t, aap.TextContent("x")); got != `"x"` {
		t.Errorf("TextContent = %s", got)
	}
}

func TestContentBlockJSONShapePerType(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		in    string
		out   string
		block aap.ContentBlock
	}{
		{"text", `{"type":"text","text":"hello"}`, "", aap.TextBlock("hello")},
		{"empty text", `{"type":"text","text":""}`, "", aap.TextBlock("")},
		{"thinking", `{"type":"thinking","thinking":"hmm"}`, "", aap.ThinkingBlock("hmm")},
		{"tool_use", `{"type":"tool_use","toolCallId":"call_1","name":"get_weather","input":{"location":"Tokyo"}}`, "",
			aap.ToolUseBlock(aap.ToolCall{ToolCallID: "call_1", Name: "get_weather", Input: json.RawMessage(`{"location":"Tokyo"}`)})},
		{"tool_use empty input", `{"type":"tool_use","toolCallId":"c","name":"clock","input":{}}`, "",
			aap.ToolUseBlock(aap.ToolCall{ToolCallID: "c", Name: "clock", Input: json.RawMessage(`{}`)})},
		{"image https", `{"type":"image","url":"https://example.com/a.png"}`, "", aap.ContentBlock{Type: aap.BlockImage, URL: "https://example.com/a.png"}},
		{"image data", `{"type":"image","url":"data:image/png;base64,AAAA"}`, "", aap.ContentBlock{Type: aap.BlockImage, URL: "data:image/png;base64,AAAA"}},
		{"text with foreign members", `{"type":"text","text":"x","url":"https://e.example","thinking":"y"}`, `{"type":"text","text":"x"}`, aap.TextBlock("x")},
		{"image with foreign members", `{"url":"https://e.example/i","type":"image","text":"caption"}`, `{"type":"image","url":"https://e.example/i"}`,
			aap.ContentBlock{Type: aap.BlockImage, URL: "https://e.example/i"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var b aap.ContentBlock
			if err := json.Unmarshal([]byte(tc.in), &b); err != nil {
				t.Fatalf("decode: %v", err)
			}
			want := tc.out
			if want == "" {
				want = tc.in
			}
			if got := mustMarshal(t, b); got != want {
				t.Errorf("re-encoded %s, want %s", got, want)
			}
			if got := mustMarshal(t, tc.block); got != want {
				t.Errorf("constructed block encodes as %s, want %s", got, want)
			}
		})
	}
	// A tool_use block built without input still carries an object.
	if got := mustMarshal(t, aap.ToolUseBlock(aap.ToolCall{ToolCallID: "c", Name: "f"})); got != `{"type":"tool_use","toolCallId":"c","name":"f","input":{}}` {
		t.Errorf("tool_use without input = %s", got)
	}
	if _, err := json.Marshal(aap.ContentBlock{Type: "audio"}); err == nil {
		t.Error("a block of an unknown type was encoded")
	}
	call := aap.ToolUseBlock(aap.ToolCall{ToolCallID: "c", Name: "f", Input: json.RawMessage(`{"x":1}`)}).ToolCall()
	if call.ToolCallID != "c" || call.Name != "f" || string(call.Input) != `{"x":1}` {
		t.Errorf("ToolCall() = %+v", call)
	}
}

// TestEventDataPayloads checks the data line of every SSE event type, and
// that ParseEvent reads it back.
func TestEventDataPayloads(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		event aap.Event
		data  string
	}{
		{"turn_start", aap.TurnStart(), `{}`},
		{"text_delta", aap.Event{Type: aap.EventTextDelta, Delta: "The weather in Tokyo is "}, `{"delta":"The weather in Tokyo is "}`},
		{"thinking_delta", aap.Event{Type: aap.EventThinkingDelta, Delta: "The user is asking"}, `{"delta":"The user is asking"}`},
		{"empty text_delta", aap.Event{Type: aap.EventTextDelta}, `{"delta":""}`},
		{"text", aap.Event{Type: aap.EventText, Text: "18°C, partly cloudy."}, `{"text":"18°C, partly cloudy."}`},
		{"thinking", aap.Event{Type: aap.EventThinking, Thinking: "use the weather tool"}, `{"thinking":"use the weather tool"}`},
		{"tool_call", aap.ToolCallEvent(aap.ToolCall{ToolCallID: "call_001", Name: "get_weather", Input: json.RawMessage(`{"location":"Tokyo"}`)}),
			`{"toolCallId":"call_001","name":"get_weather","input":{"location":"Tokyo"}}`},
		{"tool_call without input", aap.ToolCallEvent(aap.ToolCall{ToolCallID: "call_002", Name: "clock"}), `{"toolCallId":"call_002","name":"clock","input":{}}`},
		{"tool_result string", aap.ToolResultEvent("call_002", aap.TextContent("Tokyo: 18°C")), `{"toolCallId":"call_002","content":"Tokyo: 18°C"}`},
		{"tool_result blocks", aap.ToolResultEvent("call_002", aap.BlockContent(aap.TextBlock("a"), aap.ContentBlock{Type: aap.BlockImage, URL: "https://e.example/i"})),
			`{"toolCallId":"call_002","content":[{"type":"text","text":"a"},{"type":"image","url":"https://e.example/i"}]}`},
		{"turn_stop end_turn", aap.TurnStop(aap.StopEndTurn), `{"stopReason":"end_turn"}`},
		{"turn_stop tool_use", aap.TurnStop(aap.StopToolUse), `{"stopReason":"tool_use"}`},
		{"turn_stop max_tokens", aap.TurnStop(aap.StopMaxTokens), `{"stopReason":"max_tokens"}`},
		{"turn_stop refusal", aap.TurnStop(aap.StopRefusal), `{"stopReason":"refusal"}`},
		{"turn_stop error", aap.TurnStop(aap.StopError), `{"stopReason":"error"}`},
		{"turn_stop error with its error object", aap.TurnStopError(aap.TurnError{Type: aap.TurnErrorModel, Message: "the model failed"}),
			`{"stopReason":"error","error":{"type":"model_error","message":"the model failed"}}`},
		{"turn_start of the session event log", aap.Event{Type: aap.EventTurnStart, TurnID: "turn_1"}, `{"turnId":"turn_1"}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := mustMarshal(t, tc.event); got != tc.data {
				t.Errorf("data = %s, want %s", got, tc.data)
			}
			back, err := aap.ParseEvent(tc.event.Type, []byte(tc.data))
			if err != nil {
				t.Fatalf("ParseEvent: %v", err)
			}
			if back.Type != tc.event.Type {
				t.Errorf("parsed type %q", back.Type)
			}
			if got := mustMarshal(t, back); got != tc.data {
				t.Errorf("parsed event re-encodes as %s, want %s", got, tc.data)
			}
		})
	}
	if _, err := json.Marshal(aap.Event{Type: "progress"}); err == nil {
		t.Error("an event of an unknown type was encoded")
	}
	if _, err := aap.ParseEvent(aap.EventText, []byte(`{"text":`)); err == nil {
		t.Error("ParseEvent accepted malformed data")
	}
}

func TestToolSpecJSON(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, in, out string
	}{
		{"with title", `{"name":"web_search","title":"Web Search","description":"Search the web","parameters":{"type":"object","properties":{"query":{"type":"string"}},"required":["query"]}}`, ""},
		{"without title", `{"name":"get_weather","description":"Get current weather","parameters":{"type":"object"}}`, ""},
		{"empty title is omitted", `{"name":"f","title":"","description":"d","parameters":{}}`, `{"name":"f","description":"d","parameters":{}}`},
		{"empty description", `{"name":"f","description":"","parameters":{"type":"object"}}`, ""},
		{"parameters are compacted", `{"name":"f","description":"d","parameters":{ "type" : "object" }}`, `{"name":"f","description":"d","parameters":{"type":"object"}}`},
	}
	var spec aap.ToolSpec
	if err := json.Unmarshal([]byte(`{"name":"f","parameters":{"type":"object"}}`), &spec); err == nil || !strings.Contains(err.Error(), `"description" is required`) {
		t.Errorf("a tool without a description (the spec requires one): %v", err)
	}
	for _, tc := range cases {
		var spec aap.ToolSpec
		if err := json.Unmarshal([]byte(tc.in), &spec); err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		want := tc.out
		if want == "" {
			want = tc.in
		}
		if got := mustMarshal(t, spec); got != want {
			t.Errorf("%s: %s, want %s", tc.name, got, want)
		}
	}
}

// TestAgentInfoAndCapabilitiesJSON checks GET /meta's shapes: capability
// flags are {}, optional members are omitted, defaults always present.
func TestAgentInfoAndCapabilitiesJSON(t *testing.T) {
	t.Parallel()
	e := &aap.Empty{}
	full := aap.AgentInfo{
		Name: "research-agent", Title: "Research Agent", Version: "1.2.0", Description: "Researches.",
		Tools: []aap.ToolSpec{{Name: "web_search", Title: "Web Search", Description: "Search the web", Parameters: json.RawMessage(`{"type":"object"}`)}},
		Options: []aap.AgentOption{
			{Type: aap.OptionSelect, Name: "model", Title: "Model", Options: []string{"a", "b"}, Default: "a"},
			{Type: aap.OptionText, Name: "language", Description: "Response language", Default: "English"},
			{Type: aap.OptionSecret, Name: "api_key", Default: ""},
		},
		Capabilities: &aap.Capabilities{
			History:     &aap.HistoryCapabilities{Compacted: e, Full: e},
			Stream:      &aap.StreamCapabilities{Delta: e, Message: e, None: e},
			Application: &aap.ApplicationCapabilities{Tools: e},
			Image:       &aap.ImageCapabilities{HTTP: e, Data: e},
		},
	}
	cases := []struct {
		name string
		v    any
		want string
	}{
		{"full agent", full, `{"name":"research-agent","title":"Research Agent","version":"1.2.0","description":"Researches.",
			"tools":[{"name":"web_search","title":"Web Search","description":"Search the web","parameters":{"type":"object"}}],
			"options":[{"type":"select","name":"model","title":"Model","options":["a","b"],"default":"a"},
				{"type":"text","name":"language","description":"Response language","default":"English"},
				{"type":"secret","name":"api_key","default":""}],
			"capabilities":{"history":{"compacted":{},"full":{}},"stream":{"delta":{},"message":{},"none":{}},
				"application":{"tools":{}},"image":{"http":{},"data":{}}}}`},
		{"minimal agent", aap.AgentInfo{Name: "tiny", Version: "0.1.0"}, `{"name":"tiny","version":"0.1.0"}`},
		{"empty capabilities", aap.Capabilities{}, `{}`},
		{"partial capabilities", aap.Capabilities{Stream: &aap.StreamCapabilities{None: e}, History: &aap.HistoryCapabilities{Full: e}},
			`{"history":{"full":{}},"stream":{"none":{}}}`},
		{"meta", aap.Meta{Version: aap.Version, Agents: []aap.AgentInfo{{Name: "tiny", Version: "0.1.0"}}},
			`{"version":3,"agents":[{"name":"tiny","version":"0.1.0"}]}`},
		{"server tool ref", aap.ServerToolRef{Name: "web_search"}, `{"name":"web_search","trust":false}`},
		{"agent config", aap.AgentConfig{Name: "echo"}, `{"name":"echo"}`},
		{"agent config with tools and options", aap.AgentConfig{Name: "echo", Tools: []aap.ServerToolRef{{Name: "clock", Trust: true}}, Options: map[string]string{"style": "shout"}},
			`{"name":"echo","tools":[{"name":"clock","trust":true}],"options":{"style":"shout"}}`},
		{"session info", aap.SessionInfo{SessionID: "sess_1", Agent: aap.AgentConfig{Name: "echo"}}, `{"sessionId":"sess_1","agent":{"name":"echo"}}`},
		{"session list, last page", aap.SessionList{Sessions: []aap.SessionInfo{}}, `{"sessions":[]}`},
		{"session list with next", aap.SessionList{Sessions: []aap.SessionInfo{}, Next: "abc"}, `{"sessions":[],"next":"abc"}`},
		{"create response", aap.CreateSessionResponse{SessionID: "sess_1"}, `{"sessionId":"sess_1"}`},
		{"turn response", aap.TurnResponse{StopReason: aap.StopEndTurn, Messages: []aap.Message{aap.AssistantMessage(aap.TextBlock("hi"))}},
			`{"stopReason":"end_turn","messages":[{"role":"assistant","content":[{"type":"text","text":"hi"}]}]}`},
		{"history response", aap.HistoryResponse{History: map[aap.HistoryType][]aap.Message{aap.HistoryFull: {aap.UserMessage("hi")}}},
			`{"history":{"full":[{"role":"user","content":"hi"}]}}`},
	}
	for _, tc := range cases {
		if got, want := mustMarshal(t, tc.v), compactJSON(t, tc.want); got != want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, got, want)
		}
	}
	// And /meta reads back to the same value.
	var back aap.AgentInfo
	if err := json.Unmarshal([]byte(mustMarshal(t, full)), &back); err != nil {
		t.Fatal(err)
	}
	if mustMarshal(t, back) != mustMarshal(t, full) {
		t.Errorf("agent info does not round-trip: %s", mustMarshal(t, back))
	}
}
