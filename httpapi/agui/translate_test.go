package agui

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/store"
)

const testTurn = "turn_0190a1b2c3d4e5f60718293a4b5c6d7e"

// run translates a turn's events into its run's, RUN_STARTED to the last.
func run(in RunAgentInput, rec store.Turn, events ...aap.Event) []Event {
	tr := newTranslator(in, "sess_x", testTurn)
	out := tr.start(in.ParentRunID)
	var stop aap.StopReason
	for _, e := range events {
		if e.Type == aap.EventTurnStop {
			stop = e.StopReason
		}
		out = append(out, tr.translate(e)...)
	}
	return append(out, tr.finish(stop, rec)...)
}

// compact renders events one per line: the type and the members asked
// for, for tables a person can read.
func compact(events []Event) string {
	var lines []string
	for _, e := range events {
		b, _ := json.Marshal(e)
		lines = append(lines, string(b))
	}
	return strings.Join(lines, "\n")
}

func id(n string) string { return testTurn + "-" + n }

func text(d string) aap.Event     { return aap.Event{Type: aap.EventTextDelta, Delta: d} }
func thinking(d string) aap.Event { return aap.Event{Type: aap.EventThinkingDelta, Delta: d} }
func toolCall(id, name, input string) aap.Event {
	return aap.ToolCallEvent(aap.ToolCall{ToolCallID: id, Name: name, Input: json.RawMessage(input)})
}

// The translation of AAP turn events into AG-UI run events, case by case.
func TestTranslationOfTurnEventsIntoRunEvents(t *testing.T) {
	in := RunAgentInput{ThreadID: "t1", RunID: "r1", Tools: []Tool{{Name: "get_weather"}}}
	ok := store.Turn{Status: store.TurnCompleted}
	started := `{"type":"RUN_STARTED","runId":"r1","threadId":"t1"}`
	finished := func(stop, outcome string) string {
		return `{"type":"RUN_FINISHED","outcome":` + outcome + `,"result":{"sessionId":"sess_x","stopReason":"` + stop + `","turnId":"` + testTurn + `"},"runId":"r1","threadId":"t1"}`
	}
	cases := []struct {
		name   string
		rec    store.Turn
		events []aap.Event
		want   []string
	}{{
		name:   "text deltas are one assistant message",
		rec:    ok,
		events: []aap.Event{aap.TurnStart(), text("Hel"), text("lo"), aap.TurnStop(aap.StopEndTurn)},
		want: []string{started,
			`{"type":"TEXT_MESSAGE_START","messageId":"` + id("1") + `","role":"assistant"}`,
			`{"type":"TEXT_MESSAGE_CONTENT","delta":"Hel","messageId":"` + id("1") + `"}`,
			`{"type":"TEXT_MESSAGE_CONTENT","delta":"lo","messageId":"` + id("1") + `"}`,
			`{"type":"TEXT_MESSAGE_END","messageId":"` + id("1") + `"}`,
			finished("end_turn", `{"type":"success"}`)},
	}, {
		name:   "thinking is a reasoning message of its own before the text",
		rec:    ok,
		events: []aap.Event{aap.TurnStart(), thinking("hmm"), text("Hi"), aap.TurnStop(aap.StopEndTurn)},
		want: []string{started,
			`{"type":"REASONING_START","messageId":"` + id("1") + `"}`,
			`{"type":"REASONING_MESSAGE_START","messageId":"` + id("1") + `","role":"reasoning"}`,
			`{"type":"REASONING_MESSAGE_CONTENT","delta":"hmm","messageId":"` + id("1") + `"}`,
			`{"type":"REASONING_MESSAGE_END","messageId":"` + id("1") + `"}`,
			`{"type":"REASONING_END","messageId":"` + id("1") + `"}`,
			`{"type":"TEXT_MESSAGE_START","messageId":"` + id("2") + `","role":"assistant"}`,
			`{"type":"TEXT_MESSAGE_CONTENT","delta":"Hi","messageId":"` + id("2") + `"}`,
			`{"type":"TEXT_MESSAGE_END","messageId":"` + id("2") + `"}`,
			finished("end_turn", `{"type":"success"}`)},
	}, {
		name: "message mode: whole text and thinking",
		rec:  ok,
		events: []aap.Event{aap.TurnStart(), {Type: aap.EventThinking, Thinking: "so"}, {Type: aap.EventText, Text: "Done."},
			aap.TurnStop(aap.StopEndTurn)},
		want: []string{started,
			`{"type":"REASONING_START","messageId":"` + id("1") + `"}`,
			`{"type":"REASONING_MESSAGE_START","messageId":"` + id("1") + `","role":"reasoning"}`,
			`{"type":"REASONING_MESSAGE_CONTENT","delta":"so","messageId":"` + id("1") + `"}`,
			`{"type":"REASONING_MESSAGE_END","messageId":"` + id("1") + `"}`,
			`{"type":"REASONING_END","messageId":"` + id("1") + `"}`,
			`{"type":"TEXT_MESSAGE_START","messageId":"` + id("2") + `","role":"assistant"}`,
			`{"type":"TEXT_MESSAGE_CONTENT","delta":"Done.","messageId":"` + id("2") + `"}`,
			`{"type":"TEXT_MESSAGE_END","messageId":"` + id("2") + `"}`,
			finished("end_turn", `{"type":"success"}`)},
	}, {
		name: "a frontend tool call belongs to the text's message and is left pending",
		rec:  ok,
		events: []aap.Event{aap.TurnStart(), text("Let me look."), toolCall("c1", "get_weather", `{"city":"Paris"}`),
			aap.TurnStop(aap.StopToolUse)},
		want: []string{started,
			`{"type":"TEXT_MESSAGE_START","messageId":"` + id("1") + `","role":"assistant"}`,
			`{"type":"TEXT_MESSAGE_CONTENT","delta":"Let me look.","messageId":"` + id("1") + `"}`,
			`{"type":"TEXT_MESSAGE_END","messageId":"` + id("1") + `"}`,
			`{"type":"TOOL_CALL_START","parentMessageId":"` + id("1") + `","toolCallId":"c1","toolCallName":"get_weather"}`,
			`{"type":"TOOL_CALL_ARGS","delta":"{\"city\":\"Paris\"}","toolCallId":"c1"}`,
			`{"type":"TOOL_CALL_END","toolCallId":"c1"}`,
			finished("tool_use", `{"pendingToolCallIds":["c1"],"type":"success"}`)},
	}, {
		name: "a server tool's result is a tool message, and the answer after it a new message",
		rec:  ok,
		events: []aap.Event{aap.TurnStart(), toolCall("c1", "clock", `{}`),
			aap.ToolResultEvent("c1", aap.TextContent("noon")), text("It is noon."), aap.TurnStop(aap.StopEndTurn)},
		want: []string{started,
			`{"type":"TOOL_CALL_START","parentMessageId":"` + id("1") + `","toolCallId":"c1","toolCallName":"clock"}`,
			`{"type":"TOOL_CALL_ARGS","delta":"{}","toolCallId":"c1"}`,
			`{"type":"TOOL_CALL_END","toolCallId":"c1"}`,
			`{"type":"TOOL_CALL_RESULT","content":"noon","messageId":"` + id("2") + `","role":"tool","toolCallId":"c1"}`,
			`{"type":"TEXT_MESSAGE_START","messageId":"` + id("3") + `","role":"assistant"}`,
			`{"type":"TEXT_MESSAGE_CONTENT","delta":"It is noon.","messageId":"` + id("3") + `"}`,
			`{"type":"TEXT_MESSAGE_END","messageId":"` + id("3") + `"}`,
			finished("end_turn", `{"type":"success"}`)},
	}, {
		name:   "an untrusted server tool call is an interrupt",
		rec:    ok,
		events: []aap.Event{aap.TurnStart(), toolCall("c9", "calculator", `{"expression":"1"}`), aap.TurnStop(aap.StopToolUse)},
		want: []string{started,
			`{"type":"TOOL_CALL_START","parentMessageId":"` + id("1") + `","toolCallId":"c9","toolCallName":"calculator"}`,
			`{"type":"TOOL_CALL_ARGS","delta":"{\"expression\":\"1\"}","toolCallId":"c9"}`,
			`{"type":"TOOL_CALL_END","toolCallId":"c9"}`,
			finished("tool_use", `{"interrupts":[{"id":"c9","reason":"tool_permission","message":"The agent asks to run the server tool \"calculator\". Resolve with {\"granted\": true} to allow it, or cancel to deny it.","toolCallId":"c9","responseSchema":{"type":"object","properties":{"granted":{"type":"boolean"},"reason":{"type":"string"}}}}],"type":"interrupt"}`)},
	}, {
		name:   "a failed turn ends with RUN_ERROR, its message closed first",
		rec:    store.Turn{Status: store.TurnFailed, Error: "model: boom"},
		events: []aap.Event{aap.TurnStart(), text("par"), aap.TurnStop(aap.StopError)},
		want: []string{started,
			`{"type":"TEXT_MESSAGE_START","messageId":"` + id("1") + `","role":"assistant"}`,
			`{"type":"TEXT_MESSAGE_CONTENT","delta":"par","messageId":"` + id("1") + `"}`,
			`{"type":"TEXT_MESSAGE_END","messageId":"` + id("1") + `"}`,
			`{"type":"RUN_ERROR","code":"turn_failed","message":"the agent failed: model: boom"}`},
	}, {
		name:   "an interrupted turn ends with RUN_ERROR",
		rec:    store.Turn{Status: store.TurnInterrupted},
		events: []aap.Event{aap.TurnStart(), aap.TurnStop(aap.StopError)},
		want: []string{started,
			`{"type":"RUN_ERROR","code":"turn_interrupted","message":"the turn was interrupted before it ended"}`},
	}, {
		name:   "a cancelled turn finishes cancelled",
		rec:    store.Turn{Status: store.TurnCancelled},
		events: []aap.Event{aap.TurnStart(), text("x"), aap.TurnStop(aap.StopEndTurn)},
		want: []string{started,
			`{"type":"TEXT_MESSAGE_START","messageId":"` + id("1") + `","role":"assistant"}`,
			`{"type":"TEXT_MESSAGE_CONTENT","delta":"x","messageId":"` + id("1") + `"}`,
			`{"type":"TEXT_MESSAGE_END","messageId":"` + id("1") + `"}`,
			finished("end_turn", `{"type":"cancelled"}`)},
	}, {
		name:   "refusal and max_tokens finish with the stop reason in the result",
		rec:    ok,
		events: []aap.Event{aap.TurnStart(), aap.TurnStop(aap.StopRefusal)},
		want:   []string{started, finished("refusal", `{"type":"success"}`)},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := compact(run(in, tc.rec, tc.events...))
			if want := strings.Join(tc.want, "\n"); got != want {
				t.Errorf("got:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}

// Tool results with images travel as AG-UI parts; data: URIs as inline
// data.
func TestToolResultContentParts(t *testing.T) {
	c := aap.BlockContent(aap.TextBlock("see"), aap.ContentBlock{Type: aap.BlockImage, URL: "data:image/png;base64,AAAA"},
		aap.ContentBlock{Type: aap.BlockImage, URL: "https://example.com/a.png"})
	b, _ := json.Marshal(toolResultContent(c))
	want := `[{"text":"see","type":"text"},{"source":{"mimeType":"image/png","type":"data","value":"AAAA"},"type":"image"},{"source":{"type":"url","value":"https://example.com/a.png"},"type":"image"}]`
	if string(b) != want {
		t.Fatalf("got %s\nwant %s", b, want)
	}
}

// The ids aapd issues are recognised; others are the client's.
func TestIssuedMessageIDs(t *testing.T) {
	for id, want := range map[string]bool{
		id("1"): true, id("12"): true, testTurn: false, id(""): false, "u1": false,
		"turn_0190A1B2C3D4E5F60718293A4B5C6D7E-1": false, "x" + id("1"): false,
	} {
		if got := issued(id); got != want {
			t.Errorf("issued(%q) = %v, want %v", id, got, want)
		}
	}
}
