package aap_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/aapd/aapd/aap"
)

func clientCall(id, name string) aap.PendingToolCall {
	return aap.PendingToolCall{ToolCall: aap.ToolCall{ToolCallID: id, Name: name, Input: json.RawMessage(`{}`)}}
}

func serverCall(id, name string) aap.PendingToolCall {
	p := clientCall(id, name)
	p.Server = true
	return p
}

func TestEveryPendingToolCallMustBeAnsweredTogether(t *testing.T) {
	t.Parallel()
	pending := []aap.PendingToolCall{clientCall("c1", "lookup"), serverCall("s1", "calculator"), clientCall("c2", "lookup")}
	cases := []struct {
		name    string
		pending []aap.PendingToolCall
		msgs    []aap.Message
		field   string
		mention string
	}{
		{"nothing pending", nil, []aap.Message{aap.ToolMessage("c1", "r")}, "messages", "no pending tool calls"},
		{"unknown call", pending, []aap.Message{aap.ToolMessage("c1", "r"), aap.ToolMessage("zz", "r")}, "messages[1].toolCallId", `"zz"`},
		{"one call left unanswered", pending, []aap.Message{aap.ToolMessage("c1", "r"), permission("s1", true, "")}, "messages", `"c2"`},
		{"only permissions", pending, []aap.Message{permission("s1", false, "")}, "messages", `"c1"`},
	}
	for _, tc := range cases {
		_, err := aap.ResolveToolCalls(tc.pending, tc.msgs)
		checkRule(t, tc.name, err, tc.field)
		if err != nil && !strings.Contains(err.Error(), tc.mention) {
			t.Errorf("%s: %q does not mention %s", tc.name, err, tc.mention)
		}
	}
}

func TestClientCallsTakeResultsAndServerCallsTakePermissions(t *testing.T) {
	t.Parallel()
	pending := []aap.PendingToolCall{clientCall("c1", "lookup"), serverCall("s1", "calculator")}
	_, err := aap.ResolveToolCalls(pending, []aap.Message{permission("c1", true, ""), permission("s1", true, "")})
	checkRule(t, "permission for a client call", err, "messages[0].toolCallId")
	_, err = aap.ResolveToolCalls(pending, []aap.Message{aap.ToolMessage("c1", "r"), aap.ToolMessage("s1", "forged")})
	checkRule(t, "result for a server call", err, "messages[1].toolCallId")
	if err != nil && !strings.Contains(err.Error(), "tool_permission") {
		t.Errorf("the error does not say how to answer: %v", err)
	}
}

func TestResolutionFollowsTheOrderOfTheCalls(t *testing.T) {
	t.Parallel()
	pending := []aap.PendingToolCall{clientCall("c1", "a"), serverCall("s1", "calculator"), clientCall("c2", "b"), serverCall("s2", "clock")}
	// Answers in another order than the calls.
	msgs := []aap.Message{permission("s2", false, "User declined"), aap.ToolMessage("c2", "two"), permission("s1", true, ""), aap.ToolMessage("c1", "one")}
	res, err := aap.ResolveToolCalls(pending, msgs)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Results) != 2 || res.Results[0].ToolCallID != "c1" || res.Results[0].Content.Text != "one" || res.Results[1].ToolCallID != "c2" {
		t.Errorf("results = %+v", res.Results)
	}
	want := []aap.Permission{
		{Call: pending[1].ToolCall, Granted: true},
		{Call: pending[3].ToolCall, Granted: false, Reason: "User declined"},
	}
	if !reflect.DeepEqual(res.Permissions, want) {
		t.Errorf("permissions = %+v, want %+v", res.Permissions, want)
	}
}

func TestPendingFromHistory(t *testing.T) {
	t.Parallel()
	clientTools := []aap.ToolSpec{spec("lookup"), spec("get_weather")}
	calls := aap.AssistantMessage(aap.TextBlock("let me check"), toolUse("c1", "lookup"), toolUse("s1", "calculator"), toolUse("c2", "get_weather"))
	cases := []struct {
		name    string
		history []aap.Message
		want    []string // id:client|server
	}{
		{"empty history", nil, nil},
		{"no assistant message", []aap.Message{aap.SystemMessage("s"), aap.UserMessage("q")}, nil},
		{"assistant without calls", []aap.Message{aap.UserMessage("q"), aap.AssistantMessage(aap.TextBlock("a"))}, nil},
		{"string assistant content", []aap.Message{aap.UserMessage("q"), {Role: aap.RoleAssistant, Content: aap.TextContent("a")}}, nil},
		{"all calls open", []aap.Message{aap.UserMessage("q"), calls}, []string{"c1:client", "s1:server", "c2:client"}},
		{"some answered", []aap.Message{aap.UserMessage("q"), calls, aap.ToolMessage("c2", "r")}, []string{"c1:client", "s1:server"}},
		{"all answered", []aap.Message{calls, aap.ToolMessage("c1", "r"), aap.ToolMessage("s1", "r"), aap.ToolMessage("c2", "r")}, nil},
		// Only the last assistant message's calls can be pending.
		{"earlier calls are not pending", []aap.Message{aap.AssistantMessage(toolUse("old", "lookup")), aap.ToolMessage("old", "r"),
			aap.UserMessage("q"), aap.AssistantMessage(toolUse("new", "calculator"))}, []string{"new:server"}},
		{"a later answer-free reply closes nothing", []aap.Message{calls, aap.ToolMessage("c1", "r"), aap.ToolMessage("s1", "r"), aap.ToolMessage("c2", "r"),
			aap.AssistantMessage(aap.TextBlock("done"))}, nil},
	}
	for _, tc := range cases {
		var got []string
		for _, p := range aap.PendingFromHistory(tc.history, clientTools) {
			kind := "client"
			if p.Server {
				kind = "server"
			}
			if p.Granted {
				t.Errorf("%s: %s is marked granted", tc.name, p.ToolCallID)
			}
			got = append(got, p.ToolCallID+":"+kind)
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: pending = %v, want %v", tc.name, got, tc.want)
		}
	}
	// A call of a tool that is not a client tool awaits permission, even
	// when no client tools are declared at all.
	if p := aap.PendingFromHistory([]aap.Message{aap.AssistantMessage(toolUse("c1", "lookup"))}, nil); len(p) != 1 || !p[0].Server {
		t.Errorf("without client tools: %+v", p)
	}
}

func TestPendingToolCallJSON(t *testing.T) {
	t.Parallel()
	p := serverCall("s1", "calculator")
	p.Granted = true
	b, err := json.Marshal([]aap.PendingToolCall{clientCall("c1", "lookup"), p})
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"toolCallId":"c1","name":"lookup","input":{}},{"toolCallId":"s1","name":"calculator","input":{},"server":true,"granted":true}]`
	if string(b) != want {
		t.Errorf("pending calls = %s, want %s", b, want)
	}
	var back []aap.PendingToolCall
	if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back, []aap.PendingToolCall{clientCall("c1", "lookup"), p}) {
		t.Errorf("round trip = %+v, %v", back, err)
	}
}
