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

	"github.com/aapd/aapd/aapclient"
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
// allowed_tools in mode "required") is refused by an agent whose model
// cannot force one — the echo agent, whose answers follow its directives.
func TestOpenAIToolChoiceThatForcesACallIsRefused(t *testing.T) {
	t.Parallel()
	s := startParallelServer(t)
	c := s.newTenant(t)
	api := c.openai()
	for _, tc := range []struct {
		choice responses.ResponseNewParamsToolChoiceUnion
		param  string
	}{
		{responses.ResponseNewParamsToolChoiceUnion{OfToolChoiceMode: openaisdk.Opt(responses.ToolChoiceOptionsRequired)}, "tool_choice"},
		{responses.ResponseNewParamsToolChoiceUnion{OfFunctionTool: &responses.ToolChoiceFunctionParam{Name: "a"}}, "tool_choice"},
		{responses.ResponseNewParamsToolChoiceUnion{OfAllowedTools: &responses.ToolChoiceAllowedParam{Mode: responses.ToolChoiceAllowedModeRequired,
			Tools: []map[string]any{{"type": "function", "name": "a"}}}}, "tool_choice.mode"},
	} {
		for _, background := range []bool{false, true} {
			_, err := api.Responses.New(context.Background(), responses.ResponseNewParams{Model: "echo", Tools: []responses.ToolUnionParam{function("a")},
				ToolChoice: tc.choice, Background: openaisdk.Bool(background), Input: responses.ResponseNewParamsInputUnion{OfString: openaisdk.String("hi")}})
			e := apiErr(t, err)
			if e.StatusCode != http.StatusBadRequest || e.Param != tc.param || e.Code != "unsupported_value" || !strings.Contains(e.Message, "forces a call") {
				t.Errorf("%s (background %v): %d %s", tc.param, background, e.StatusCode, e.RawJSON())
			}
		}
	}
	if list := c.listSessions(aapclient.ListOptions{}); len(list.Sessions) != 0 {
		t.Errorf("a refused response left %d conversations", len(list.Sessions))
	}
}

// forcingServer starts aapd with an agent "bot" on a fake OpenAI provider
// and the calculator: to each response the model calls the calculator,
// then answers once it has its result — two model calls in one turn.
func forcingServer(t *testing.T, responses int) (*client, *fakeProvider) {
	t.Helper()
	var script []string
	for range responses {
		script = append(script,
			openaiCompletion(`{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"calculator","arguments":"{\"expression\":\"6*7\"}"}}]}`, "tool_calls", ""),
			openaiCompletion(`{"role":"assistant","content":"42"}`, "stop", ""))
	}
	fake := &fakeProvider{t: t, script: script}
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	cfg := fmt.Sprintf(`agents:
  - name: bot
    system_prompt: "Be brief."
    model:
      provider: openai
      base_url: %s/v1
      api_key: server-key
      models: [model-a]
      max_retries: 0
      timeout: 5s
    tools:
      builtin: [calculator]
`, srv.URL)
	path := filepath.Join(t.TempDir(), "agents.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startParallelServer(t, func(c *Config) { c.AgentsFile = path })
	return s.newTenant(t), fake
}

// A tool_choice that forces a call reaches the agent's model, on the
// response's first model call only (as OpenAI's agents force it): the
// call after the tool's result is the model's to decide, offered every
// tool again. "required" is chat completions' "required", one function
// its named choice, allowed_tools in mode "required" a "required" call
// offered only the functions listed.
func TestOpenAIToolChoiceThatForcesACallReachesTheModel(t *testing.T) {
	t.Parallel()
	c, fake := forcingServer(t, 3)
	api := c.openai()
	ctx := context.Background()
	tools := []responses.ToolUnionParam{function("a"), function("b")}
	all := []string{"calculator", "a", "b"}
	for i, tc := range []struct {
		choice     responses.ResponseNewParamsToolChoiceUnion
		want       any // the first call's tool_choice
		firstTools []string
	}{
		{responses.ResponseNewParamsToolChoiceUnion{OfToolChoiceMode: openaisdk.Opt(responses.ToolChoiceOptionsRequired)}, "required", all},
		{responses.ResponseNewParamsToolChoiceUnion{OfFunctionTool: &responses.ToolChoiceFunctionParam{Name: "b"}},
			map[string]any{"type": "function", "function": map[string]any{"name": "b"}}, all},
		{responses.ResponseNewParamsToolChoiceUnion{OfAllowedTools: &responses.ToolChoiceAllowedParam{Mode: responses.ToolChoiceAllowedModeRequired,
			Tools: []map[string]any{{"type": "function", "name": "b"}}}}, "required", []string{"b"}},
	} {
		resp, err := api.Responses.New(ctx, responses.ResponseNewParams{Model: "bot", Tools: tools, ToolChoice: tc.choice,
			Input: responses.ResponseNewParamsInputUnion{OfString: openaisdk.String("what is 6*7?")}})
		if err != nil {
			t.Fatal(err)
		}
		if resp.OutputText() != "42" {
			t.Errorf("choice %d: answered %q", i, resp.OutputText())
		}
		first, _ := fake.request(2 * i)
		if got := first["tool_choice"]; !reflect.DeepEqual(got, tc.want) {
			t.Errorf("choice %d: the first call's tool_choice %#v, want %#v", i, got, tc.want)
		}
		if _, got := sent(t, fake, 2*i); !reflect.DeepEqual(got, tc.firstTools) {
			t.Errorf("choice %d: the first call offered %q, want %q", i, got, tc.firstTools)
		}
		later, _ := fake.request(2*i + 1)
		if got, ok := later["tool_choice"]; ok {
			t.Errorf("choice %d: the call after the tool's result was forced too: %#v", i, got)
		}
		want := all
		if i == 2 {
			want = []string{"calculator", "b"} // allowed_tools keeps the session's functions to those listed
		}
		if _, got := sent(t, fake, 2*i+1); !reflect.DeepEqual(got, want) {
			t.Errorf("choice %d: the call after the tool's result offered %q, want %q", i, got, want)
		}
	}
}
