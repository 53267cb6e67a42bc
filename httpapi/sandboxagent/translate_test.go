package sandboxagent

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/agents"
	"github.com/aapd/aapd/store"
)

// summary names a draft by its type and what it carries.
func summary(d draft) string {
	switch v := d.data.(type) {
	case itemData:
		s := d.typ + ":" + v.Item.Kind + "/" + v.Item.Status
		if v.Item.Kind == kindStatus {
			s += ":" + v.Item.Content[0].Label
		}
		return s
	case deltaData:
		return d.typ + ":" + v.Delta
	case permissionData:
		return d.typ + ":" + v.Status
	case questionData:
		return d.typ + ":" + v.Status + ":" + v.Response
	case errorData:
		return d.typ + ":" + v.Code
	}
	return d.typ
}

// A turn's translation: its inputs first, then each AAP event, depending
// only on the turn's events before it.
func TestTranslatorTurns(t *testing.T) {
	clock := aap.ToolCall{ToolCallID: "c1", Name: "clock", Input: json.RawMessage(`{}`)}
	ask := aap.ToolCall{ToolCallID: "q1", Name: agents.QuestionToolName, Input: json.RawMessage(`{"question":"Sure?","options":["yes","no"]}`)}
	lookup := aap.ToolCall{ToolCallID: "l1", Name: "lookup", Input: json.RawMessage(`{}`)}
	text := func(s string) aap.Event { return aap.Event{Type: aap.EventTextDelta, Delta: s} }
	cases := []struct {
		name    string
		in      store.TurnInput
		events  []aap.Event
		pending []aap.PendingToolCall
		want    []string
	}{
		{
			name:   "a user message and a streamed answer",
			in:     store.TurnInput{Messages: []aap.Message{aap.UserMessage("hi")}},
			events: []aap.Event{aap.TurnStart(), text("Echo: "), text("hi"), aap.TurnStop(aap.StopEndTurn)},
			want: []string{"item.started:message/in_progress", "item.delta:hi", "item.completed:message/completed",
				"item.started:message/in_progress", "item.delta:Echo: ", "item.delta:hi", "item.completed:message/completed",
				"item.completed:status/completed:turn.completed"},
		},
		{
			name: "thinking, whole texts, a tool call and its result",
			events: []aap.Event{aap.TurnStart(), {Type: aap.EventThinking, Thinking: "hmm"}, {Type: aap.EventText, Text: "calling"},
				aap.ToolCallEvent(clock), aap.ToolResultEvent("c1", aap.TextContent("noon")), {Type: aap.EventText, Text: "It is noon"},
				aap.TurnStop(aap.StopMaxTokens)},
			want: []string{"item.started:message/in_progress", "item.delta:calling", "item.completed:message/completed",
				"item.started:tool_call/in_progress", "item.completed:tool_call/completed",
				"item.started:tool_result/in_progress", "item.completed:tool_result/completed",
				"item.started:message/in_progress", "item.delta:It is noon", "item.completed:message/completed",
				"item.completed:status/completed:turn.completed"},
		},
		{
			name:    "calls left pending: a permission, a question, a client tool's",
			events:  []aap.Event{aap.TurnStart(), aap.ToolCallEvent(clock), aap.ToolCallEvent(ask), aap.ToolCallEvent(lookup), aap.TurnStop(aap.StopToolUse)},
			pending: []aap.PendingToolCall{{ToolCall: clock, Server: true}, {ToolCall: ask}, {ToolCall: lookup}},
			want: []string{"item.started:tool_call/in_progress", "item.completed:tool_call/completed",
				"item.started:tool_call/in_progress", "item.completed:tool_call/completed",
				"item.started:tool_call/in_progress", "item.completed:tool_call/completed",
				"permission.requested:requested", "question.requested:requested:"},
		},
		{
			name:    "only a client tool's call pending: the turn is over for this API",
			events:  []aap.Event{aap.TurnStart(), aap.ToolCallEvent(lookup), aap.TurnStop(aap.StopToolUse)},
			pending: []aap.PendingToolCall{{ToolCall: lookup}},
			want: []string{"item.started:tool_call/in_progress", "item.completed:tool_call/completed",
				"item.completed:status/completed:turn.completed"},
		},
		{
			name: "answers to what the turn before left pending",
			in: store.TurnInput{
				PendingBefore: []aap.PendingToolCall{{ToolCall: clock, Server: true}, {ToolCall: ask}},
				Permissions:   []store.TurnPermission{{ToolCallID: "c1", Granted: true, ForSession: true}},
				Messages:      []aap.Message{aap.ToolMessage("q1", "yes")},
			},
			events: []aap.Event{aap.TurnStart(), aap.ToolResultEvent("c1", aap.TextContent("noon")), aap.TurnStop(aap.StopEndTurn)},
			want: []string{"permission.resolved:accept_for_session", "question.resolved:answered:yes",
				"item.started:tool_result/in_progress", "item.completed:tool_result/completed",
				"item.started:tool_result/in_progress", "item.completed:tool_result/completed",
				"item.completed:status/completed:turn.completed"},
		},
		{
			name: "a user message instead: the calls are rejected",
			in: store.TurnInput{
				PendingBefore: []aap.PendingToolCall{{ToolCall: clock, Server: true}, {ToolCall: ask}},
				Messages:      []aap.Message{aap.UserMessage("never mind")},
			},
			events: []aap.Event{aap.TurnStart(), aap.ToolResultEvent("c1", aap.TextContent(agents.CancelledToolCallText)),
				aap.ToolResultEvent("q1", aap.TextContent(agents.CancelledToolCallText)), aap.TurnStop(aap.StopEndTurn)},
			want: []string{"permission.resolved:reject", "question.resolved:rejected:",
				"item.started:message/in_progress", "item.delta:never mind", "item.completed:message/completed",
				"item.started:tool_result/in_progress", "item.completed:tool_result/failed",
				"item.started:tool_result/in_progress", "item.completed:tool_result/failed",
				"item.completed:status/completed:turn.completed"},
		},
		{
			name:   "a declined question",
			in:     store.TurnInput{PendingBefore: []aap.PendingToolCall{{ToolCall: ask}}, Messages: []aap.Message{aap.ToolMessage("q1", agents.QuestionDeclinedText)}},
			events: []aap.Event{aap.TurnStart(), aap.TurnStop(aap.StopEndTurn)},
			want: []string{"question.resolved:rejected:", "item.started:tool_result/in_progress", "item.completed:tool_result/failed",
				"item.completed:status/completed:turn.completed"},
		},
		{
			name: "a failed turn: its message fails, then the error",
			events: []aap.Event{aap.TurnStart(), text("Partial"),
				aap.TurnStopError(aap.TurnError{Type: aap.TurnErrorModel, Message: "boom"})},
			want: []string{"item.started:message/in_progress", "item.delta:Partial", "item.completed:message/failed", "error:model_error"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tr := newTranslator("turn_x", tc.in, func(context.Context, []aap.ToolCall) ([]aap.PendingToolCall, error) {
				return tc.pending, nil
			})
			drafts := tr.start()
			for _, e := range tc.events {
				more, err := tr.event(context.Background(), e, nil)
				if err != nil {
					t.Fatal(err)
				}
				drafts = append(drafts, more...)
			}
			var got []string
			for _, d := range drafts {
				got = append(got, summary(d))
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got\n%q, want\n%q", got, tc.want)
			}
		})
	}
}

// The index starts a read at the turn holding the offset, and takes only
// the turn that comes right after those it has.
func TestIndexLocatesTheTurnHoldingAnOffset(t *testing.T) {
	x := newLogIndex(2)
	si := x.session("t/s1")
	si.setStart(1)
	si.record(span{turnID: "a", after: "", end: "ca", first: 2, n: 5})    // 2..6
	si.record(span{turnID: "c", after: "cb", end: "cc", first: 12, n: 3}) // not next: ignored
	si.record(span{turnID: "b", after: "ca", end: "cb", first: 7, n: 4})  // 7..10
	for _, tc := range []struct {
		offset int64
		next   int64
		after  string
	}{{1, 2, ""}, {5, 2, ""}, {6, 7, "ca"}, {10, 11, "cb"}, {99, 11, "cb"}} {
		if next, after := si.locate(tc.offset); next != tc.next || after != tc.after {
			t.Errorf("locate(%d) = %d %q, want %d %q", tc.offset, next, after, tc.next, tc.after)
		}
	}
	x.session("t/s2")
	x.session("t/s3") // s1, the least recently used, is dropped
	if got := x.session("t/s1"); got.startEvents() != 0 {
		t.Error("a dropped session's index is still there")
	}
}
