package aap_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/aapd/aapd/aap"
)

// TestDecodingErrorsNameTheElement checks that a body that does not decode
// is refused with an error naming the offending element, down to the index
// of the message and of the content block.
func TestDecodingErrorsNameTheElement(t *testing.T) {
	t.Parallel()
	const agent = `"agent":{"name":"echo"}`
	create := []struct {
		name, body, want string
	}{
		{"not an object", `[1]`, "must be of type object"},
		{"null", `null`, "must be of type object"},
		{"missing agent", `{"messages":[]}`, `"agent" is required`},
		{"agent null", `{"agent":null}`, `"agent" is required`},
		{"agent a string", `{"agent":"echo"}`, "agent: must be of type object"},
		{"agent.name a number", `{"agent":{"name":1}}`, "agent.name: must be of type string, not number"},
		{"agent.tools an object", `{"agent":{"name":"echo","tools":{}}}`, "agent.tools: must be of type array"},
		{"agent.tools[1] trust a string", `{"agent":{"name":"echo","tools":[{"name":"a"},{"name":"b","trust":"yes"}]}}`, "agent.tools[1]: "},
		{"agent.options a list", `{"agent":{"name":"echo","options":["a"]}}`, "agent.options: must be of type object, not array"},
		{"agent.options value a number", `{"agent":{"name":"echo","options":{"style":1}}}`, "agent.options.style: must be of type string, not number"},
		{"messages an object", `{` + agent + `,"messages":{}}`, "messages: must be of type array"},
		{"messages[0] a string", `{` + agent + `,"messages":["hi"]}`, "messages[0]: must be of type object"},
		{"messages[1] without role", `{` + agent + `,"messages":[{"role":"user","content":"a"},{"content":"b"}]}`, `messages[1]: "role" is required`},
		{"messages[0] unknown role", `{` + agent + `,"messages":[{"role":"bot","content":"b"}]}`, `messages[0]: unknown role "bot"`},
		{"messages[0] without content", `{` + agent + `,"messages":[{"role":"assistant"}]}`, `messages[0]: a "assistant" message needs "content"`},
		{"messages[0] content null", `{` + agent + `,"messages":[{"role":"user","content":null}]}`, `messages[0]: a "user" message needs "content"`},
		{"messages[0] content a number", `{` + agent + `,"messages":[{"role":"user","content":42}]}`, "messages[0]: content: must be a string or an array of content blocks"},
		{"messages[0] content an object", `{` + agent + `,"messages":[{"role":"user","content":{"type":"text","text":"x"}}]}`, "messages[0]: content: must be a string or an array"},
		{"system blocks", `{` + agent + `,"messages":[{"role":"system","content":[{"type":"text","text":"x"}]}]}`, `messages[0]: content: a "system" message's content must be a string`},
		{"tool without toolCallId", `{` + agent + `,"messages":[{"role":"tool","content":"x"}]}`, `messages[0]: a "tool" message needs a non-empty "toolCallId"`},
		{"tool with empty toolCallId", `{` + agent + `,"messages":[{"role":"tool","toolCallId":"","content":"x"}]}`, `messages[0]: a "tool" message needs a non-empty "toolCallId"`},
		{"block [1] of message [2] of unknown type", `{` + agent + `,"messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"},
			{"role":"user","content":[{"type":"text","text":"x"},{"type":"video","url":"https://v.example"}]}]}`, `messages[2]: content[1]: unknown content block type "video"`},
		{"block not an object", `{` + agent + `,"messages":[{"role":"user","content":["hi"]}]}`, "messages[0]: content[0]: must be of type object"},
		{"block without type", `{` + agent + `,"messages":[{"role":"user","content":[{"text":"hi"}]}]}`, `messages[0]: content[0]: "type" is required`},
		{"text block without text", `{` + agent + `,"messages":[{"role":"user","content":[{"type":"text"}]}]}`, `messages[0]: content[0]: a "text" block needs a string "text"`},
		{"thinking block without thinking", `{` + agent + `,"messages":[{"role":"assistant","content":[{"type":"thinking","text":"x"}]}]}`, `messages[0]: content[0]: a "thinking" block needs a string "thinking"`},
		{"image block without url", `{` + agent + `,"messages":[{"role":"user","content":[{"type":"image"}]}]}`, `messages[0]: content[0]: an "image" block needs a string "url"`},
		{"tool_use without toolCallId", `{` + agent + `,"messages":[{"role":"assistant","content":[{"type":"tool_use","name":"f","input":{}}]}]}`, `messages[0]: content[0]: a "tool_use" block needs a non-empty "toolCallId"`},
		{"tool_use without name", `{` + agent + `,"messages":[{"role":"assistant","content":[{"type":"tool_use","toolCallId":"c","input":{}}]}]}`, `messages[0]: content[0]: a "tool_use" block needs a non-empty "name"`},
		{"tool_use input an array", `{` + agent + `,"messages":[{"role":"assistant","content":[{"type":"tool_use","toolCallId":"c","name":"f","input":[]}]}]}`, `messages[0]: content[0]: a "tool_use" block needs an object "input"`},
		{"tool result block error", `{` + agent + `,"messages":[{"role":"tool","toolCallId":"c","content":[{"type":"text","text":"ok"},{"type":"image","url":7}]}]}`, "messages[0]: content[1]: "},
		{"tools an object", `{` + agent + `,"tools":{"name":"f"}}`, "tools: must be of type array"},
		{"tools[1] without parameters", `{` + agent + `,"tools":[{"name":"a","description":"d","parameters":{}},{"name":"b","description":"d"}]}`, `tools[1]: "parameters" must be a JSON Schema object`},
		{"tools[0] parameters a string", `{` + agent + `,"tools":[{"name":"a","description":"d","parameters":"object"}]}`, `tools[0]: "parameters" must be a JSON Schema object`},
		{"tools[0] without name", `{` + agent + `,"tools":[{"parameters":{}}]}`, `tools[0]: "name" is required`},
	}
	for _, tc := range create {
		t.Run("create/"+tc.name, func(t *testing.T) {
			t.Parallel()
			var r aap.CreateSessionRequest
			err := json.Unmarshal([]byte(tc.body), &r)
			if err == nil {
				t.Fatalf("decoded %s", tc.body)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not say %q", err, tc.want)
			}
		})
	}

	turn := []struct {
		name, body, want string
	}{
		{"not an object", `"hi"`, "must be of type object"},
		{"stream a number", `{"stream":1,"messages":[]}`, "stream: must be of type string, not number"},
		{"agent a string", `{"agent":"echo","messages":[]}`, "agent: must be of type object, not string"},
		{"agent.options value a number", `{"agent":{"options":{"a":1}},"messages":[]}`, "agent.options.a: must be of type string, not number"},
		{"agent.tools a string", `{"agent":{"tools":"clock"},"messages":[]}`, "agent.tools: must be of type array, not string"},
		{"messages a string", `{"messages":"hi"}`, "messages: must be of type array"},
		{"messages[1] permission without granted", `{"messages":[{"role":"tool","toolCallId":"a","content":"x"},{"role":"tool_permission","toolCallId":"b"}]}`,
			`messages[1]: a "tool_permission" message needs a boolean "granted"`},
		{"messages[0] permission without toolCallId", `{"messages":[{"role":"tool_permission","granted":true}]}`,
			`messages[0]: a "tool_permission" message needs a non-empty "toolCallId"`},
		{"messages[0] permission granted a string", `{"messages":[{"role":"tool_permission","toolCallId":"a","granted":"yes"}]}`, "messages[0]: "},
		{"messages[0] block [0] bad", `{"messages":[{"role":"user","content":[{"type":"tool_result"}]}]}`, `messages[0]: content[0]: unknown content block type "tool_result"`},
		{"tools[0] not an object", `{"messages":[],"tools":["f"]}`, "tools[0]: must be of type object"},
	}
	for _, tc := range turn {
		t.Run("turn/"+tc.name, func(t *testing.T) {
			t.Parallel()
			var r aap.TurnRequest
			err := json.Unmarshal([]byte(tc.body), &r)
			if err == nil {
				t.Fatalf("decoded %s", tc.body)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not say %q", err, tc.want)
			}
		})
	}
}

func TestRequestsDecode(t *testing.T) {
	t.Parallel()
	var c aap.CreateSessionRequest
	body := `{"agent":{"name":"research-agent","tools":[{"name":"web_search","trust":true}],"options":{"model":"claude-opus-4-5","language":"Japanese"}},
		"messages":[{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":"What's the capital of France?"},
			{"role":"assistant","content":"The capital of France is Paris."}],
		"tools":[{"name":"get_weather","description":"Get current weather for a location","parameters":{"type":"object","properties":{"location":{"type":"string"}},"required":["location"]}}],
		"unknown":"ignored"}`
	if err := json.Unmarshal([]byte(body), &c); err != nil {
		t.Fatal(err)
	}
	if c.Agent.Name != "research-agent" || len(c.Agent.Tools) != 1 || !c.Agent.Tools[0].Trust || c.Agent.Options["language"] != "Japanese" ||
		len(c.Messages) != 3 || c.Messages[2].Role != aap.RoleAssistant || len(c.Tools) != 1 || c.Tools[0].Name != "get_weather" {
		t.Errorf("create request = %+v", c)
	}
	// Omitted lists stay nil: "no server tools" and "no client tools".
	var bare aap.CreateSessionRequest
	if err := json.Unmarshal([]byte(`{"agent":{"name":"echo"}}`), &bare); err != nil {
		t.Fatal(err)
	}
	if bare.Agent.Tools != nil || bare.Tools != nil || bare.Messages != nil || bare.Agent.Options != nil {
		t.Errorf("bare create request = %+v", bare)
	}

	var turn aap.TurnRequest
	if err := json.Unmarshal([]byte(`{"agent":{"tools":[],"options":{"language":"English"}},"stream":"delta",
		"messages":[{"role":"user","content":"What about Osaka?"}],"tools":[]}`), &turn); err != nil {
		t.Fatal(err)
	}
	if turn.Mode() != aap.StreamDelta || turn.Agent == nil || turn.Agent.Name != nil || turn.Agent.Tools == nil || len(turn.Agent.Tools) != 0 ||
		turn.Tools == nil || len(turn.Tools) != 0 || len(turn.Messages) != 1 {
		t.Errorf("turn request = %+v (an empty tools list must stay distinct from none)", turn)
	}
	var plain aap.TurnRequest
	if err := json.Unmarshal([]byte(`{"messages":[{"role":"user","content":"hi"}]}`), &plain); err != nil {
		t.Fatal(err)
	}
	if plain.Mode() != aap.StreamNone || plain.Agent != nil || plain.Tools != nil {
		t.Errorf("plain turn = %+v, mode %q", plain, plain.Mode())
	}
	var named aap.TurnRequest
	if err := json.Unmarshal([]byte(`{"agent":{"name":"echo"},"messages":[]}`), &named); err != nil {
		t.Fatal(err)
	}
	if named.Agent == nil || named.Agent.Name == nil || *named.Agent.Name != "echo" {
		t.Errorf("agent.name of a turn is not read: %+v", named.Agent)
	}
}
