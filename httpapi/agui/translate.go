package agui

import (
	"strconv"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/store"
)

// translator turns one turn's AAP events into the AG-UI events of its run.
// AAP's stream does not mark where an assistant message begins; AG-UI's
// does, so the translator tracks it: a message runs from the agent's first
// output to the next server tool result (after which the model answers in a
// new message) or the end. Its text and tool calls share its id, so the
// client builds one assistant message of both; reasoning is a message of
// its own. Ids are the turn's id and a number (issued): a client sending
// them back is recognised, and nothing of the agent's is stored twice.
type translator struct {
	threadID, runID string
	// sessionID and turnID name the turn in RUN_FINISHED's result.
	sessionID, turnID string
	// clientTools are the names of the run's frontend tools: a call of one
	// left unanswered is the client's to run, any other awaits permission.
	clientTools map[string]bool

	n      int    // ids issued so far
	msgID  string // the assistant message being written, "" between messages
	open   string // the text or reasoning message open: its event type's family, or ""
	openID string
	calls  []call
}

// call is a tool call of the run, and whether the server answered it.
type call struct {
	id, name string
	answered bool
}

// Families of open messages.
const (
	openText      = "text"
	openReasoning = "reasoning"
)

func newTranslator(in RunAgentInput, sessionID, turnID string) *translator {
	t := &translator{threadID: in.ThreadID, runID: in.RunID, sessionID: sessionID, turnID: turnID, clientTools: map[string]bool{}}
	for _, tool := range in.Tools {
		t.clientTools[tool.Name] = true
	}
	return t
}

// newID issues the next message id of the run.
func (t *translator) newID() string {
	t.n++
	return t.turnID + "-" + strconv.Itoa(t.n)
}

// start is the run's first event.
func (t *translator) start(parentRunID string) []Event {
	e := event(RunStarted, "threadId", t.threadID, "runId", t.runID)
	if parentRunID != "" {
		e["parentRunId"] = parentRunID
	}
	return []Event{e}
}

// translate returns the AG-UI events of one AAP event. turn_stop closes
// what is open; the run's last event comes from finish.
func (t *translator) translate(e aap.Event) []Event {
	var out []Event
	switch e.Type {
	case aap.EventTextDelta, aap.EventText:
		text := e.Delta
		if e.Type == aap.EventText {
			text = e.Text
		}
		if t.open != openText {
			out = append(out, t.close()...)
			if t.msgID == "" {
				t.msgID = t.newID()
			}
			t.open, t.openID = openText, t.msgID
			out = append(out, event(TextMessageStart, "messageId", t.msgID, "role", "assistant"))
		}
		if text != "" {
			out = append(out, event(TextMessageContent, "messageId", t.msgID, "delta", text))
		}
		if e.Type == aap.EventText {
			out = append(out, t.close()...)
		}
	case aap.EventThinkingDelta, aap.EventThinking:
		text := e.Delta
		if e.Type == aap.EventThinking {
			text = e.Thinking
		}
		if t.open != openReasoning {
			out = append(out, t.close()...)
			t.open, t.openID = openReasoning, t.newID()
			out = append(out, event(ReasoningStart, "messageId", t.openID),
				event(ReasoningMessageStart, "messageId", t.openID, "role", "reasoning"))
		}
		if text != "" {
			out = append(out, event(ReasoningMessageContent, "messageId", t.openID, "delta", text))
		}
		if e.Type == aap.EventThinking {
			out = append(out, t.close()...)
		}
	case aap.EventToolCall:
		out = append(out, t.close()...)
		if t.msgID == "" {
			t.msgID = t.newID()
		}
		t.calls = append(t.calls, call{id: e.ToolCallID, name: e.Name})
		out = append(out,
			event(ToolCallStart, "toolCallId", e.ToolCallID, "toolCallName", e.Name, "parentMessageId", t.msgID),
			event(ToolCallArgs, "toolCallId", e.ToolCallID, "delta", compactJSON(e.Input)),
			event(ToolCallEnd, "toolCallId", e.ToolCallID))
	case aap.EventToolResult:
		out = append(out, t.close()...)
		for i := range t.calls {
			if t.calls[i].id == e.ToolCallID {
				t.calls[i].answered = true
			}
		}
		out = append(out, event(ToolCallResult, "messageId", t.newID(), "toolCallId", e.ToolCallID,
			"content", toolResultContent(e.Content), "role", "tool"))
		// The model answers the result in a new message.
		t.msgID = ""
	case aap.EventTurnStop:
		out = append(out, t.close()...)
	}
	return out
}

// close ends the text or reasoning message open, if any.
func (t *translator) close() []Event {
	id := t.openID
	switch t.open {
	case openText:
		t.open, t.openID = "", ""
		return []Event{event(TextMessageEnd, "messageId", id)}
	case openReasoning:
		t.open, t.openID = "", ""
		return []Event{event(ReasoningMessageEnd, "messageId", id), event(ReasoningEnd, "messageId", id)}
	}
	return nil
}

// finish returns the run's last event, from the turn's stop reason and its
// record (status and error, when it could be read). A turn that stopped for
// tool calls finishes the run: with the calls of frontend tools pending
// (success), or, when server tool calls await permission, interrupted.
func (t *translator) finish(stop aap.StopReason, rec store.Turn) []Event {
	out := t.close()
	switch {
	case rec.Status == store.TurnCancelled:
		return append(out, event(RunFinished, "threadId", t.threadID, "runId", t.runID,
			"result", t.result(stop), "outcome", map[string]any{"type": "cancelled"}))
	case stop == aap.StopError:
		code, msg := CodeTurnFailed, "the agent failed"
		if rec.Status == store.TurnInterrupted {
			code, msg = CodeTurnInterrupted, "the turn was interrupted before it ended"
		}
		if rec.Error != "" {
			msg += ": " + rec.Error
		}
		return append(out, runError(code, msg))
	}
	outcome := map[string]any{"type": "success"}
	if stop == aap.StopToolUse {
		var pending []string
		var interrupts []Interrupt
		for _, c := range t.calls {
			switch {
			case c.answered:
			case t.clientTools[c.name]:
				pending = append(pending, c.id)
			default:
				interrupts = append(interrupts, permissionInterrupt(c))
			}
		}
		if len(interrupts) > 0 {
			outcome = map[string]any{"type": "interrupt", "interrupts": interrupts}
		} else if len(pending) > 0 {
			outcome["pendingToolCallIds"] = pending
		}
	}
	return append(out, event(RunFinished, "threadId", t.threadID, "runId", t.runID, "result", t.result(stop), "outcome", outcome))
}

// result is RUN_FINISHED's result: where the run lives in aapd, and why
// the agent stopped (AAP's stop reason: end_turn, tool_use, max_tokens,
// refusal).
func (t *translator) result(stop aap.StopReason) map[string]any {
	return map[string]any{"sessionId": t.sessionID, "turnId": t.turnID, "stopReason": stop}
}
