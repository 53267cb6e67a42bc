package aap_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/aapd/aapd/aap"
)

var empty = &aap.Empty{}

// fullAgent declares everything: options of each type, two server tools,
// every capability.
func fullAgent() aap.AgentInfo {
	return aap.AgentInfo{
		Name: "full", Version: "1.0.0",
		Tools: []aap.ToolSpec{
			{Name: "clock", Description: "time", Parameters: json.RawMessage(`{"type":"object"}`)},
			{Name: "calculator", Description: "math", Parameters: json.RawMessage(`{"type":"object"}`)},
		},
		Options: []aap.AgentOption{
			{Type: aap.OptionText, Name: "prefix", Default: ""},
			{Type: aap.OptionSelect, Name: "style", Options: []string{"plain", "shout"}, Default: "plain"},
			{Type: aap.OptionSecret, Name: "token", Default: ""},
		},
		Capabilities: &aap.Capabilities{
			History:     &aap.HistoryCapabilities{Compacted: empty, Full: empty},
			Stream:      &aap.StreamCapabilities{Delta: empty, Message: empty, None: empty},
			Application: &aap.ApplicationCapabilities{Tools: empty},
			Image:       &aap.ImageCapabilities{HTTP: empty, Data: empty},
		},
	}
}

// bareAgent declares nothing: no tools, options or capabilities.
func bareAgent() aap.AgentInfo { return aap.AgentInfo{Name: "bare", Version: "1.0.0"} }

func withCaps(c aap.Capabilities) aap.AgentInfo {
	a := fullAgent()
	a.Capabilities = &c
	return a
}

func spec(name string) aap.ToolSpec {
	return aap.ToolSpec{Name: name, Description: "d", Parameters: json.RawMessage(`{"type":"object"}`)}
}

func refs(names ...string) []aap.ServerToolRef {
	out := make([]aap.ServerToolRef, len(names))
	for i, n := range names {
		out[i] = aap.ServerToolRef{Name: n}
	}
	return out
}

func userBlocks(blocks ...aap.ContentBlock) aap.Message {
	return aap.Message{Role: aap.RoleUser, Content: aap.BlockContent(blocks...)}
}

func image(url string) aap.ContentBlock { return aap.ContentBlock{Type: aap.BlockImage, URL: url} }

func toolUse(id, name string) aap.ContentBlock {
	return aap.ToolUseBlock(aap.ToolCall{ToolCallID: id, Name: name, Input: json.RawMessage(`{}`)})
}

func permission(id string, granted bool, reason string) aap.Message {
	return aap.Message{Role: aap.RoleToolPermission, ToolCallID: id, Granted: granted, Reason: reason}
}

// ruleCase is a request and the field its violation must name ("" for a
// valid request).
type ruleCase struct {
	name  string
	field string
}

// checkRule asserts err against a case: nil for a valid request, else an
// *aap.Error naming the field.
func checkRule(t *testing.T, name string, err error, field string) {
	t.Helper()
	if field == "" {
		if err != nil {
			t.Errorf("%s: refused a valid request: %v", name, err)
		}
		return
	}
	var ae *aap.Error
	if !errors.As(err, &ae) {
		t.Errorf("%s: error %v (%T), want an *aap.Error for %s", name, err, err, field)
		return
	}
	if ae.Field != field {
		t.Errorf("%s: field %q, want %q (%s)", name, ae.Field, field, ae.Msg)
	}
	if ae.Msg == "" || !strings.HasPrefix(ae.Error(), field+": ") {
		t.Errorf("%s: error text %q", name, ae.Error())
	}
}

func create(agent aap.AgentConfig, tools []aap.ToolSpec, msgs ...aap.Message) aap.CreateSessionRequest {
	return aap.CreateSessionRequest{Agent: agent, Tools: tools, Messages: msgs}
}

func TestServerToolRefsMustBeDeclaredAndUnique(t *testing.T) {
	t.Parallel()
	cases := []struct {
		ruleCase
		tools []aap.ServerToolRef
	}{
		{ruleCase{"none", ""}, nil},
		{ruleCase{"declared", ""}, []aap.ServerToolRef{{Name: "clock", Trust: true}, {Name: "calculator"}}},
		{ruleCase{"undeclared", "agent.tools[1].name"}, refs("clock", "web_search")},
		{ruleCase{"listed twice", "agent.tools[2].name"}, refs("clock", "calculator", "clock")},
		{ruleCase{"empty name", "agent.tools[0].name"}, refs("")},
	}
	for _, tc := range cases {
		err := aap.ValidateCreateSession(create(aap.AgentConfig{Name: "full", Tools: tc.tools}, nil), fullAgent())
		checkRule(t, tc.name, err, tc.field)
		// The same rule holds for a turn's overrides.
		turn := aap.TurnRequest{Agent: &aap.AgentOverrides{Tools: tc.tools}, Messages: []aap.Message{aap.UserMessage("hi")}}
		checkRule(t, "turn: "+tc.name, aap.ValidateTurn(turn, "full", nil, fullAgent()), tc.field)
	}
	checkRule(t, "agent without tools", aap.ValidateCreateSession(create(aap.AgentConfig{Name: "bare", Tools: refs("clock")}, nil), bareAgent()), "agent.tools[0].name")
}

func TestOptionsMustBeDeclaredAndSelectValuesListed(t *testing.T) {
	t.Parallel()
	cases := []struct {
		ruleCase
		opts map[string]string
	}{
		{ruleCase{"none", ""}, nil},
		{ruleCase{"all declared", ""}, map[string]string{"prefix": "anything at all", "style": "shout", "token": "s3cret"}},
		{ruleCase{"text and secret take any value", ""}, map[string]string{"prefix": "", "token": ""}},
		{ruleCase{"undeclared", "agent.options.colour"}, map[string]string{"colour": "red"}},
		{ruleCase{"select value not listed", "agent.options.style"}, map[string]string{"style": "whisper"}},
		{ruleCase{"select value differs in case", "agent.options.style"}, map[string]string{"style": "Shout"}},
		{ruleCase{"select value empty", "agent.options.style"}, map[string]string{"style": ""}},
	}
	for _, tc := range cases {
		checkRule(t, tc.name, aap.ValidateCreateSession(create(aap.AgentConfig{Name: "full", Options: tc.opts}, nil), fullAgent()), tc.field)
		turn := aap.TurnRequest{Agent: &aap.AgentOverrides{Options: tc.opts}, Messages: []aap.Message{aap.UserMessage("hi")}}
		checkRule(t, "turn: "+tc.name, aap.ValidateTurn(turn, "full", nil, fullAgent()), tc.field)
	}
	checkRule(t, "agent without options", aap.ValidateOptions("agent.options", map[string]string{"x": "y"}, bareAgent()), "agent.options.x")
}

func TestClientToolsNeedTheApplicationToolsCapability(t *testing.T) {
	t.Parallel()
	checkRule(t, "bare agent", aap.ValidateCreateSession(create(aap.AgentConfig{Name: "bare"}, []aap.ToolSpec{spec("lookup")}), bareAgent()), "tools")
	checkRule(t, "bare agent, no tools", aap.ValidateCreateSession(create(aap.AgentConfig{Name: "bare"}, []aap.ToolSpec{}), bareAgent()), "")
	checkRule(t, "full agent", aap.ValidateCreateSession(create(aap.AgentConfig{Name: "full"}, []aap.ToolSpec{spec("lookup")}), fullAgent()), "")
	turn := aap.TurnRequest{Tools: []aap.ToolSpec{spec("lookup")}, Messages: []aap.Message{aap.UserMessage("hi")}}
	checkRule(t, "turn on bare agent", aap.ValidateTurn(turn, "bare", nil, bareAgent()), "tools")
}

func TestClientToolNamesMustBeValid(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		valid bool
	}{
		{"get_weather", true},
		{"a", true},
		{"A-b_9", true},
		{strings.Repeat("x", 128), true},
		{strings.Repeat("x", 129), false},
		{"", false},
		{"get weather", false},
		{"get.weather", true}, // MCP's naming rule; the spec sets none
		{"fs.read_file-v2", true},
		{"ns/tool", false},
		{"wetter_ä", false},
		{"tab\t", false},
	}
	for _, tc := range cases {
		if aap.ValidToolName(tc.name) != tc.valid {
			t.Errorf("ValidToolName(%q) = %v", tc.name, !tc.valid)
		}
		field := ""
		if !tc.valid {
			field = "tools[1].name"
		}
		err := aap.ValidateCreateSession(create(aap.AgentConfig{Name: "full"}, []aap.ToolSpec{spec("ok"), spec(tc.name)}), fullAgent())
		checkRule(t, "tool "+tc.name, err, field)
	}
}

func TestToolNamesMustBeUniqueAcrossClientAndServerTools(t *testing.T) {
	t.Parallel()
	cases := []struct {
		ruleCase
		server []aap.ServerToolRef
		client []aap.ToolSpec
	}{
		{ruleCase{"distinct", ""}, refs("clock"), []aap.ToolSpec{spec("lookup"), spec("calculator")}},
		{ruleCase{"a disabled server tool's name is free", ""}, nil, []aap.ToolSpec{spec("clock")}},
		{ruleCase{"clash with an enabled server tool", "tools[1].name"}, refs("calculator"), []aap.ToolSpec{spec("lookup"), spec("calculator")}},
		{ruleCase{"clash with a trusted server tool", "tools[0].name"}, []aap.ServerToolRef{{Name: "clock", Trust: true}}, []aap.ToolSpec{spec("clock")}},
		{ruleCase{"duplicate client tools", "tools[2].name"}, nil, []aap.ToolSpec{spec("a"), spec("b"), spec("a")}},
	}
	for _, tc := range cases {
		checkRule(t, tc.name, aap.ValidateCreateSession(create(aap.AgentConfig{Name: "full", Tools: tc.server}, tc.client), fullAgent()), tc.field)
	}

	// In a turn, the clash is with the tools enabled after the turn: the
	// session's, unless the turn replaces them.
	hi := []aap.Message{aap.UserMessage("hi")}
	turns := []struct {
		ruleCase
		session []aap.ServerToolRef
		turn    aap.TurnRequest
	}{
		{ruleCase{"clash with the session's tools", "tools[0].name"}, refs("clock"), aap.TurnRequest{Tools: []aap.ToolSpec{spec("clock")}, Messages: hi}},
		{ruleCase{"clash with the turn's tools", "tools[0].name"}, nil,
			aap.TurnRequest{Agent: &aap.AgentOverrides{Tools: refs("calculator")}, Tools: []aap.ToolSpec{spec("calculator")}, Messages: hi}},
		{ruleCase{"the turn disables the clashing tool", ""}, refs("clock"),
			aap.TurnRequest{Agent: &aap.AgentOverrides{Tools: []aap.ServerToolRef{}}, Tools: []aap.ToolSpec{spec("clock")}, Messages: hi}},
		{ruleCase{"the turn replaces it with another", ""}, refs("clock"),
			aap.TurnRequest{Agent: &aap.AgentOverrides{Tools: refs("calculator")}, Tools: []aap.ToolSpec{spec("clock")}, Messages: hi}},
		{ruleCase{"no client tools in the turn", ""}, refs("clock"), aap.TurnRequest{Messages: hi}},
	}
	for _, tc := range turns {
		checkRule(t, "turn: "+tc.name, aap.ValidateTurn(tc.turn, "full", tc.session, fullAgent()), tc.field)
	}
}

func TestSeedHistoryMayOnlyHoldHistoryMessages(t *testing.T) {
	t.Parallel()
	cases := []struct {
		ruleCase
		msgs []aap.Message
	}{
		{ruleCase{"conversation", ""}, []aap.Message{aap.SystemMessage("Be brief."), aap.UserMessage("Capital of France?"),
			{Role: aap.RoleAssistant, Content: aap.TextContent("Paris.")}}},
		{ruleCase{"tool_permission", "messages[1].role"}, []aap.Message{aap.UserMessage("hi"), permission("call_1", true, "")}},
	}
	for _, tc := range cases {
		checkRule(t, tc.name, aap.ValidateCreateSession(create(aap.AgentConfig{Name: "full"}, nil, tc.msgs...), fullAgent()), tc.field)
	}
}

func TestSeedToolResultsMustAnswerAPrecedingCall(t *testing.T) {
	t.Parallel()
	call := func(ids ...string) aap.Message {
		var blocks []aap.ContentBlock
		for _, id := range ids {
			blocks = append(blocks, toolUse(id, "lookup"))
		}
		return aap.AssistantMessage(blocks...)
	}
	cases := []struct {
		ruleCase
		msgs []aap.Message
	}{
		{ruleCase{"call answered", ""}, []aap.Message{aap.UserMessage("q"), call("c1"), aap.ToolMessage("c1", "r"), {Role: aap.RoleAssistant, Content: aap.TextContent("done")}}},
		{ruleCase{"parallel calls answered in any order", ""}, []aap.Message{call("c1", "c2"), aap.ToolMessage("c2", "r"), aap.ToolMessage("c1", "r"), aap.UserMessage("next")}},
		{ruleCase{"seed may end with calls pending", ""}, []aap.Message{aap.UserMessage("q"), call("c1", "c2"), aap.ToolMessage("c1", "r")}},
		{ruleCase{"result without any call", "messages[1].toolCallId"}, []aap.Message{aap.UserMessage("q"), aap.ToolMessage("c1", "r")}},
		{ruleCase{"result for an unknown call", "messages[1].toolCallId"}, []aap.Message{call("c1"), aap.ToolMessage("c9", "r")}},
		{ruleCase{"result answered twice", "messages[2].toolCallId"}, []aap.Message{call("c1"), aap.ToolMessage("c1", "r"), aap.ToolMessage("c1", "again")}},
		{ruleCase{"result for an earlier turn's call", "messages[4].toolCallId"}, []aap.Message{call("c1"), aap.ToolMessage("c1", "r"), aap.UserMessage("more"), call("c2"), aap.ToolMessage("c1", "late")}},
		{ruleCase{"conversation moves on before the result", "messages[2]"}, []aap.Message{aap.UserMessage("q"), call("c1"), aap.UserMessage("never mind")}},
		{ruleCase{"assistant speaks before the result", "messages[1]"}, []aap.Message{call("c1"), {Role: aap.RoleAssistant, Content: aap.TextContent("hm")}}},
		{ruleCase{"tool call id used twice", "messages[2].content"}, []aap.Message{call("c1"), aap.ToolMessage("c1", "r"), call("c1")}},
		{ruleCase{"tool call id used twice in one message", "messages[0].content"}, []aap.Message{call("c1", "c1")}},
	}
	for _, tc := range cases {
		checkRule(t, tc.name, aap.ValidateCreateSession(create(aap.AgentConfig{Name: "full"}, []aap.ToolSpec{spec("lookup")}, tc.msgs...), fullAgent()), tc.field)
	}
}

func TestContentBlocksMustSuitTheRole(t *testing.T) {
	t.Parallel()
	img := image("https://example.com/a.png")
	cases := []struct {
		ruleCase
		msg aap.Message
	}{
		{ruleCase{"user text and image", ""}, userBlocks(aap.TextBlock("look"), img)},
		{ruleCase{"user thinking (a UserMessage's content is any ContentBlock[])", ""}, userBlocks(aap.TextBlock("x"), aap.ThinkingBlock("hmm"))},
		{ruleCase{"user tool_use", "messages[0].content[0].type"}, userBlocks(toolUse("c", "lookup"))},
		{ruleCase{"assistant text thinking tool_use", ""}, aap.AssistantMessage(aap.ThinkingBlock("h"), aap.TextBlock("t"), toolUse("c", "lookup"))},
		{ruleCase{"assistant image (an AssistantMessage's content is any ContentBlock[])", ""}, aap.AssistantMessage(img)},
		{ruleCase{"assistant tool_use with an invalid name", "messages[0].content[0].name"}, aap.AssistantMessage(toolUse("c", "no such tool"))},
	}
	for _, tc := range cases {
		checkRule(t, tc.name, aap.ValidateCreateSession(create(aap.AgentConfig{Name: "full"}, nil, tc.msg), fullAgent()), tc.field)
	}
	// A tool result may carry any block but a tool call.
	seed := func(result aap.Message) []aap.Message {
		return []aap.Message{aap.AssistantMessage(toolUse("c", "lookup")), result}
	}
	results := []struct {
		ruleCase
		content aap.Content
	}{
		{ruleCase{"tool result text and image", ""}, aap.BlockContent(aap.TextBlock("chart"), img)},
		{ruleCase{"tool result thinking", ""}, aap.BlockContent(aap.ThinkingBlock("h"))},
		{ruleCase{"tool result tool_use", "messages[1].content[0].type"}, aap.BlockContent(toolUse("d", "lookup"))},
	}
	for _, tc := range results {
		msgs := seed(aap.Message{Role: aap.RoleTool, ToolCallID: "c", Content: tc.content})
		checkRule(t, tc.name, aap.ValidateCreateSession(create(aap.AgentConfig{Name: "full"}, []aap.ToolSpec{spec("lookup")}, msgs...), fullAgent()), tc.field)
	}
}

func TestImageURLsMustBeHTTPSOrDataAndAccepted(t *testing.T) {
	t.Parallel()
	httpOnly := withCaps(aap.Capabilities{Image: &aap.ImageCapabilities{HTTP: empty}})
	dataOnly := withCaps(aap.Capabilities{Image: &aap.ImageCapabilities{Data: empty}})
	noImages := withCaps(aap.Capabilities{})
	const field = "messages[0].content[0].url"
	cases := []struct {
		url                      string
		full, http, data, noImgs string // the field refused, or "" for accepted
	}{
		{"https://example.com/cat.png", "", "", field, field},
		{"data:image/png;base64,iVBORw0KGgo=", "", field, "", field},
		{"http://example.com/cat.png", field, field, field, field},
		{"https://", field, field, field, field},
		{"ftp://example.com/cat.png", field, field, field, field},
		{"data:text/plain;base64,aGk=", field, field, field, field},
		{"data:image/png,raw", field, field, field, field}, // the spec's data: URIs are base64
		{"data:image/svg+xml,%3Csvg%2F%3E", field, field, field, field},
		{"HTTPS://example.com/cat.png", "", "", field, field}, // schemes are case-insensitive
		{"Https://example.com/cat.png", "", "", field, field},
		{"DATA:IMAGE/PNG;BASE64,iVBORw0KGgo=", "", field, "", field},
		{"data:image/png;charset=x;base64,iVBORw0KGgo=", "", field, "", field},
		{"data:image/png;base64", field, field, field, field},
		{"", field, field, field, field},
	}
	for _, tc := range cases {
		msg := userBlocks(image(tc.url))
		for _, a := range []struct {
			agent aap.AgentInfo
			field string
		}{{fullAgent(), tc.full}, {httpOnly, tc.http}, {dataOnly, tc.data}, {noImages, tc.noImgs}} {
			checkRule(t, tc.url, aap.ValidateCreateSession(create(aap.AgentConfig{Name: "full"}, nil, msg), a.agent), a.field)
			turn := aap.TurnRequest{Messages: []aap.Message{msg}}
			checkRule(t, "turn "+tc.url, aap.ValidateTurn(turn, "full", nil, a.agent), a.field)
		}
	}
}

func TestStreamModeMustBeKnownAndSupported(t *testing.T) {
	t.Parallel()
	hi := []aap.Message{aap.UserMessage("hi")}
	deltaOnly := withCaps(aap.Capabilities{Stream: &aap.StreamCapabilities{Delta: empty}})
	cases := []struct {
		agent aap.AgentInfo
		mode  aap.StreamMode
		field string
	}{
		{fullAgent(), "", ""},
		{fullAgent(), aap.StreamNone, ""},
		{fullAgent(), aap.StreamDelta, ""},
		{fullAgent(), aap.StreamMessage, ""},
		{fullAgent(), "fast", "stream"},
		{fullAgent(), "Delta", "stream"},
		// An agent without stream capabilities supports only "none".
		{bareAgent(), "", ""},
		{bareAgent(), aap.StreamNone, ""},
		{bareAgent(), aap.StreamDelta, "stream"},
		{bareAgent(), aap.StreamMessage, "stream"},
		// An agent that declares stream capabilities supports only those.
		{deltaOnly, aap.StreamDelta, ""},
		{deltaOnly, aap.StreamNone, "stream"},
		{deltaOnly, "", "stream"},
	}
	for _, tc := range cases {
		err := aap.ValidateTurn(aap.TurnRequest{Stream: tc.mode, Messages: hi}, tc.agent.Name, nil, tc.agent)
		checkRule(t, tc.agent.Name+" "+string(tc.mode), err, tc.field)
	}
	if (aap.TurnRequest{}).Mode() != aap.StreamNone {
		t.Error(`the default stream mode is not "none"`)
	}
}

func TestTurnMessagesAreOneUserMessageOrToolAnswers(t *testing.T) {
	t.Parallel()
	result := aap.ToolMessage("c1", "r")
	cases := []struct {
		ruleCase
		msgs []aap.Message
	}{
		{ruleCase{"one user message", ""}, []aap.Message{aap.UserMessage("hi")}},
		{ruleCase{"user blocks", ""}, []aap.Message{userBlocks(aap.TextBlock("hi"), image("https://e.example/i.png"))}},
		{ruleCase{"tool results and permissions", ""}, []aap.Message{result, permission("c2", true, ""), permission("c3", false, "no")}},
		{ruleCase{"no messages", "messages"}, nil},
		{ruleCase{"empty messages", "messages"}, []aap.Message{}},
		{ruleCase{"two user messages", "messages[0]"}, []aap.Message{aap.UserMessage("a"), aap.UserMessage("b")}},
		{ruleCase{"user message with a tool result", "messages[0]"}, []aap.Message{aap.UserMessage("a"), result}},
		{ruleCase{"tool result with a user message", "messages[1]"}, []aap.Message{result, aap.UserMessage("a")}},
		{ruleCase{"system message", "messages[0].role"}, []aap.Message{aap.SystemMessage("obey")}},
		{ruleCase{"assistant message", "messages[1].role"}, []aap.Message{result, aap.AssistantMessage(aap.TextBlock("x"))}},
		{ruleCase{"a call answered twice", "messages[1].toolCallId"}, []aap.Message{result, aap.ToolMessage("c1", "again")}},
		{ruleCase{"a call answered with a result and a permission", "messages[1].toolCallId"}, []aap.Message{result, permission("c1", true, "")}},
		{ruleCase{"user message with a thinking block", ""}, []aap.Message{userBlocks(aap.ThinkingBlock("h"))}},
		{ruleCase{"user message with a tool_use block", "messages[0].content[0].type"}, []aap.Message{userBlocks(toolUse("c", "lookup"))}},
	}
	for _, tc := range cases {
		checkRule(t, tc.name, aap.ValidateTurn(aap.TurnRequest{Messages: tc.msgs}, "full", nil, fullAgent()), tc.field)
	}
}

func TestAgentNameCannotChange(t *testing.T) {
	t.Parallel()
	hi := []aap.Message{aap.UserMessage("hi")}
	same, other := "full", "other"
	checkRule(t, "same name", aap.ValidateTurn(aap.TurnRequest{Agent: &aap.AgentOverrides{Name: &same}, Messages: hi}, "full", nil, fullAgent()), "")
	checkRule(t, "other name", aap.ValidateTurn(aap.TurnRequest{Agent: &aap.AgentOverrides{Name: &other}, Messages: hi}, "full", nil, fullAgent()), "agent.name")
	empty := ""
	checkRule(t, "empty name", aap.ValidateTurn(aap.TurnRequest{Agent: &aap.AgentOverrides{Name: &empty}, Messages: hi}, "full", nil, fullAgent()), "agent.name")
}

func TestErrorsNameTheirField(t *testing.T) {
	t.Parallel()
	if got := (&aap.Error{Field: "agent.name", Msg: "required"}).Error(); got != "agent.name: required" {
		t.Errorf("Error() = %q", got)
	}
	if got := (&aap.Error{Msg: "bad"}).Error(); got != "bad" {
		t.Errorf("Error() without field = %q", got)
	}
}
