package sandboxagent

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/agents"
	"github.com/aapd/aapd/store"
)

// draft is a UniversalEvent before its place in the log (sequence, id,
// time, session) is known.
type draft struct {
	typ       string
	data      any
	source    string
	synthetic bool
	// raw is what the event was translated from: the AAP event of the
	// session log, or the message; nil for the daemon's own.
	raw any
}

// A session's UniversalEvents are a pure function of what the store keeps
// of it, so that every read on every replica numbers them alike:
//
//   - its start: session.started, then each seed message as an item;
//   - each turn, in the log's order: first what the turn was started with
//     (store.TurnInput) — the resolution of the calls the turn before it
//     left pending (permission.resolved, question.resolved), then the
//     client's messages as items — then its AAP events, translated one by
//     one (translator.event), each depending only on the turn's events
//     before it;
//   - session.ended once the session has ended and no turn runs.
//
// A turn's events and inputs never change once it has ended, nor the
// prefix of them a running turn has recorded, so a finished turn always
// translates to the same events, and a running one to a prefix of them.

// translator turns one turn into UniversalEvents.
type translator struct {
	turnID string
	in     store.TurnInput
	// pending is what the turn left pending, read once its turn_stop is
	// seen (its end is written by then), given the calls the turn made
	// that it did not answer itself.
	pending func(ctx context.Context, unanswered []aap.ToolCall) ([]aap.PendingToolCall, error)
	// calls are the turn's calls not answered in it so far.
	calls []aap.ToolCall

	n      int       // items issued
	open   *openItem // the assistant message being written
	parent string    // the assistant message the next tool call belongs to
}

// openItem is an assistant message item being written.
type openItem struct {
	id    string
	parts []Part
	// deltasTo is the kind of the last part while deltas add to it
	// ("text" or "reasoning"), "" once a whole text ended it.
	deltasTo string
}

// add adds text to the message: to its last part when it is a delta of
// that part's kind, else as a part of its own.
func (o *openItem) add(kind, text string, delta bool) {
	if o.deltasTo != kind || !delta {
		p := Part{Type: kind}
		if kind == "reasoning" {
			p.Visibility = "public"
		}
		o.parts = append(o.parts, p)
	}
	o.parts[len(o.parts)-1].Text += text
	o.deltasTo = ""
	if delta {
		o.deltasTo = kind
	}
}

func newTranslator(turnID string, in store.TurnInput, pending func(context.Context, []aap.ToolCall) ([]aap.PendingToolCall, error)) *translator {
	return &translator{turnID: turnID, in: in, pending: pending}
}

func (t *translator) newItemID() string {
	t.n++
	return t.turnID + "-" + strconv.Itoa(t.n)
}

// start is what the turn was started with: the resolution of the calls
// pending before it, then the client's messages.
func (t *translator) start() []draft {
	var out []draft
	answers := map[string]aap.Message{}
	for _, m := range t.in.Messages {
		if m.Role == aap.RoleTool {
			answers[m.ToolCallID] = m
		}
	}
	granted := map[string]store.TurnPermission{}
	for _, p := range t.in.Permissions {
		granted[p.ToolCallID] = p
	}
	for _, p := range t.in.PendingBefore {
		switch {
		case p.Server:
			status := permReject
			if g, ok := granted[p.ToolCallID]; ok && g.Granted {
				status = permAccept
				if g.ForSession {
					status = permAcceptForSession
				}
			}
			out = append(out, draft{typ: evPermissionResolved, source: sourceDaemon,
				data: permission(p.ToolCall, status)})
		case p.Name == agents.QuestionToolName:
			q := question(p.ToolCall, questionRejected)
			if a, ok := answers[p.ToolCallID]; ok && a.Content.PlainText() != agents.QuestionDeclinedText {
				q.Status, q.Response = questionAnswered, a.Content.PlainText()
			}
			out = append(out, draft{typ: evQuestionResolved, source: sourceDaemon, data: q})
		}
	}
	for _, m := range t.in.Messages {
		out = append(out, messageItem(t.newItemID(), m)...)
	}
	return out
}

// event translates one AAP event of the turn; raw is its log item.
func (t *translator) event(ctx context.Context, e aap.Event, raw any) ([]draft, error) {
	var out []draft
	switch e.Type {
	case aap.EventTextDelta, aap.EventText, aap.EventThinkingDelta, aap.EventThinking:
		kind, text := "text", e.Delta+e.Text
		if e.Type == aap.EventThinkingDelta || e.Type == aap.EventThinking {
			kind, text = "reasoning", e.Delta+e.Thinking
		}
		out = t.ensureOpen(raw)
		t.open.add(kind, text, e.Type == aap.EventTextDelta || e.Type == aap.EventThinkingDelta)
		// A delta is text: reasoning shows in the message's item.completed.
		if kind == "text" && text != "" {
			out = append(out, draft{typ: evItemDelta, source: sourceAgent, raw: raw,
				data: deltaData{ItemID: t.open.id, Delta: text}})
		}
	case aap.EventToolCall:
		out = t.close(statusCompleted, raw)
		t.calls = append(t.calls, e.ToolCall)
		item := Item{ItemID: t.newItemID(), NativeItemID: e.ToolCallID, ParentID: t.parent, Kind: kindToolCall,
			Role: "assistant", Content: []Part{toolCallPart(e.ToolCall)}}
		out = append(out, itemPair(item, sourceAgent, false, raw)...)
	case aap.EventToolResult:
		out = t.close(statusCompleted, raw)
		for i, c := range t.calls {
			if c.ToolCallID == e.ToolCallID {
				t.calls = append(t.calls[:i:i], t.calls[i+1:]...)
				break
			}
		}
		out = append(out, toolResultItem(t.newItemID(), e.ToolCallID, e.Content, sourceAgent, false, raw)...)
		// The model answers the result in a new message.
		t.parent = ""
	case aap.EventTurnStop:
		status := statusCompleted
		if e.StopReason == aap.StopError {
			status = statusFailed
		}
		out = t.close(status, raw)
		end, err := t.end(ctx, e, raw)
		if err != nil {
			return nil, err
		}
		out = append(out, end...)
	}
	return out, nil
}

// end is how the turn ends: an error, the requests the calls it left
// pending make of the user (permissions, questions), or turn.completed —
// each an event the SDK's streams take as the end of a turn.
func (t *translator) end(ctx context.Context, e aap.Event, raw any) ([]draft, error) {
	if e.StopReason == aap.StopError {
		d := errorData{Message: "the turn failed"}
		source := sourceAgent
		if e.Error != nil {
			d.Message, d.Code = e.Error.Message, e.Error.Type
			if e.Error.Type != aap.TurnErrorModel && e.Error.Type != aap.TurnErrorStepLimit {
				source = sourceDaemon
			}
		}
		return []draft{{typ: evError, source: source, data: d, raw: raw}}, nil
	}
	var out []draft
	if e.StopReason == aap.StopToolUse {
		pending, err := t.pending(ctx, t.calls)
		if err != nil {
			return nil, err
		}
		for _, p := range pending {
			switch {
			case p.Server:
				out = append(out, draft{typ: evPermissionRequested, source: sourceDaemon, raw: raw,
					data: permission(p.ToolCall, permRequested)})
			case p.Name == agents.QuestionToolName:
				out = append(out, draft{typ: evQuestionRequested, source: sourceAgent, raw: raw,
					data: question(p.ToolCall, questionRequested)})
			}
		}
	}
	if len(out) > 0 {
		return out, nil
	}
	item := Item{ItemID: t.newItemID(), Kind: kindStatus, Role: "system", Status: statusCompleted,
		Content: []Part{{Type: "status", Label: "turn.completed", Detail: string(e.StopReason)}}}
	return []draft{{typ: evItemCompleted, source: sourceDaemon, synthetic: true, raw: raw, data: itemData{item}}}, nil
}

// ensureOpen opens an assistant message if none is open.
func (t *translator) ensureOpen(raw any) []draft {
	if t.open != nil {
		return nil
	}
	t.open = &openItem{id: t.newItemID()}
	t.parent = t.open.id
	item := Item{ItemID: t.open.id, Kind: kindMessage, Role: "assistant", Content: []Part{}, Status: statusInProgress}
	return []draft{{typ: evItemStarted, source: sourceDaemon, synthetic: true, raw: raw, data: itemData{item}}}
}

// close completes the assistant message open, if any.
func (t *translator) close(status string, raw any) []draft {
	o := t.open
	if o == nil {
		return nil
	}
	t.open = nil
	item := Item{ItemID: o.id, Kind: kindMessage, Role: "assistant", Content: o.parts, Status: status}
	return []draft{{typ: evItemCompleted, source: sourceAgent, raw: raw, data: itemData{item}}}
}

// messageItem is a message the client sent (or a seed message) as an item:
// started, its text as a delta, completed; a tool result as a tool_result
// item.
func messageItem(id string, m aap.Message) []draft {
	raw := map[string]any{"message": m}
	if m.Role == aap.RoleTool {
		return toolResultItem(id, m.ToolCallID, m.Content, sourceDaemon, true, raw)
	}
	kind, role := kindMessage, string(m.Role)
	if m.Role == aap.RoleSystem {
		kind = kindSystem
	}
	item := Item{ItemID: id, Kind: kind, Role: role, Content: parts(m.Content), Status: statusInProgress}
	out := []draft{{typ: evItemStarted, source: sourceDaemon, synthetic: true, raw: raw, data: itemData{item}}}
	if text := m.Content.PlainText(); text != "" {
		out = append(out, draft{typ: evItemDelta, source: sourceDaemon, synthetic: true, raw: raw,
			data: deltaData{ItemID: id, Delta: text}})
	}
	item.Status = statusCompleted
	return append(out, draft{typ: evItemCompleted, source: sourceDaemon, synthetic: true, raw: raw, data: itemData{item}})
}

// toolResultItem is a tool's result as a tool_result item, failed when it
// is an error (a denial, a call closed unanswered, a declined question).
func toolResultItem(id, callID string, c aap.Content, source string, synthetic bool, raw any) []draft {
	output := c.PlainText()
	item := Item{ItemID: id, NativeItemID: callID, Kind: kindToolResult, Role: "tool", Status: statusInProgress,
		Content: []Part{{Type: "tool_result", CallID: callID, Output: output}}}
	started := draft{typ: evItemStarted, source: source, synthetic: synthetic, raw: raw, data: itemData{item}}
	item.Status = statusCompleted
	if failedResult(output) {
		item.Status = statusFailed
	}
	return []draft{started, {typ: evItemCompleted, source: source, synthetic: synthetic, raw: raw, data: itemData{item}}}
}

// failedResult tells a tool result that reports a failure: the texts
// aapd writes for calls that did not run, and results that say Error.
func failedResult(output string) bool {
	for _, prefix := range []string{agents.DeniedToolCallText, agents.CancelledToolCallText, agents.InterruptedToolCallText, "Error:"} {
		if strings.HasPrefix(output, prefix) {
			return true
		}
	}
	return false
}

// itemPair is an item started and completed at once.
func itemPair(item Item, source string, synthetic bool, raw any) []draft {
	started := item
	started.Status = statusInProgress
	item.Status = statusCompleted
	return []draft{
		{typ: evItemStarted, source: source, synthetic: synthetic, raw: raw, data: itemData{started}},
		{typ: evItemCompleted, source: source, synthetic: synthetic, raw: raw, data: itemData{item}},
	}
}

// permission is the data of a permission event of a server tool's call.
func permission(c aap.ToolCall, status string) permissionData {
	return permissionData{PermissionID: c.ToolCallID, Action: c.Name, Status: status,
		Metadata: map[string]any{"tool": c.Name, "input": inputOf(c)}}
}

// question is the data of a question event of a call of the question tool.
func question(c aap.ToolCall, status string) questionData {
	var in struct {
		Question string   `json:"question"`
		Options  []string `json:"options"`
	}
	_ = json.Unmarshal(c.Input, &in) // a model's malformed input asks an empty question
	if in.Options == nil {
		in.Options = []string{}
	}
	return questionData{QuestionID: c.ToolCallID, Prompt: in.Question, Options: in.Options, Status: status}
}

// inputOf is a call's input as JSON ({} for none).
func inputOf(c aap.ToolCall) json.RawMessage {
	if len(c.Input) == 0 || string(c.Input) == "null" {
		return json.RawMessage(`{}`)
	}
	return c.Input
}
