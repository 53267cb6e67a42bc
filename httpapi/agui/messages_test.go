package agui

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/aapd/aapd/aap"
)

func msg(id, role, content string) Message {
	m := Message{ID: id, Role: role}
	if content != "" {
		m.Content = json.RawMessage(content)
	}
	return m
}

func toolMsg(id, call, content string) Message {
	return Message{ID: id, Role: RoleTool, ToolCallID: call, Content: json.RawMessage(content)}
}

// describe renders messages as role:text[:toolCallId], one per item.
func describe(msgs []aap.Message) []string {
	var out []string
	for _, m := range msgs {
		s := string(m.Role) + ":" + m.Content.PlainText()
		if m.ToolCallID != "" {
			s += ":" + m.ToolCallID
		}
		if m.Role == aap.RoleToolPermission {
			s += map[bool]string{true: ":granted", false: ":denied"}[m.Granted] + ":" + m.Reason
		}
		for _, c := range m.ToolCalls() {
			s += ":call " + c.Name + string(c.Input)
		}
		out = append(out, s)
	}
	return out
}

// Which messages of a thread a run adds, and where: the thread's first
// run seeds its new session, later runs add a user message or tool results.
func TestRunsAddOnlyTheMessagesNotStored(t *testing.T) {
	assistantWithCall := Message{ID: "a1", Role: RoleAssistant, Content: json.RawMessage(`"checking"`),
		ToolCalls: []ToolCall{{ID: "c1", Type: "function", Function: FunctionCall{Name: "get_weather", Arguments: `{"city": "Oslo"}`}}}}
	cases := []struct {
		name      string
		msgs      []Message
		resume    []ResumeEntry
		context   []Context
		stored    map[string]bool
		fresh     bool
		seed      []string
		seedIDs   []string
		turn      []string
		turnIDs   []string
		errField  string
		errSubstr string
	}{{
		name: "a new thread: its start seeds the session, its last user message is the turn",
		msgs: []Message{msg("s", RoleSystem, `"be brief"`), msg("d", RoleDeveloper, `"use metric"`), msg("u0", RoleUser, `"hi"`),
			msg("a0", RoleAssistant, `"hello"`), msg("u1", RoleUser, `"weather?"`)},
		fresh: true,
		seed:  []string{"system:be brief", "system:use metric", "user:hi", "assistant:hello"}, seedIDs: []string{"s", "d", "u0", "a0"},
		turn: []string{"user:weather?"}, turnIDs: []string{"u1"},
	}, {
		name:  "a new thread ending with tool results: they are the turn, the call in the seed",
		msgs:  []Message{msg("u0", RoleUser, `"weather?"`), assistantWithCall, toolMsg("t1", "c1", `"rain"`)},
		fresh: true,
		seed:  []string{"user:weather?", `assistant:checking:call get_weather{"city":"Oslo"}`}, seedIDs: []string{"u0", "a1"},
		turn: []string{"tool:rain:c1"}, turnIDs: []string{"t1"},
	}, {
		name:   "a stored thread: stored ids, aapd's own ids, activity and reasoning are skipped",
		msgs:   []Message{msg("u0", RoleUser, `"hi"`), msg(id("1"), RoleAssistant, `"the client's copy"`), msg("r", RoleReasoning, `"hmm"`), {ID: "act", Role: RoleActivity, Content: json.RawMessage(`{"x":1}`)}, msg("u1", RoleUser, `"again"`)},
		stored: map[string]bool{"u0": true},
		turn:   []string{"user:again"}, turnIDs: []string{"u1"},
	}, {
		name:   "tool results answering pending calls",
		msgs:   []Message{msg("u0", RoleUser, `"hi"`), assistantWithCall, toolMsg("t1", "c1", `"rain"`), {ID: "t2", Role: RoleTool, ToolCallID: "c2", Content: json.RawMessage(`""`), Error: ptr("timeout")}},
		stored: map[string]bool{"u0": true, "a1": true},
		turn:   []string{"tool:rain:c1", "tool:Error: timeout:c2"}, turnIDs: []string{"t1", "t2"},
	}, {
		name:    "context goes with the user message",
		msgs:    []Message{msg("u1", RoleUser, `"where am I?"`)},
		context: []Context{{Description: "page", Value: "/settings"}, {Description: "user", Value: "Ada"}},
		fresh:   true,
		turn:    []string{"user:where am I?\n" + ContextHeading + "\n- page: /settings\n- user: Ada"}, turnIDs: []string{"u1"},
	}, {
		name:   "resume entries are permissions",
		msgs:   []Message{msg("u0", RoleUser, `"hi"`)},
		stored: map[string]bool{"u0": true},
		resume: []ResumeEntry{{InterruptID: "c1", Status: "resolved"}, {InterruptID: "c2", Status: "cancelled"},
			{InterruptID: "c3", Status: "resolved", Payload: json.RawMessage(`{"granted":false,"reason":"too costly"}`)}},
		turn:    []string{"tool_permission::c1:granted:", "tool_permission::c2:denied:", "tool_permission::c3:denied:too costly"},
		turnIDs: []string{"", "", ""},
	}, {
		name:     "a stored thread takes no new system message",
		msgs:     []Message{msg("u0", RoleUser, `"hi"`), msg("s", RoleSystem, `"new rules"`), msg("u1", RoleUser, `"x"`)},
		stored:   map[string]bool{"u0": true},
		errField: "messages[1]", errSubstr: "after a thread's first run",
	}, {
		name:     "a stored thread takes one user message per run",
		msgs:     []Message{msg("u1", RoleUser, `"one"`), msg("u2", RoleUser, `"two"`)},
		errField: "messages[0]", errSubstr: "one user message",
	}, {
		name:     "nothing new",
		msgs:     []Message{msg("u0", RoleUser, `"hi"`), msg(id("2"), RoleAssistant, `"hello"`)},
		stored:   map[string]bool{"u0": true},
		errField: "messages", errSubstr: "nothing new",
	}, {
		name:     "a new thread must end with something to run",
		msgs:     []Message{msg("u0", RoleUser, `"hi"`), msg("a0", RoleAssistant, `"hello"`)},
		fresh:    true,
		errField: "messages", errSubstr: "nothing new",
	}, {
		name:     "audio is not taken",
		msgs:     []Message{msg("u1", RoleUser, `[{"type":"audio","source":{"type":"url","value":"https://x/a.mp3"}}]`)},
		fresh:    true,
		errField: "messages[0].content[0].type", errSubstr: "text and image parts",
	}, {
		name:     "a tool message needs its call",
		msgs:     []Message{toolMsg("t1", "", `"x"`)},
		errField: "messages[0].toolCallId",
	}, {
		name:     "tool call arguments must be an object",
		msgs:     []Message{{ID: "a", Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "c", Function: FunctionCall{Name: "f", Arguments: "[1]"}}}}, msg("u", RoleUser, `"x"`)},
		fresh:    true,
		errField: "messages[0].toolCalls[0].function.arguments",
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := RunAgentInput{ThreadID: "t", RunID: "r", Messages: tc.msgs, Resume: tc.resume, Context: tc.context}
			p, err := planRun(in, tc.stored, tc.fresh)
			if tc.errField != "" || tc.errSubstr != "" {
				var e *aap.Error
				if !errors.As(err, &e) || e.Field != tc.errField || !strings.Contains(e.Msg, tc.errSubstr) {
					t.Fatalf("err = %v, want field %q and %q", err, tc.errField, tc.errSubstr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range []struct {
				what      string
				got, want []string
			}{{"seed", describe(p.seed), tc.seed}, {"seed ids", p.seedIDs, tc.seedIDs}, {"turn", describe(p.turn), tc.turn}, {"turn ids", p.turnIDs, tc.turnIDs}} {
				if strings.Join(c.got, "|") != strings.Join(c.want, "|") {
					t.Errorf("%s = %q, want %q", c.what, c.got, c.want)
				}
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// Images reach AAP as image blocks: a URL as is, inline data as a data:
// URI.
func TestUserImagesBecomeImageBlocks(t *testing.T) {
	m, err := toAAP("m", msg("u", RoleUser, `[{"type":"text","text":"what is this?"},
		{"type":"image","source":{"type":"url","value":"https://example.com/cat.png"}},
		{"type":"image","source":{"type":"data","value":"iVBOR","mimeType":"image/png"}}]`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(m)
	want := `{"role":"user","content":[{"type":"text","text":"what is this?"},{"type":"image","url":"https://example.com/cat.png"},{"type":"image","url":"data:image/png;base64,iVBOR"}]}`
	if string(b) != want {
		t.Fatalf("got %s\nwant %s", b, want)
	}
}

// Errors the pipeline reports about a turn's messages name the input's
// members they came from.
func TestPipelineErrorsNameTheInputMembers(t *testing.T) {
	fields := []string{"messages[4]", "resume[0]"}
	cases := map[string]string{
		"messages[0].toolCallId": "messages[4].toolCallId",
		"messages[1].toolCallId": "resume[0].interruptId",
		"messages":               "messages",
		"agent.options.style":    "forwardedProps.agent.options.style",
		"tools[2].name":          "tools[2].name",
	}
	for in, want := range cases {
		var e *aap.Error
		if !errors.As(inputError(&aap.Error{Field: in, Msg: "x"}, fields), &e) || e.Field != want {
			t.Errorf("%s: got %v, want %s", in, e, want)
		}
	}
}

// A RunAgentInput's own rules: what aapd relies on is there.
func TestRunAgentInputRules(t *testing.T) {
	cases := []struct{ body, field string }{
		{`{"runId":"r","messages":[]}`, "threadId"},
		{`{"threadId":"t","messages":[]}`, "runId"},
		{`{"threadId":"t\u0000","runId":"r"}`, "threadId"},
		{`{"threadId":"` + strings.Repeat("x", 257) + `","runId":"r"}`, "threadId"},
		// Bytes that are not UTF-8 in an id: json.Unmarshal would read
		// them as U+FFFD, and the run's events name another thread.
		{`{"threadId":"t` + "\xff" + `","runId":"r"}`, "threadId"},
		{`{"threadId":"t","runId":"r` + "\xc3\x28" + `"}`, "runId"},
		{`{"threadId":"t","runId":"r","parentRunId":"` + "\xfe" + `"}`, "parentRunId"},
		{`{"threadId":"t","runId":"r\u0000"}`, "runId"},
		{`{"threadId":"t","runId":"` + strings.Repeat("r", 257) + `"}`, "runId"},
		{`{"threadId":"t","runId":"r","parentRunId":"p\u0007"}`, "parentRunId"},
		{`{"threadId":"t","runId":"r","messages":[{"role":"user","content":"x"}]}`, "messages[0].id"},
		{`{"threadId":"t","runId":"r","messages":[{"id":"a","role":"user","content":"x"},{"id":"a","role":"user","content":"y"}]}`, "messages[1].id"},
		{`{"threadId":"t","runId":"r","messages":[{"id":"a","role":"robot"}]}`, "messages[0].role"},
		{`{"threadId":"t","runId":"r","resume":[{"interruptId":"i","status":"maybe"}]}`, "resume[0].status"},
		{`[]`, ""},
	}
	for _, tc := range cases {
		_, err := decodeInput([]byte(tc.body))
		var e *aap.Error
		if !errors.As(err, &e) || e.Field != tc.field {
			t.Errorf("%s: err = %v, want field %q", tc.body, err, tc.field)
		}
	}
	in, err := decodeInput([]byte(`{"threadId":"t","runId":"r","messages":[],"tools":[],"context":[],"state":{"a":1},"forwardedProps":{},"protocolVersion":"1.0","future":true}`))
	if err != nil || in.ThreadID != "t" {
		t.Fatalf("a full input: %+v, %v", in, err)
	}
	// U+FFFD the client wrote is an id's character like any other; a byte
	// that is not UTF-8 outside the ids is read as JSON reads it.
	in, err = decodeInput([]byte(`{"threadId":"t\ufffd","runId":"r","messages":[{"id":"m","role":"user","content":"x` + "\xff" + `"}]}`))
	if err != nil || in.ThreadID != "t\ufffd" {
		t.Fatalf("U+FFFD escaped in an id: %+v, %v", in, err)
	}
}

// forwardedProps.agent is the turn's agent member; anything else in
// forwardedProps is the application's.
func TestForwardedPropsAgent(t *testing.T) {
	o, err := agentOverrides(json.RawMessage(`{"agent":{"tools":[{"name":"clock","trust":true}],"options":{"style":"shout"}},"other":1}`))
	if err != nil || o == nil || len(o.Tools) != 1 || !o.Tools[0].Trust || o.Options["style"] != "shout" {
		t.Fatalf("got %+v, %v", o, err)
	}
	for _, none := range []string{``, `null`, `"x"`, `{}`, `{"agent":null}`, `{"nodeName":"n"}`} {
		if o, err := agentOverrides(json.RawMessage(none)); o != nil || err != nil {
			t.Errorf("%s: got %+v, %v", none, o, err)
		}
	}
	for body, field := range map[string]string{
		`{"agent":1}`:                           "forwardedProps.agent",
		`{"agent":{"tools":"clock"}}`:           "forwardedProps.agent.tools",
		`{"agent":{"tools":[{"trust":true}]}}`:  "forwardedProps.agent.tools[0].name",
		`{"agent":{"options":{"style":["a"]}}}`: "forwardedProps.agent.options",
	} {
		var e *aap.Error
		if _, err := agentOverrides(json.RawMessage(body)); !errors.As(err, &e) || e.Field != field {
			t.Errorf("%s: err = %v, want field %s", body, err, field)
		}
	}
	tools, err := clientTools([]Tool{{Name: "noop", Description: "does nothing"}})
	if err != nil || string(tools[0].Parameters) != string(noParameters) {
		t.Fatalf("a tool without parameters: %+v, %v", tools, err)
	}
}
