package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	openaisdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
)

// What the OpenAI door does with a response's instructions and
// tool_choice (docs/protocols.md), seen where it matters: in what the
// agent's model is sent, on a fake provider.

// choicesServer starts aapd with an agent "bot" on a fake OpenAI provider
// answering "ok" to each call; its system prompt places the instructions
// option.
func choicesServer(t *testing.T, calls int) (*client, *fakeProvider) {
	t.Helper()
	script := make([]string, calls)
	for i := range script {
		script[i] = openaiCompletion(`{"role":"assistant","content":"ok"}`, "stop", "")
	}
	fake := &fakeProvider{t: t, script: script}
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	cfg := fmt.Sprintf(`agents:
  - name: bot
    system_prompt: "Be brief.{{instructions}}"
    options:
      - name: instructions
        type: text
    model:
      provider: openai
      base_url: %s/v1
      api_key: server-key
      models: [model-a]
      max_retries: 0
      timeout: 5s
`, srv.URL)
	path := filepath.Join(t.TempDir(), "agents.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startParallelServer(t, func(c *Config) { c.AgentsFile = path })
	return s.newTenant(t), fake
}

// sent returns the system prompt and the names of the tools of the
// provider's i-th request.
func sent(t *testing.T, fake *fakeProvider, i int) (system string, tools []string) {
	t.Helper()
	body, _ := fake.request(i)
	msgs, _ := body["messages"].([]any)
	if len(msgs) > 0 {
		if m := msgs[0].(map[string]any); m["role"] == "system" {
			system, _ = m["content"].(string)
		}
	}
	ts, _ := body["tools"].([]any)
	for _, tool := range ts {
		tools = append(tools, tool.(map[string]any)["function"].(map[string]any)["name"].(string))
	}
	return system, tools
}

func function(name string) responses.ToolUnionParam {
	return responses.ToolUnionParam{OfFunction: &responses.FunctionToolParam{Name: name,
		Parameters: map[string]any{"type": "object", "properties": map[string]any{}}}}
}

// Instructions are added to the agent's own system prompt, where it puts
// them, for the one response that sends them: the next response on the
// same conversation (previous_response_id) has the agent's prompt alone.
func TestOpenAIInstructionsHoldForOneResponseOfAnAgentThatTakesThem(t *testing.T) {
	t.Parallel()
	c, fake := choicesServer(t, 3)
	api := c.openai()
	ctx := context.Background()
	first, err := api.Responses.New(ctx, responses.ResponseNewParams{Model: "bot", Instructions: openaisdk.String(" Answer in French."),
		Input: responses.ResponseNewParamsInputUnion{OfString: openaisdk.String("hi")}})
	if err != nil {
		t.Fatal(err)
	}
	if system, _ := sent(t, fake, 0); system != "Be brief. Answer in French." {
		t.Errorf("first system prompt %q", system)
	}
	if first.Instructions.OfString != " Answer in French." {
		t.Errorf("first response's instructions: %s", first.RawJSON())
	}
	second, err := api.Responses.New(ctx, responses.ResponseNewParams{PreviousResponseID: openaisdk.String(first.ID),
		Input: responses.ResponseNewParamsInputUnion{OfString: openaisdk.String("again")}})
	if err != nil {
		t.Fatal(err)
	}
	if system, _ := sent(t, fake, 1); system != "Be brief." {
		t.Errorf("second system prompt %q: the first response's instructions carried over", system)
	}
	if second.Instructions.OfString != "" {
		t.Errorf("second response's instructions: %s", second.RawJSON())
	}
	if _, err := api.Responses.New(ctx, responses.ResponseNewParams{PreviousResponseID: openaisdk.String(second.ID),
		Instructions: openaisdk.String(" Be kind."), Input: responses.ResponseNewParamsInputUnion{OfString: openaisdk.String("more")}}); err != nil {
		t.Fatal(err)
	}
	if system, _ := sent(t, fake, 2); system != "Be brief. Be kind." {
		t.Errorf("third system prompt %q", system)
	}
}

// An agent without an instructions option refuses them: its system
// prompt is its own.
func TestOpenAIInstructionsAreRefusedByAnAgentThatDoesNotTakeThem(t *testing.T) {
	t.Parallel()
	s := startParallelServer(t)
	api := s.newTenant(t).openai()
	_, err := api.Responses.New(context.Background(), responses.ResponseNewParams{Model: "echo",
		Instructions: openaisdk.String("be brief"), Input: responses.ResponseNewParamsInputUnion{OfString: openaisdk.String("hi")}})
	if e := apiErr(t, err); e.StatusCode != http.StatusBadRequest || e.Param != "instructions" || e.Code != "unsupported_value" {
		t.Fatalf("instructions: %d %s", e.StatusCode, e.RawJSON())
	}
}

// tool_choice "none" offers the model no function, allowed_tools in mode
// "auto" only the functions it lists, "auto" all of them.
func TestOpenAIToolChoiceOffersTheFunctionsItAllows(t *testing.T) {
	t.Parallel()
	c, fake := choicesServer(t, 3)
	api := c.openai()
	ctx := context.Background()
	tools := []responses.ToolUnionParam{function("a"), function("b"), function("c")}
	for i, choice := range []responses.ResponseNewParamsToolChoiceUnion{
		{OfToolChoiceMode: openaisdk.Opt(responses.ToolChoiceOptionsAuto)},
		{OfToolChoiceMode: openaisdk.Opt(responses.ToolChoiceOptionsNone)},
		{OfAllowedTools: &responses.ToolChoiceAllowedParam{Mode: responses.ToolChoiceAllowedModeAuto,
			Tools: []map[string]any{{"type": "function", "name": "c"}, {"type": "function", "name": "a"}}}},
	} {
		if _, err := api.Responses.New(ctx, responses.ResponseNewParams{Model: "bot", Tools: tools, ToolChoice: choice,
			Input: responses.ResponseNewParamsInputUnion{OfString: openaisdk.String("hi")}}); err != nil {
			t.Fatal(err)
		}
		want := [][]string{{"a", "b", "c"}, nil, {"a", "c"}}[i]
		if _, got := sent(t, fake, i); !reflect.DeepEqual(got, want) {
			t.Errorf("choice %d: offered %q, want %q", i, got, want)
		}
	}
}

// A tool_choice that forces a call ("required", one function,
// allowed_tools in mode "required") is refused: the agent's model decides
// whether it calls a tool.
func TestOpenAIToolChoiceThatForcesACallIsRefused(t *testing.T) {
	t.Parallel()
	s := startParallelServer(t)
	api := s.newTenant(t).openai()
	for _, tc := range []struct {
		choice responses.ResponseNewParamsToolChoiceUnion
		param  string
	}{
		{responses.ResponseNewParamsToolChoiceUnion{OfToolChoiceMode: openaisdk.Opt(responses.ToolChoiceOptionsRequired)}, "tool_choice"},
		{responses.ResponseNewParamsToolChoiceUnion{OfFunctionTool: &responses.ToolChoiceFunctionParam{Name: "a"}}, "tool_choice"},
		{responses.ResponseNewParamsToolChoiceUnion{OfAllowedTools: &responses.ToolChoiceAllowedParam{Mode: responses.ToolChoiceAllowedModeRequired,
			Tools: []map[string]any{{"type": "function", "name": "a"}}}}, "tool_choice.mode"},
	} {
		_, err := api.Responses.New(context.Background(), responses.ResponseNewParams{Model: "echo", Tools: []responses.ToolUnionParam{function("a")},
			ToolChoice: tc.choice, Input: responses.ResponseNewParamsInputUnion{OfString: openaisdk.String("hi")}})
		if e := apiErr(t, err); e.StatusCode != http.StatusBadRequest || e.Param != tc.param || !strings.Contains(e.Message, "forces a call") {
			t.Errorf("%s: %d %s", tc.param, e.StatusCode, e.RawJSON())
		}
	}
}
