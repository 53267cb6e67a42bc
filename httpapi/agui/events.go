package agui

import (
	"bytes"
	"encoding/json"
	"sort"
	"strings"

	"github.com/aapd/aapd/aap"
)

// The AG-UI event types the door sends (@ag-ui/core's EventType).
const (
	RunStarted              = "RUN_STARTED"
	RunFinished             = "RUN_FINISHED"
	RunError                = "RUN_ERROR"
	TextMessageStart        = "TEXT_MESSAGE_START"
	TextMessageContent      = "TEXT_MESSAGE_CONTENT"
	TextMessageEnd          = "TEXT_MESSAGE_END"
	ToolCallStart           = "TOOL_CALL_START"
	ToolCallArgs            = "TOOL_CALL_ARGS"
	ToolCallEnd             = "TOOL_CALL_END"
	ToolCallResult          = "TOOL_CALL_RESULT"
	ReasoningStart          = "REASONING_START"
	ReasoningMessageStart   = "REASONING_MESSAGE_START"
	ReasoningMessageContent = "REASONING_MESSAGE_CONTENT"
	ReasoningMessageEnd     = "REASONING_MESSAGE_END"
	ReasoningEnd            = "REASONING_END"
)

// Event is one AG-UI event: its "type" and the members of that type, as
// the SSE data line carries them. Only members @ag-ui/core defines are set:
// its client strips any other, with a warning.
type Event map[string]any

// Type is the event's type.
func (e Event) Type() string { s, _ := e["type"].(string); return s }

// MarshalJSON writes "type" first, then the other members by name: the
// order a person reading a stream expects.
func (e Event) MarshalJSON() ([]byte, error) {
	keys := make([]string, 0, len(e))
	for k := range e {
		if k != "type" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var b bytes.Buffer
	t, _ := json.Marshal(e.Type())
	b.WriteString(`{"type":`)
	b.Write(t)
	for _, k := range keys {
		v, err := json.Marshal(e[k])
		if err != nil {
			return nil, err
		}
		name, _ := json.Marshal(k)
		b.WriteByte(',')
		b.Write(name)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

func event(typ string, kv ...any) Event {
	e := Event{"type": typ}
	for i := 0; i+1 < len(kv); i += 2 {
		e[kv[i].(string)] = kv[i+1]
	}
	return e
}

// RUN_ERROR codes: why a run that had started failed.
const (
	// CodeTurnFailed: the agent failed (its model, a tool, the database).
	CodeTurnFailed = "turn_failed"
	// CodeTurnInterrupted: the server stopped the turn (shutdown, its claim
	// lost) before it ended.
	CodeTurnInterrupted = "turn_interrupted"
	// CodeSessionDeleted: the thread's session was deleted during the run.
	CodeSessionDeleted = "session_deleted"
	// CodeStreamFailed: the run's events could not be read to their end
	// (the database, mostly); the turn may still end well, and its messages
	// are in the session's history.
	CodeStreamFailed = "stream_failed"
)

// runError is a RUN_ERROR event.
func runError(code, message string) Event {
	return event(RunError, "message", message, "code", code)
}

// toolResultContent is a tool result as TOOL_CALL_RESULT carries it: a
// string, or parts for text and images.
func toolResultContent(c aap.Content) any {
	if !c.IsBlocks() {
		return c.Text
	}
	parts := make([]map[string]any, 0, len(c.Blocks))
	for _, b := range c.Blocks {
		switch b.Type {
		case aap.BlockText:
			parts = append(parts, map[string]any{"type": "text", "text": b.Text})
		case aap.BlockImage:
			parts = append(parts, map[string]any{"type": "image", "source": imageSource(b.URL)})
		}
	}
	return parts
}

// imageSource reads an AAP image URL as an AG-UI part source: inline data
// for a data: URI, else a URL.
func imageSource(url string) map[string]any {
	if rest, ok := strings.CutPrefix(url, "data:"); ok {
		if meta, data, ok := strings.Cut(rest, ","); ok {
			if mime, ok := strings.CutSuffix(meta, ";base64"); ok {
				return map[string]any{"type": "data", "value": data, "mimeType": mime}
			}
		}
	}
	return map[string]any{"type": "url", "value": url}
}

// compactJSON is a tool call's input as the text of its arguments.
func compactJSON(raw json.RawMessage) string {
	if len(raw) == 0 {
		return "{}"
	}
	return string(raw)
}
