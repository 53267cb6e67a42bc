package openai

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/agents"
)

// TestGenerateStreams feeds recorded-style streams through Generate and
// checks the deltas, the assembled message, the stop reason and the usage.
func TestGenerateStreams(t *testing.T) {
	tests := []struct {
		name      string
		chunks    []string
		deltas    []agents.ModelDelta
		message   string // the message as AAP JSON
		stop      aap.StopReason
		usage     agents.Usage
		toolCalls int // tool_use blocks whose ids the server did not give
	}{
		{
			name: "plain text in several chunks and a usage-only last chunk",
			chunks: []string{roleChunk, content("The weather"), content(" in Tokyo"), content(" is mild."),
				finish("stop"), usage(12, 5)},
			deltas:  []agents.ModelDelta{text("The weather"), text(" in Tokyo"), text(" is mild.")},
			message: `{"role":"assistant","content":[{"type":"text","text":"The weather in Tokyo is mild."}]}`,
			stop:    aap.StopEndTurn,
			usage:   agents.Usage{InputTokens: 12, OutputTokens: 5},
		},
		{
			name: "reasoning_content deltas (vLLM, DeepSeek, LiteLLM)",
			chunks: []string{
				chunk(`{"role":"assistant","content":null,"reasoning_content":""}`),
				chunk(`{"content":null,"reasoning_content":"The user wants"}`),
				chunk(`{"content":null,"reasoning_content":" a greeting."}`),
				chunk(`{"content":"Hello","reasoning_content":null}`),
				chunk(`{"content":"!"}`),
				finish("stop"), usage(7, 9)},
			deltas:  []agents.ModelDelta{think("The user wants"), think(" a greeting."), text("Hello"), text("!")},
			message: `{"role":"assistant","content":[{"type":"thinking","thinking":"The user wants a greeting."},{"type":"text","text":"Hello!"}]}`,
			stop:    aap.StopEndTurn,
			usage:   agents.Usage{InputTokens: 7, OutputTokens: 9},
		},
		{
			name: "reasoning deltas (Ollama, OpenRouter)",
			chunks: []string{
				chunk(`{"role":"assistant","content":"","reasoning":"Two plus two"}`),
				chunk(`{"role":"assistant","content":"","reasoning":" is four."}`),
				chunk(`{"role":"assistant","content":"4"}`),
				finish("stop")},
			deltas:  []agents.ModelDelta{think("Two plus two"), think(" is four."), text("4")},
			message: `{"role":"assistant","content":[{"type":"thinking","thinking":"Two plus two is four."},{"type":"text","text":"4"}]}`,
			stop:    aap.StopEndTurn,
		},
		{
			name: "both reasoning fields with the same text are read once",
			chunks: []string{
				chunk(`{"role":"assistant","reasoning_content":"Hmm.","reasoning":"Hmm."}`),
				content("Yes."), finish("stop")},
			deltas:  []agents.ModelDelta{think("Hmm."), text("Yes.")},
			message: `{"role":"assistant","content":[{"type":"thinking","thinking":"Hmm."},{"type":"text","text":"Yes."}]}`,
			stop:    aap.StopEndTurn,
		},
		{
			name: "two parallel tool calls with interleaved argument chunks",
			chunks: []string{
				roleChunk,
				content("Checking."),
				chunk(`{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"get_weather","arguments":""}}]}`),
				chunk(`{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"clock","arguments":""}}]}`),
				chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"{\"loc"}}]}`),
				chunk(`{"tool_calls":[{"index":1,"function":{"arguments":"{\"timezone\": "}}]}`),
				chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"ation\": \"Tokyo\"}"}}]}`),
				chunk(`{"tool_calls":[{"index":1,"function":{"arguments":"\"Asia/Tokyo\"}"}}]}`),
				finish("tool_calls"), usage(30, 40)},
			deltas: []agents.ModelDelta{text("Checking.")},
			message: `{"role":"assistant","content":[{"type":"text","text":"Checking."},` +
				`{"type":"tool_use","toolCallId":"call_a","name":"get_weather","input":{"location":"Tokyo"}},` +
				`{"type":"tool_use","toolCallId":"call_b","name":"clock","input":{"timezone":"Asia/Tokyo"}}]}`,
			stop:  aap.StopToolUse,
			usage: agents.Usage{InputTokens: 30, OutputTokens: 40},
		},
		{
			name: "two calls at index 0 with different ids and finish_reason stop (older Ollama)",
			chunks: []string{
				chunk(`{"role":"assistant","content":"","tool_calls":[{"id":"call_1","index":0,"type":"function","function":{"name":"clock","arguments":"{}"}}]}`),
				chunk(`{"role":"assistant","content":"","tool_calls":[{"id":"call_2","index":0,"type":"function","function":{"name":"calculator","arguments":"{\"expression\":\"2+2\"}"}}]}`),
				finish("stop")},
			message: `{"role":"assistant","content":[{"type":"tool_use","toolCallId":"call_1","name":"clock","input":{}},` +
				`{"type":"tool_use","toolCallId":"call_2","name":"calculator","input":{"expression":"2+2"}}]}`,
			stop: aap.StopToolUse,
		},
		{
			name: "arguments that are not a JSON object are kept raw",
			chunks: []string{
				chunk(`{"tool_calls":[{"index":0,"id":"call_x","type":"function","function":{"name":"search","arguments":"{\"q\": \"un"}}]}`),
				chunk(`{"tool_calls":[{"index":1,"id":"call_y","type":"function","function":{"name":"clock","arguments":""}}]}`),
				chunk(`{"tool_calls":[{"index":2,"id":"call_z","type":"function","function":{"name":"echo","arguments":"[1,2]"}}]}`),
				finish("tool_calls")},
			message: `{"role":"assistant","content":[{"type":"tool_use","toolCallId":"call_x","name":"search","input":{"_raw":"{\"q\": \"un"}},` +
				`{"type":"tool_use","toolCallId":"call_y","name":"clock","input":{"_raw":""}},` +
				`{"type":"tool_use","toolCallId":"call_z","name":"echo","input":{"_raw":"[1,2]"}}]}`,
			stop: aap.StopToolUse,
		},
		{
			name:    "finish_reason length",
			chunks:  []string{roleChunk, content("Once upon a"), finish("length"), usage(3, 3)},
			deltas:  []agents.ModelDelta{text("Once upon a")},
			message: `{"role":"assistant","content":[{"type":"text","text":"Once upon a"}]}`,
			stop:    aap.StopMaxTokens,
			usage:   agents.Usage{InputTokens: 3, OutputTokens: 3},
		},
		{
			name:    "finish_reason content_filter",
			chunks:  []string{roleChunk, content("I"), finish("content_filter")},
			deltas:  []agents.ModelDelta{text("I")},
			message: `{"role":"assistant","content":[{"type":"text","text":"I"}]}`,
			stop:    aap.StopRefusal,
		},
		{
			name: "refusal deltas become the text",
			chunks: []string{roleChunk,
				chunk(`{"refusal":"I'm sorry, "}`),
				chunk(`{"refusal":"I can't help with that."}`),
				finish("stop"), usage(10, 8)},
			deltas:  []agents.ModelDelta{text("I'm sorry, "), text("I can't help with that.")},
			message: `{"role":"assistant","content":[{"type":"text","text":"I'm sorry, I can't help with that."}]}`,
			stop:    aap.StopRefusal,
			usage:   agents.Usage{InputTokens: 10, OutputTokens: 8},
		},
		{
			name: "running usage on every chunk: the last one counts",
			chunks: []string{
				`{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"a"}}],"usage":{"prompt_tokens":4,"completion_tokens":1,"total_tokens":5}}`,
				`{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"b"},"finish_reason":"stop"}],"usage":{"prompt_tokens":4,"completion_tokens":2,"total_tokens":6}}`},
			deltas:  []agents.ModelDelta{text("a"), text("b")},
			message: `{"role":"assistant","content":[{"type":"text","text":"ab"}]}`,
			stop:    aap.StopEndTurn,
			usage:   agents.Usage{InputTokens: 4, OutputTokens: 2},
		},
		{
			name:    "an empty answer",
			chunks:  []string{roleChunk, finish("stop")},
			message: `{"role":"assistant","content":[]}`,
			stop:    aap.StopEndTurn,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t, sse(tt.chunks...))
			m, _ := f.model(Config{})
			var rec recorder
			resp, err := m.Generate(context.Background(), userRequest("hi"), rec.out)
			if err != nil {
				t.Fatalf("Generate: %v", err)
			}
			if got := rec.all(); !reflect.DeepEqual(got, tt.deltas) {
				t.Errorf("deltas:\n got %+v\nwant %+v", got, tt.deltas)
			}
			if got := messageJSON(t, resp.Message.Message); got != tt.message {
				t.Errorf("message:\n got %s\nwant %s", got, tt.message)
			}
			if resp.StopReason != tt.stop {
				t.Errorf("stop reason %q, want %q", resp.StopReason, tt.stop)
			}
			if resp.Usage != tt.usage {
				t.Errorf("usage %+v, want %+v", resp.Usage, tt.usage)
			}
			if resp.Message.Extra != nil {
				t.Errorf("Extra = %s, want none", resp.Message.Extra)
			}
		})
	}
}

// TestToolCallWithoutID checks that a call the server left without an id
// gets one, since AAP matches results to calls by id.
func TestToolCallWithoutID(t *testing.T) {
	f := newFake(t, sse(
		chunk(`{"tool_calls":[{"index":0,"type":"function","function":{"name":"clock","arguments":"{}"}}]}`),
		finish("tool_calls")))
	m, _ := f.model(Config{})
	resp, err := m.Generate(context.Background(), userRequest("time?"), nil)
	if err != nil {
		t.Fatal(err)
	}
	calls := resp.Message.ToolCalls()
	if len(calls) != 1 || !strings.HasPrefix(calls[0].ToolCallID, "call_") || len(calls[0].ToolCallID) < 10 {
		t.Fatalf("calls = %+v, want one with a generated call_ id", calls)
	}
	if calls[0].Name != "clock" || string(calls[0].Input) != "{}" {
		t.Errorf("call = %+v", calls[0])
	}
}

func TestToolInput(t *testing.T) {
	tests := []struct{ args, want string }{
		{`{"a": 1}`, `{"a":1}`},
		{` {"a":{"b":[1, 2]}} `, `{"a":{"b":[1,2]}}`},
		{`{}`, `{}`},
		{``, `{"_raw":""}`},
		{`   `, `{"_raw":"   "}`},
		{`null`, `{"_raw":"null"}`},
		{`"text"`, `{"_raw":"\"text\""}`},
		{`{"a":1}{"b":2}`, `{"_raw":"{\"a\":1}{\"b\":2}"}`},
		{`{"a":`, `{"_raw":"{\"a\":"}`},
	}
	for _, tt := range tests {
		got := toolInput(tt.args)
		if string(got) != tt.want {
			t.Errorf("toolInput(%q) = %s, want %s", tt.args, got, tt.want)
		}
		var obj map[string]any
		if err := json.Unmarshal(got, &obj); err != nil {
			t.Errorf("toolInput(%q) is not a JSON object: %v", tt.args, err)
		}
	}
}
