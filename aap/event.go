package aap

import (
	"encoding/json"
	"fmt"
)

// EventType names an SSE event of a turn stream.
type EventType string

// SSE event types.
const (
	EventTurnStart     EventType = "turn_start"
	EventTextDelta     EventType = "text_delta"     // delta mode
	EventThinkingDelta EventType = "thinking_delta" // delta mode
	EventText          EventType = "text"           // message mode
	EventThinking      EventType = "thinking"       // message mode
	EventToolCall      EventType = "tool_call"
	EventToolResult    EventType = "tool_result"
	EventTurnStop      EventType = "turn_stop"
)

// Event is one event of a turn stream. MarshalJSON writes its data payload
// (the SSE `data:` line); Type goes on the `event:` line.
type Event struct {
	Type EventType

	Delta    string // text_delta, thinking_delta
	Text     string // text
	Thinking string // thinking

	ToolCall              // tool_call
	Content    Content    // tool_result (with ToolCall.ToolCallID)
	StopReason StopReason // turn_stop
	// Error says why the turn failed: turn_stop with stop reason "error"
	// only (an extension of the event's shape).
	Error *TurnError // turn_stop
	// TurnID names the event's turn in the session event log, on
	// turn_start only (an extension of that log; nil elsewhere).
	TurnID string // turn_start
}

// TurnStart returns the first event of every stream.
func TurnStart() Event { return Event{Type: EventTurnStart} }

// TurnStop returns the last event of every stream.
func TurnStop(r StopReason) Event { return Event{Type: EventTurnStop, StopReason: r} }

// TurnStopError returns the last event of a failed turn.
func TurnStopError(e TurnError) Event {
	return Event{Type: EventTurnStop, StopReason: StopError, Error: &e}
}

// ToolCallEvent returns a tool_call event.
func ToolCallEvent(c ToolCall) Event { return Event{Type: EventToolCall, ToolCall: c} }

// ToolResultEvent returns a tool_result event.
func ToolResultEvent(toolCallID string, content Content) Event {
	return Event{Type: EventToolResult, ToolCall: ToolCall{ToolCallID: toolCallID}, Content: content}
}

// MarshalJSON writes the event's data payload.
func (e Event) MarshalJSON() ([]byte, error) {
	switch e.Type {
	case EventTurnStart:
		if e.TurnID != "" {
			return json.Marshal(struct {
				TurnID string `json:"turnId"`
			}{e.TurnID})
		}
		return []byte(`{}`), nil
	case EventTextDelta, EventThinkingDelta:
		return json.Marshal(struct {
			Delta string `json:"delta"`
		}{e.Delta})
	case EventText:
		return json.Marshal(struct {
			Text string `json:"text"`
		}{e.Text})
	case EventThinking:
		return json.Marshal(struct {
			Thinking string `json:"thinking"`
		}{e.Thinking})
	case EventToolCall:
		return json.Marshal(struct {
			ToolCallID string          `json:"toolCallId"`
			Name       string          `json:"name"`
			Input      json.RawMessage `json:"input"`
		}{e.ToolCallID, e.Name, objectOrEmpty(e.Input)})
	case EventToolResult:
		return json.Marshal(ToolResult{ToolCallID: e.ToolCallID, Content: e.Content})
	case EventTurnStop:
		return json.Marshal(struct {
			StopReason StopReason `json:"stopReason"`
			Error      *TurnError `json:"error,omitempty"`
		}{e.StopReason, e.Error})
	}
	return nil, fmt.Errorf("event: unknown type %q", e.Type)
}

// ParseEvent reads an event from its type and data payload, the inverse of
// MarshalJSON. It is how recorded events are replayed and how tests and
// clients read a stream.
func ParseEvent(typ EventType, data []byte) (Event, error) {
	e := Event{Type: typ}
	var raw struct {
		Delta      string          `json:"delta"`
		Text       string          `json:"text"`
		Thinking   string          `json:"thinking"`
		ToolCallID string          `json:"toolCallId"`
		Name       string          `json:"name"`
		Input      json.RawMessage `json:"input"`
		Content    *Content        `json:"content"`
		StopReason StopReason      `json:"stopReason"`
		Error      *TurnError      `json:"error"`
		TurnID     string          `json:"turnId"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return e, fmt.Errorf("event %s: %w", typ, err)
	}
	e.Delta, e.Text, e.Thinking = raw.Delta, raw.Text, raw.Thinking
	e.ToolCall = ToolCall{ToolCallID: raw.ToolCallID, Name: raw.Name, Input: raw.Input}
	if raw.Content != nil {
		e.Content = *raw.Content
	}
	e.StopReason, e.Error, e.TurnID = raw.StopReason, raw.Error, raw.TurnID
	return e, nil
}
