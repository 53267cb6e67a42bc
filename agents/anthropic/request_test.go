package anthropic

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/agents"
)

func TestRequestBody(t *testing.T) {
	f := newFake(t, sse(textStream("ok")...))
	m := f.model(Config{APIKey: "sk-server", APIKeyOption: "anthropic_key", ThinkingBudget: 2048})
	history := []agents.Message{
		{Message: aap.SystemMessage("Be brief.")},
		{Message: aap.UserMessage("What's the weather?")},
		{Message: aap.AssistantMessage(
			aap.ThinkingBlock("unsigned, from another model"),
			aap.TextBlock("Let me check."),
			aap.ToolUseBlock(aap.ToolCall{ToolCallID: "toolu_1", Name: "get_weather", Input: json.RawMessage(`{"location":"Paris"}`)}),
			aap.ToolUseBlock(aap.ToolCall{ToolCallID: "toolu_2", Name: "clock"}),
		)},
		{Message: aap.ToolMessage("toolu_1", "18C")},
		{Message: aap.Message{Role: aap.RoleTool, ToolCallID: "toolu_2", Content: aap.BlockContent(
			aap.TextBlock("12:00"),
			aap.ContentBlock{Type: aap.BlockImage, URL: "https://example.com/clock.png"},
		)}},
		{Message: aap.Message{Role: aap.RoleUser, Content: aap.BlockContent(
			aap.TextBlock("And this?"),
			aap.ContentBlock{Type: aap.BlockImage, URL: "data:image/png;base64,iVBORw0KGgo="},
			aap.ContentBlock{Type: aap.BlockImage, URL: "https://example.com/a.jpg"},
		)}},
		{Message: aap.SystemMessage("Answer in French.")},
		{Message: aap.Message{Role: aap.RoleAssistant, Content: aap.TextContent("Voici.")}},
		{Message: aap.Message{Role: aap.RoleUser, Content: aap.BlockContent(
			aap.TextBlock(""),
			aap.ContentBlock{Type: aap.BlockImage, URL: "data:image/bmp;base64,Qk0="},
		)}},
	}
	req := agents.ModelRequest{
		Model:    "claude-opus-x",
		System:   "You are helpful.",
		Messages: history,
		Tools: []aap.ToolSpec{
			{Name: "get_weather", Description: "Current weather", Parameters: json.RawMessage(
				`{"type":"object","properties":{"location":{"type":"string"},"unit":{"enum":["c","f"]}},"required":["location"],"additionalProperties":false}`)},
			{Name: "clock", Parameters: json.RawMessage(`{}`)},
		},
		Options: map[string]string{"anthropic_key": "sk-session-123", "other": "x"},
	}
	if _, err := m.Generate(context.Background(), req, nil); err != nil {
		t.Fatal(err)
	}

	h := f.calls()[0].header
	if got := h.Get("x-api-key"); got != "sk-session-123" {
		t.Errorf("x-api-key = %q, want the session's key", got)
	}
	if got := h.Get("Authorization"); got != "" {
		t.Errorf("Authorization = %q, want none", got)
	}
	if got := h.Get("anthropic-version"); got != "2023-06-01" {
		t.Errorf("anthropic-version = %q", got)
	}

	body := f.body(0)
	want := map[string]string{
		"model":      `"claude-opus-x"`,
		"max_tokens": `6144`,
		"stream":     `true`,
		"thinking":   `{"type":"enabled","budget_tokens":2048}`,
		"system":     `[{"type":"text","text":"You are helpful."},{"type":"text","text":"Be brief."},{"type":"text","text":"Answer in French."}]`,
		"tools": `[{"name":"get_weather","description":"Current weather","input_schema":{"type":"object",` +
			`"properties":{"location":{"type":"string"},"unit":{"enum":["c","f"]}},"required":["location"],"additionalProperties":false}},` +
			`{"name":"clock","input_schema":{"type":"object","properties":{}}}]`,
		"messages": `[
			{"role":"user","content":[{"type":"text","text":"What's the weather?"}]},
			{"role":"assistant","content":[
				{"type":"text","text":"Let me check."},
				{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"location":"Paris"}},
				{"type":"tool_use","id":"toolu_2","name":"clock","input":{}}]},
			{"role":"user","content":[
				{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"18C"}]},
				{"type":"tool_result","tool_use_id":"toolu_2","content":[{"type":"text","text":"12:00"},{"type":"image","source":{"type":"url","url":"https://example.com/clock.png"}}]},
				{"type":"text","text":"And this?"},
				{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}},
				{"type":"image","source":{"type":"url","url":"https://example.com/a.jpg"}}]},
			{"role":"assistant","content":[{"type":"text","text":"Voici."}]},
			{"role":"user","content":[{"type":"text","text":"[image omitted: image/bmp is not a supported image type (jpeg, png, gif, webp)]"}]}]`,
	}
	for key, w := range want {
		if got := mustJSON(t, body[key]); !sameJSON(t, got, w) {
			t.Errorf("%s =\n%s\nwant\n%s", key, got, w)
		}
	}
	if _, ok := body["temperature"]; ok {
		t.Errorf("temperature sent although not configured")
	}
}

func TestRequestSettings(t *testing.T) {
	temp := 0.3
	tests := []struct {
		name    string
		cfg     Config
		req     agents.ModelRequest
		key     string
		present map[string]string // body fields and their JSON
		absent  []string
	}{{
		name:    "defaults: DefaultModel, server key, no thinking",
		cfg:     Config{APIKey: "sk-server", DefaultModel: "claude-default"},
		key:     "sk-server",
		present: map[string]string{"model": `"claude-default"`, "max_tokens": `4096`},
		absent:  []string{"thinking", "temperature", "tools", "system"},
	}, {
		name:    "empty session key falls back to the server key",
		cfg:     Config{APIKey: "sk-server", APIKeyOption: "key"},
		req:     agents.ModelRequest{Options: map[string]string{"key": ""}},
		key:     "sk-server",
		present: map[string]string{"model": `"claude-test"`},
	}, {
		name:    "bring-your-own key only",
		cfg:     Config{APIKeyOption: "key"},
		req:     agents.ModelRequest{Options: map[string]string{"key": "sk-user"}},
		key:     "sk-user",
		present: map[string]string{},
	}, {
		name:    "temperature and max tokens",
		cfg:     Config{Temperature: &temp, MaxTokens: 100},
		key:     "sk-test-default",
		present: map[string]string{"temperature": `0.3`, "max_tokens": `100`},
		absent:  []string{"thinking"},
	}, {
		name:    "adaptive thinking",
		cfg:     Config{AdaptiveThinking: true},
		key:     "sk-test-default",
		present: map[string]string{"thinking": `{"type":"adaptive"}`},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t, sse(textStream("ok")...))
			req := tt.req
			req.Messages = agents.Messages(aap.UserMessage("hi"))
			if _, err := f.model(tt.cfg).Generate(context.Background(), req, nil); err != nil {
				t.Fatal(err)
			}
			if got := f.calls()[0].header.Get("x-api-key"); got != tt.key {
				t.Errorf("x-api-key = %q, want %q", got, tt.key)
			}
			body := f.body(0)
			for k, w := range tt.present {
				if got := mustJSON(t, body[k]); !sameJSON(t, got, w) {
					t.Errorf("%s = %s, want %s", k, got, w)
				}
			}
			for _, k := range tt.absent {
				if v, ok := body[k]; ok {
					t.Errorf("%s = %v, want it absent", k, v)
				}
			}
		})
	}
}

func TestRequestErrorsBeforeSending(t *testing.T) {
	f := newFake(t, sse(textStream("ok")...))
	noModel, err := New(Config{BaseURL: f.srv.URL, APIKey: "k"})
	if err != nil {
		t.Fatal(err)
	}
	noKey, err := New(Config{BaseURL: f.srv.URL, APIKeyOption: "key", DefaultModel: "m"})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		model *Model
		want  string
	}{
		{"no model", noModel, "no model"},
		{"no key", noKey, `no API key: the session option "key" is empty`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.model.Generate(context.Background(), agents.ModelRequest{Messages: agents.Messages(aap.UserMessage("hi"))}, nil)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want one mentioning %q", err, tt.want)
			}
		})
	}
	if n := len(f.calls()); n != 0 {
		t.Errorf("%d requests sent, want none", n)
	}
}

// Tool results go first in a user message even when the history has a
// user message before them; roles alternate whatever the history holds.
func TestConversationOrdering(t *testing.T) {
	history := []agents.Message{
		{Message: aap.UserMessage("one")},
		{Message: aap.UserMessage("two")},
		{Message: aap.AssistantMessage(aap.ToolUseBlock(aap.ToolCall{ToolCallID: "t1", Name: "x", Input: json.RawMessage(`{}`)}))},
		{Message: aap.UserMessage("interjection")},
		{Message: aap.ToolMessage("t1", "")},
		{Message: aap.AssistantMessage(aap.ThinkingBlock("unsigned only"))}, // nothing left to send
		{Message: aap.UserMessage("three")},
	}
	_, msgs := conversation("", history)
	got := mustJSON(t, msgs)
	want := `[
		{"role":"user","content":[{"type":"text","text":"one"},{"type":"text","text":"two"}]},
		{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"x","input":{}}]},
		{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1"},{"type":"text","text":"interjection"},{"type":"text","text":"three"}]}]`
	if !sameJSON(t, got, want) {
		t.Errorf("messages =\n%s\nwant\n%s", got, want)
	}
}

func TestNewValidatesConfig(t *testing.T) {
	temp := 0.5
	tests := []struct {
		name string
		cfg  Config
		want string // "" for valid
	}{
		{"minimal", Config{APIKey: "k"}, ""},
		{"bring-your-own only", Config{APIKeyOption: "key"}, ""},
		{"no key at all", Config{}, "APIKey or an APIKeyOption"},
		{"bad base URL", Config{APIKey: "k", BaseURL: "ftp://x"}, "BaseURL"},
		{"negative max tokens", Config{APIKey: "k", MaxTokens: -1}, "negative"},
		{"budget too small", Config{APIKey: "k", ThinkingBudget: 10}, "at least 1024"},
		{"budget over max tokens", Config{APIKey: "k", ThinkingBudget: 2048, MaxTokens: 2048}, "less than MaxTokens"},
		{"temperature with thinking", Config{APIKey: "k", ThinkingBudget: 2048, Temperature: &temp}, "Temperature"},
		{"both thinking modes", Config{APIKey: "k", ThinkingBudget: 2048, AdaptiveThinking: true}, "exclude"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.cfg)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("New: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("New: err = %v, want one mentioning %q", err, tt.want)
			}
		})
	}
	m, err := New(Config{APIKey: "k", ThinkingBudget: 2048})
	if err != nil {
		t.Fatal(err)
	}
	if m.cfg.MaxTokens != DefaultMaxTokens+2048 || m.cfg.Timeout != DefaultTimeout || m.maxRetries != DefaultMaxRetries {
		t.Errorf("defaults: max tokens %d, timeout %s, retries %d", m.cfg.MaxTokens, m.cfg.Timeout, m.maxRetries)
	}
	if m, _ := New(Config{APIKey: "k", MaxRetries: -1}); m.maxRetries != 0 {
		t.Errorf("MaxRetries -1 gives %d retries, want 0", m.maxRetries)
	}
}

// A forced call is sent as the Messages API's tool_choice: "any" for any
// tool, "tool" with its name for one; a call forced with no tool to call,
// and every call not forced, sends none (the API's default, auto). A
// model that thinks cannot force a call: the API refuses it with
// extended thinking.
func TestToolChoiceIsSentWhenACallIsForced(t *testing.T) {
	tools := []aap.ToolSpec{{Name: "get_weather", Parameters: json.RawMessage(`{"type":"object","properties":{}}`)}}
	for _, tc := range []struct {
		name   string
		tools  []aap.ToolSpec
		choice *agents.ToolChoice
		want   string // the body's tool_choice; "" for none
	}{
		{"not forced", tools, nil, ""},
		{"any tool", tools, &agents.ToolChoice{}, `{"type":"any"}`},
		{"one tool", tools, &agents.ToolChoice{Name: "get_weather"}, `{"type":"tool","name":"get_weather"}`},
		{"no tool to call", nil, &agents.ToolChoice{}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, sse(textStream("ok")...))
			m := f.model(Config{})
			req := agents.ModelRequest{Messages: []agents.Message{{Message: aap.UserMessage("weather?")}}, Tools: tc.tools, ToolChoice: tc.choice}
			if _, err := m.Generate(context.Background(), req, nil); err != nil {
				t.Fatal(err)
			}
			got, sent := f.body(0)["tool_choice"]
			switch {
			case tc.want == "" && sent:
				t.Errorf("tool_choice %v sent, want none", got)
			case tc.want != "" && !sameJSON(t, mustJSON(t, got), tc.want):
				t.Errorf("tool_choice %s, want %s", mustJSON(t, got), tc.want)
			}
		})
	}
	for _, tc := range []struct {
		cfg  Config
		want bool
	}{
		{Config{}, true},
		{Config{ThinkingBudget: 2048}, false},
		{Config{AdaptiveThinking: true}, false},
	} {
		if got := newFake(t, sse(textStream("ok")...)).model(tc.cfg).ForcesToolCalls(); got != tc.want {
			t.Errorf("%+v: ForcesToolCalls %v, want %v", tc.cfg, got, tc.want)
		}
	}
}
