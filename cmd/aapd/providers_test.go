package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/aapd/aapd/aap"
)

// Whole AAP turns through the real OpenAI and Anthropic SDK code paths,
// against fake providers on loopback that speak the providers' wire
// formats (recorded-style SSE chunk sequences).

// fakeProvider answers each request with the next scripted SSE body and
// records what it was sent.
type fakeProvider struct {
	t      *testing.T
	mu     sync.Mutex
	script []string // SSE bodies, in order
	bodies []map[string]any
	heads  []http.Header
}

func (f *fakeProvider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var decoded map[string]any
	_ = json.Unmarshal(body, &decoded)
	f.mu.Lock()
	n := len(f.bodies)
	f.bodies = append(f.bodies, decoded)
	f.heads = append(f.heads, r.Header.Clone())
	f.mu.Unlock()
	if n >= len(f.script) {
		f.t.Errorf("unexpected provider call %d: %s", n+1, body)
		http.Error(w, `{"error":{"message":"no more script"}}`, http.StatusInternalServerError)
		return
	}
	if strings.HasPrefix(f.script[n], "{") { // a whole answer, to a request that does not stream
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, f.script[n])
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	for _, chunk := range strings.SplitAfter(f.script[n], "\n\n") {
		_, _ = io.WriteString(w, chunk)
		w.(http.Flusher).Flush()
	}
}

func (f *fakeProvider) request(i int) (map[string]any, http.Header) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if i >= len(f.bodies) {
		f.t.Fatalf("provider got %d requests, want more than %d", len(f.bodies), i)
	}
	return f.bodies[i], f.heads[i]
}

// openaiCompletion builds a whole chat.completion: the answer to a request
// that does not stream (aapd streams only when a client streams deltas).
func openaiCompletion(message, finish, usage string) string {
	return fmt.Sprintf(`{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":%s,"finish_reason":%q}],"usage":%s}`,
		message, finish, cmp.Or(usage, "null"))
}

// openaiChunks builds a chat.completion.chunk stream.
func openaiChunks(deltas []string, finish string, usage string) string {
	var b strings.Builder
	for _, d := range deltas {
		fmt.Fprintf(&b, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":%s,\"finish_reason\":null}]}\n\n", d)
	}
	fmt.Fprintf(&b, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":%q}]}\n\n", finish)
	if usage != "" {
		fmt.Fprintf(&b, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[],\"usage\":%s}\n\n", usage)
	}
	b.WriteString("data: [DONE]\n\n")
	return b.String()
}

// anthropicEvents builds a Messages stream from content blocks, each a
// start block and its deltas.
func anthropicEvents(blocks [][2]string, deltas [][]string, stop string) string {
	var b strings.Builder
	ev := func(typ, data string) { fmt.Fprintf(&b, "event: %s\ndata: %s\n\n", typ, data) }
	ev("message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":42,"output_tokens":1}}}`)
	for i, blk := range blocks {
		ev("content_block_start", fmt.Sprintf(`{"type":"content_block_start","index":%d,"content_block":%s}`, i, blk[1]))
		for _, d := range deltas[i] {
			ev("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":%s}`, i, d))
		}
		ev("content_block_stop", fmt.Sprintf(`{"type":"content_block_stop","index":%d}`, i))
	}
	ev("message_delta", fmt.Sprintf(`{"type":"message_delta","delta":{"stop_reason":%q,"stop_sequence":null},"usage":{"output_tokens":9}}`, stop))
	ev("message_stop", `{"type":"message_stop"}`)
	return b.String()
}

// providerServer starts aapd with one agent on the fake provider; edit
// adjusts the rest of its configuration.
func providerServer(t *testing.T, provider, baseURL string, edit ...func(*Config)) *testServer {
	t.Helper()
	cfg := fmt.Sprintf(`agents:
  - name: bot
    system_prompt: Be brief.
    model:
      provider: %s
      base_url: %s
      api_key: server-key
      api_key_option: api_key
      models: [model-a, model-b]
      max_output_tokens: 1024
      max_retries: 0
      timeout: 5s
    tools:
      builtin: [calculator]
`, provider, baseURL)
	path := filepath.Join(t.TempDir(), "agents.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return startServer(t, append(edit, func(c *Config) { c.AgentsFile = path })...)
}

func TestOpenAIModelThroughWholeTurns(t *testing.T) {
	fake := &fakeProvider{t: t, script: []string{
		// stream none: a plain answer, asked for whole, with reasoning.
		openaiCompletion(`{"role":"assistant","reasoning_content":"thinking it over","content":"Hello, world"}`,
			"stop", `{"prompt_tokens":31,"completion_tokens":4,"total_tokens":35}`),
		// stream delta: a trusted calculator call split across chunks…
		openaiChunks([]string{
			`{"role":"assistant","tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"calculator","arguments":""}}]}`,
			`{"tool_calls":[{"index":0,"function":{"arguments":"{\"expression\":"}}]}`,
			`{"tool_calls":[{"index":0,"function":{"arguments":"\"6*7\"}"}}]}`,
		}, "tool_calls", `{"prompt_tokens":50,"completion_tokens":8,"total_tokens":58}`),
		// …then the answer.
		openaiChunks([]string{`{"content":"It is "}`, `{"content":"42."}`}, "stop", `{"prompt_tokens":70,"completion_tokens":3,"total_tokens":73}`),
		// stream message (asked for whole): cut off by the token limit.
		openaiCompletion(`{"role":"assistant","content":"A long"}`, "length", ""),
	}}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	s := providerServer(t, "openai", srv.URL+"/v1")
	c := s.newTenant(t)
	sid := c.createSession(map[string]any{"agent": map[string]any{"name": "bot",
		"tools": []any{map[string]any{"name": "calculator", "trust": true}}, "options": map[string]string{"model": "model-b", "api_key": "session-key"}}})

	r := c.sendTurn(sid, user("hi"))
	resp := r.TurnResponse
	if resp.StopReason != aap.StopEndTurn || len(resp.Messages) != 1 {
		t.Fatalf("none: %+v", resp)
	}
	blocks := resp.Messages[0].Content.Blocks
	if len(blocks) != 2 || blocks[0].Thinking != "thinking it over" || blocks[1].Text != "Hello, world" {
		t.Errorf("message = %+v", resp.Messages[0])
	}
	body, head := fake.request(0)
	if body["model"] != "model-b" || head.Get("Authorization") != "Bearer session-key" || body["stream"] == true {
		t.Errorf("request: model %v, auth %q, stream %v", body["model"], head.Get("Authorization"), body["stream"])
	}
	if msgs := body["messages"].([]any); msgs[0].(map[string]any)["content"] != "Be brief." || msgs[1].(map[string]any)["content"] != "hi" {
		t.Errorf("messages sent: %v", msgs)
	}
	if info := c.turnInfo(sid, r.TurnID); info.Usage.InputTokens != 31 || info.Usage.OutputTokens != 4 {
		t.Errorf("usage stored: %+v", info.Usage)
	}

	_, events := c.streamTurn(sid, streamUser("delta", "what is 6*7?"))
	text := ""
	for _, e := range events {
		if e.Type == aap.EventTextDelta {
			text += e.Delta
		}
	}
	want := "turn_start,tool_call,tool_result,text_delta,text_delta,turn_stop"
	if got := strings.Join(types(events), ","); got != want || text != "It is 42." {
		t.Errorf("delta events %v (text %q), want %s", got, text, want)
	}
	if call := events[1]; call.Name != "calculator" || string(call.Input) != `{"expression":"6*7"}` {
		t.Errorf("tool_call = %+v", call)
	}
	if res := events[2]; res.Content.PlainText() != "42" {
		t.Errorf("tool_result = %+v", res)
	}
	body, _ = fake.request(2)
	if body["stream"] != true {
		t.Errorf("a delta turn did not stream from the provider: %v", body["stream"])
	}
	msgs := body["messages"].([]any)
	if last := msgs[len(msgs)-1].(map[string]any); last["role"] != "tool" || last["tool_call_id"] != "call_a" || last["content"] != "42" {
		t.Errorf("tool result sent back as %v", last)
	}

	_, events = c.streamTurn(sid, streamUser("message", "go on"))
	if got := strings.Join(types(events), ","); got != "turn_start,text,turn_stop" || events[2].StopReason != aap.StopMaxTokens {
		t.Errorf("message events %s", got)
	}
}

func TestAnthropicModelThroughWholeTurns(t *testing.T) {
	thinking := [2]string{"thinking", `{"type":"thinking","thinking":"","signature":""}`}
	text := [2]string{"text", `{"type":"text","text":""}`}
	fake := &fakeProvider{t: t, script: []string{
		anthropicEvents([][2]string{thinking, text}, [][]string{
			{`{"type":"thinking_delta","thinking":"Let me "}`, `{"type":"thinking_delta","thinking":"think."}`, `{"type":"signature_delta","signature":"SIG-1"}`},
			{`{"type":"text_delta","text":"Bonjour"}`, `{"type":"text_delta","text":" !"}`},
		}, "end_turn"),
		anthropicEvents([][2]string{text}, [][]string{{`{"type":"text_delta","text":"Encore"}`}}, "end_turn"),
		// An error mid-stream.
		"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"m\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":5,\"output_tokens\":1}}}\n\n" +
			"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Par\"}}\n\n" +
			"event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n",
	}}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	s := providerServer(t, "anthropic", srv.URL)
	c := s.newTenant(t)
	sid := c.createSession(map[string]any{"agent": map[string]any{"name": "bot"}})

	_, events := c.streamTurn(sid, streamUser("delta", "salut"))
	if got := strings.Join(types(events), ","); got != "turn_start,thinking_delta,thinking_delta,text_delta,text_delta,turn_stop" {
		t.Errorf("delta events %s", got)
	}
	body, head := fake.request(0)
	if head.Get("X-Api-Key") != "server-key" || body["model"] != "model-a" || body["system"] == nil {
		t.Errorf("request: key %q model %v system %v", head.Get("X-Api-Key"), body["model"], body["system"])
	}

	// The next turn sends the thinking back with its signature.
	resp := c.say(sid, "encore")
	if resp.Messages[0].Content.PlainText() != "Encore" {
		t.Errorf("second answer %+v", resp)
	}
	body, _ = fake.request(1)
	sent, _ := json.Marshal(body["messages"])
	if !strings.Contains(string(sent), `"signature":"SIG-1"`) || !strings.Contains(string(sent), `"thinking":"Let me think."`) {
		t.Errorf("thinking not sent back with its signature: %s", sent)
	}
	// The signature stays server-side.
	for _, m := range c.history(sid, aap.HistoryFull) {
		if b, _ := json.Marshal(m); strings.Contains(string(b), "SIG-1") {
			t.Errorf("a signature leaked into the history: %s", b)
		}
	}

	_, events = c.streamTurn(sid, streamUser("message", "again"))
	last := events[len(events)-1]
	if last.StopReason != aap.StopError {
		t.Errorf("an error mid-stream ended with %v", types(events))
	}
	h := c.history(sid, aap.HistoryFull)
	if got := h[len(h)-1]; got.Role != aap.RoleAssistant || got.Content.PlainText() != "Par" {
		t.Errorf("partial answer not kept: %+v", got)
	}
}
