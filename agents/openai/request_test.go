package openai

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/agents"
)

var okStream = sse(roleChunk, content("ok"), finish("stop"), usage(1, 1))

// TestRequestBody checks the whole body the server receives for a
// conversation that uses every kind of message and block.
func TestRequestBody(t *testing.T) {
	f := newFake(t, okStream)
	temp := 0.2
	m, _ := f.model(Config{DefaultModel: "gpt-test", Temperature: &temp, MaxTokens: 256})
	req := agents.ModelRequest{
		System: "You are terse.",
		Messages: agents.Messages(
			aap.SystemMessage("Answer in English."),
			aap.UserMessage("What's the weather and time in Tokyo?"),
			aap.AssistantMessage(
				aap.ThinkingBlock("I need two tools."),
				aap.TextBlock("Let me check."),
				aap.ToolUseBlock(aap.ToolCall{ToolCallID: "call_a", Name: "get_weather", Input: json.RawMessage(`{"location":"Tokyo"}`)}),
				aap.ToolUseBlock(aap.ToolCall{ToolCallID: "call_b", Name: "clock", Input: nil}),
			),
			aap.ToolMessage("call_a", "18°C, cloudy"),
			aap.Message{Role: aap.RoleTool, ToolCallID: "call_b", Content: aap.BlockContent(
				aap.TextBlock("2025-01-01T09:00:00+09:00"),
				aap.ContentBlock{Type: aap.BlockImage, URL: "https://example.com/clock.png"},
				aap.ContentBlock{Type: aap.BlockImage, URL: "data:image/png;base64,iVBORw0KGgo="},
			)},
			aap.AssistantMessage(aap.ThinkingBlock("only thinking, cut short")),
			aap.Message{Role: aap.RoleUser, Content: aap.BlockContent(
				aap.TextBlock("What is in these pictures?"),
				aap.ContentBlock{Type: aap.BlockImage, URL: "https://example.com/cat.jpg"},
				aap.ContentBlock{Type: aap.BlockImage, URL: "data:image/jpeg;base64,/9j/4AAQ"},
			)},
			aap.Message{Role: aap.RoleUser, Content: aap.BlockContent(aap.TextBlock("one"), aap.TextBlock("two"))},
		),
		Tools: []aap.ToolSpec{
			{Name: "get_weather", Description: "Current weather.", Parameters: json.RawMessage(
				`{"type":"object","properties":{"location":{"type":"string"},"days":{"type":"integer","maximum":1.50}},"required":["location"]}`)},
			{Name: "clock", Parameters: json.RawMessage(`{"type":"object","properties":{}}`)},
		},
	}
	if _, err := m.Generate(context.Background(), req, nil); err != nil {
		t.Fatal(err)
	}
	want := `{
	  "model": "gpt-test",
	  "stream": true,
	  "stream_options": {"include_usage": true},
	  "temperature": 0.2,
	  "max_tokens": 256,
	  "messages": [
	    {"role": "system", "content": "You are terse."},
	    {"role": "system", "content": "Answer in English."},
	    {"role": "user", "content": "What's the weather and time in Tokyo?"},
	    {"role": "assistant", "content": "Let me check.", "tool_calls": [
	      {"id": "call_a", "type": "function", "function": {"name": "get_weather", "arguments": "{\"location\":\"Tokyo\"}"}},
	      {"id": "call_b", "type": "function", "function": {"name": "clock", "arguments": "{}"}}
	    ]},
	    {"role": "tool", "tool_call_id": "call_a", "content": "18°C, cloudy"},
	    {"role": "tool", "tool_call_id": "call_b", "content":
	      "2025-01-01T09:00:00+09:00\n[image 1 of the tool results: it follows in the next user message]\n[image 2 of the tool results: it follows in the next user message]"},
	    {"role": "user", "content": [
	      {"type": "text", "text": "Image 1 of the tool results (tool call call_b):"},
	      {"type": "image_url", "image_url": {"url": "https://example.com/clock.png"}},
	      {"type": "text", "text": "Image 2 of the tool results (tool call call_b):"},
	      {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}
	    ]},
	    {"role": "user", "content": [
	      {"type": "text", "text": "What is in these pictures?"},
	      {"type": "image_url", "image_url": {"url": "https://example.com/cat.jpg"}},
	      {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,/9j/4AAQ"}}
	    ]},
	    {"role": "user", "content": "one\ntwo"}
	  ],
	  "tools": [
	    {"type": "function", "function": {"name": "get_weather", "description": "Current weather.", "parameters":
	      {"type": "object", "properties": {"location": {"type": "string"}, "days": {"type": "integer", "maximum": 1.50}}, "required": ["location"]}}},
	    {"type": "function", "function": {"name": "clock", "parameters": {"type": "object", "properties": {}}}}
	  ]
	}`
	var wantBody map[string]any
	if err := json.Unmarshal([]byte(want), &wantBody); err != nil {
		t.Fatal(err)
	}
	got := f.last()
	if !reflect.DeepEqual(got.body, wantBody) {
		gotJSON, _ := json.MarshalIndent(got.body, "", "  ")
		t.Errorf("request body:\n%s", gotJSON)
	}
	if ct := got.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	if a := got.header.Get("Authorization"); a != "" {
		t.Errorf("Authorization %q sent without a key", a)
	}
}

// TestImagesInToolResultsFollowInAUserMessage: chat completions takes no
// images in tool messages, so they are sent in a user message after the
// last result of the assistant message's calls (between two results it
// would be refused), each labelled with its tool call.
func TestImagesInToolResultsFollowInAUserMessage(t *testing.T) {
	f := newFake(t, okStream)
	m, _ := f.model(Config{DefaultModel: "gpt-test"})
	img := func(url string) aap.ContentBlock { return aap.ContentBlock{Type: aap.BlockImage, URL: url} }
	req := agents.ModelRequest{Messages: agents.Messages(
		aap.UserMessage("Screenshot both windows."),
		aap.AssistantMessage(
			aap.ToolUseBlock(aap.ToolCall{ToolCallID: "c1", Name: "shot", Input: json.RawMessage(`{}`)}),
			aap.ToolUseBlock(aap.ToolCall{ToolCallID: "c2", Name: "shot", Input: json.RawMessage(`{}`)}),
		),
		aap.Message{Role: aap.RoleTool, ToolCallID: "c1", Content: aap.BlockContent(img("https://example.com/a.png"))},
		aap.Message{Role: aap.RoleTool, ToolCallID: "c2", Content: aap.BlockContent(aap.TextBlock("window 2"), img("data:image/png;base64,iVBORw0KGgo="))},
	)}
	if _, err := m.Generate(context.Background(), req, nil); err != nil {
		t.Fatal(err)
	}
	want := `[
	  {"role": "user", "content": "Screenshot both windows."},
	  {"role": "assistant", "tool_calls": [
	    {"id": "c1", "type": "function", "function": {"name": "shot", "arguments": "{}"}},
	    {"id": "c2", "type": "function", "function": {"name": "shot", "arguments": "{}"}}
	  ]},
	  {"role": "tool", "tool_call_id": "c1", "content": "[image 1 of the tool results: it follows in the next user message]"},
	  {"role": "tool", "tool_call_id": "c2", "content": "window 2\n[image 2 of the tool results: it follows in the next user message]"},
	  {"role": "user", "content": [
	    {"type": "text", "text": "Image 1 of the tool results (tool call c1):"},
	    {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}},
	    {"type": "text", "text": "Image 2 of the tool results (tool call c2):"},
	    {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}
	  ]}
	]`
	var wantMsgs any
	if err := json.Unmarshal([]byte(want), &wantMsgs); err != nil {
		t.Fatal(err)
	}
	if got := f.last().body["messages"]; !reflect.DeepEqual(got, wantMsgs) {
		gotJSON, _ := json.MarshalIndent(got, "", "  ")
		t.Errorf("messages:\n%s", gotJSON)
	}
}

// TestRequestAuthAndModel checks which key and model a call uses.
func TestRequestAuthAndModel(t *testing.T) {
	tests := []struct {
		name      string
		cfg       Config
		model     string
		options   map[string]string
		wantAuth  string
		wantModel string
	}{
		{name: "config key and default model", cfg: Config{APIKey: "sk-config", DefaultModel: "m-default"},
			wantAuth: "Bearer sk-config", wantModel: "m-default"},
		{name: "session key from the secret option", cfg: Config{APIKey: "sk-config", APIKeyOption: "api_key", DefaultModel: "m-default"},
			options: map[string]string{"api_key": "sk-byo"}, wantAuth: "Bearer sk-byo", wantModel: "m-default"},
		{name: "empty session key falls back to the config key", cfg: Config{APIKey: "sk-config", APIKeyOption: "api_key", DefaultModel: "m"},
			options: map[string]string{"api_key": ""}, wantAuth: "Bearer sk-config", wantModel: "m"},
		{name: "session key without a config key", cfg: Config{APIKeyOption: "api_key", DefaultModel: "m"},
			options: map[string]string{"api_key": "sk-byo"}, wantAuth: "Bearer sk-byo", wantModel: "m"},
		{name: "no key at all for a local server", cfg: Config{APIKeyOption: "api_key", DefaultModel: "llama3.2"},
			wantAuth: "", wantModel: "llama3.2"},
		{name: "the request's model wins over the default", cfg: Config{DefaultModel: "m-default"}, model: "m-session",
			wantAuth: "", wantModel: "m-session"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t, okStream)
			m, _ := f.model(tt.cfg)
			req := userRequest("hi")
			req.Model, req.Options = tt.model, tt.options
			if _, err := m.Generate(context.Background(), req, nil); err != nil {
				t.Fatal(err)
			}
			got := f.last()
			if a := got.header.Get("Authorization"); a != tt.wantAuth {
				t.Errorf("Authorization %q, want %q", a, tt.wantAuth)
			}
			if got.body["model"] != tt.wantModel {
				t.Errorf("model %v, want %q", got.body["model"], tt.wantModel)
			}
		})
	}
}

func TestRequestHeaders(t *testing.T) {
	f := newFake(t, okStream)
	m, _ := f.model(Config{Headers: map[string]string{"HTTP-Referer": "https://aapd.example", "X-Title": "aapd"}})
	if _, err := m.Generate(context.Background(), userRequest("hi"), nil); err != nil {
		t.Fatal(err)
	}
	h := f.last().header
	if h.Get("HTTP-Referer") != "https://aapd.example" || h.Get("X-Title") != "aapd" {
		t.Errorf("extra headers missing: %v", h)
	}
}

// TestMaxTokensField checks that OpenAI gets max_completion_tokens, which
// its reasoning models require, and other servers max_tokens.
func TestMaxTokensField(t *testing.T) {
	tests := []struct{ baseURL, want, not string }{
		{"", "max_completion_tokens", "max_tokens"},
		{"https://api.openai.com/v1", "max_completion_tokens", "max_tokens"},
		{"http://localhost:11434/v1", "max_tokens", "max_completion_tokens"},
	}
	for _, tt := range tests {
		m, err := New(Config{BaseURL: tt.baseURL, DefaultModel: "m", MaxTokens: 99})
		if err != nil {
			t.Fatal(err)
		}
		p, err := m.params(userRequest("hi"))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(p)
		var body map[string]any
		_ = json.Unmarshal(b, &body)
		if body[tt.want] != 99.0 || body[tt.not] != nil {
			t.Errorf("%q: body %s, want %s=99 and no %s", tt.baseURL, b, tt.want, tt.not)
		}
	}
}

func TestRequestErrors(t *testing.T) {
	tests := []struct {
		name string
		req  agents.ModelRequest
		want string
	}{
		{name: "no model", req: userRequest("hi"), want: "no model id"},
		{name: "bad tool parameters", want: `tool "bad"`, req: agents.ModelRequest{Model: "m",
			Messages: agents.Messages(aap.UserMessage("hi")),
			Tools:    []aap.ToolSpec{{Name: "bad", Parameters: json.RawMessage(`[1]`)}}}},
		{name: "a tool permission in the history", want: "tool_permission", req: agents.ModelRequest{Model: "m",
			Messages: agents.Messages(aap.Message{Role: aap.RoleToolPermission, ToolCallID: "c", Granted: true})}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t, okStream)
			m, err := New(Config{BaseURL: f.srv.URL + "/v1"})
			if err != nil {
				t.Fatal(err)
			}
			resp, err := m.Generate(context.Background(), tt.req, nil)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want one about %q", err, tt.want)
			}
			if resp.StopReason != aap.StopError || f.requests() != 0 {
				t.Errorf("stop %q after %d requests, want error and none", resp.StopReason, f.requests())
			}
		})
	}
	if _, err := (&Model{}).params(userRequest("x")); !errors.Is(err, errNoModel) {
		t.Errorf("params without a model: %v", err)
	}
}

func TestNewRejects(t *testing.T) {
	for _, cfg := range []Config{
		{BaseURL: "localhost:11434"},
		{BaseURL: "ftp://example.com/v1"},
		{Timeout: -1},
		{MaxRetries: -1},
		{MaxTokens: -5},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("New(%+v) accepted", cfg)
		}
	}
	m, err := New(Config{})
	if err != nil || m.cfg.BaseURL != DefaultBaseURL || m.cfg.Timeout != DefaultTimeout {
		t.Errorf("defaults: %+v, %v", m.cfg, err)
	}
}

// A forced call is sent as chat completions' tool_choice: "required" for
// any tool, the named form for one; a call forced with no tool to call,
// and every call not forced, sends none (the provider's default, auto).
func TestToolChoiceIsSentWhenACallIsForced(t *testing.T) {
	tools := []aap.ToolSpec{{Name: "get_weather", Parameters: json.RawMessage(`{"type":"object","properties":{}}`)}}
	for _, tc := range []struct {
		name   string
		tools  []aap.ToolSpec
		choice *agents.ToolChoice
		want   any // the body's tool_choice; nil for none
	}{
		{"not forced", tools, nil, nil},
		{"any tool", tools, &agents.ToolChoice{}, "required"},
		{"one tool", tools, &agents.ToolChoice{Name: "get_weather"}, map[string]any{"type": "function", "function": map[string]any{"name": "get_weather"}}},
		{"no tool to call", nil, &agents.ToolChoice{}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, okStream)
			m, _ := f.model(Config{})
			req := userRequest("weather?")
			req.Tools, req.ToolChoice = tc.tools, tc.choice
			if _, err := m.Generate(context.Background(), req, nil); err != nil {
				t.Fatal(err)
			}
			got, sent := f.last().body["tool_choice"]
			if tc.want == nil && sent {
				t.Fatalf("tool_choice %v sent, want none", got)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("tool_choice %#v, want %#v", got, tc.want)
			}
		})
	}
	if !(&Model{}).ForcesToolCalls() {
		t.Error("the OpenAI-compatible model says it cannot force a call")
	}
}
