package sandboxagent

import (
	"encoding/json"
	"strings"

	"github.com/aapd/aapd/aap"
)

// The sandbox-agent API's shapes (openapi.json's components), as this door
// writes and reads them. Members the document marks nullable are omitted
// when empty, as the reference server omits them.

// Event types (UniversalEventType).
const (
	evSessionStarted      = "session.started"
	evSessionEnded        = "session.ended"
	evItemStarted         = "item.started"
	evItemDelta           = "item.delta"
	evItemCompleted       = "item.completed"
	evError               = "error"
	evPermissionRequested = "permission.requested"
	evPermissionResolved  = "permission.resolved"
	evQuestionRequested   = "question.requested"
	evQuestionResolved    = "question.resolved"
)

// Event sources (EventSource).
const (
	sourceAgent  = "agent"
	sourceDaemon = "daemon"
)

// UniversalEvent is one event of a session's log in the sandbox-agent
// shape.
type UniversalEvent struct {
	EventID         string          `json:"event_id"`
	Sequence        int64           `json:"sequence"`
	Time            string          `json:"time"`
	SessionID       string          `json:"session_id"`
	NativeSessionID string          `json:"native_session_id,omitempty"`
	Synthetic       bool            `json:"synthetic"`
	Source          string          `json:"source"`
	Type            string          `json:"type"`
	Data            any             `json:"data"`
	Raw             json.RawMessage `json:"raw,omitempty"`
}

// Item is a UniversalItem.
type Item struct {
	ItemID       string `json:"item_id"`
	NativeItemID string `json:"native_item_id,omitempty"`
	ParentID     string `json:"parent_id,omitempty"`
	Kind         string `json:"kind"`
	Role         string `json:"role,omitempty"`
	Content      []Part `json:"content"`
	Status       string `json:"status"`
}

// Part is a ContentPart: its Type says which members it has.
type Part struct {
	Type       string `json:"type"`
	Text       string `json:"text,omitempty"`
	Visibility string `json:"visibility,omitempty"`
	Name       string `json:"name,omitempty"`
	Arguments  string `json:"arguments,omitempty"`
	CallID     string `json:"call_id,omitempty"`
	Output     string `json:"output,omitempty"`
	Path       string `json:"path,omitempty"`
	Mime       string `json:"mime,omitempty"`
	Label      string `json:"label,omitempty"`
	Detail     string `json:"detail,omitempty"`
}

// MarshalJSON writes the members the part's type requires even when they
// are empty (a text part's text, a tool result's output), and no other.
func (p Part) MarshalJSON() ([]byte, error) {
	m := map[string]any{"type": p.Type}
	switch p.Type {
	case "text":
		m["text"] = p.Text
	case "reasoning":
		m["text"], m["visibility"] = p.Text, p.Visibility
	case "tool_call":
		m["name"], m["arguments"], m["call_id"] = p.Name, p.Arguments, p.CallID
	case "tool_result":
		m["call_id"], m["output"] = p.CallID, p.Output
	case "image":
		m["path"] = p.Path
		if p.Mime != "" {
			m["mime"] = p.Mime
		}
	case "status":
		m["label"] = p.Label
		if p.Detail != "" {
			m["detail"] = p.Detail
		}
	}
	return json.Marshal(m)
}

// Item kinds, roles and statuses.
const (
	kindMessage    = "message"
	kindToolCall   = "tool_call"
	kindToolResult = "tool_result"
	kindSystem     = "system"
	kindStatus     = "status"

	statusInProgress = "in_progress"
	statusCompleted  = "completed"
	statusFailed     = "failed"
)

// itemData is the data of item.started and item.completed.
type itemData struct {
	Item Item `json:"item"`
}

// deltaData is the data of item.delta.
type deltaData struct {
	ItemID       string `json:"item_id"`
	NativeItemID string `json:"native_item_id,omitempty"`
	Delta        string `json:"delta"`
}

// errorData is the data of error.
type errorData struct {
	Message string `json:"message"`
	Code    string `json:"code,omitempty"`
}

// permissionData is the data of permission.requested and .resolved.
type permissionData struct {
	PermissionID string `json:"permission_id"`
	Action       string `json:"action"`
	Status       string `json:"status"`
	Metadata     any    `json:"metadata,omitempty"`
}

// Permission statuses (PermissionStatus).
const (
	permRequested        = "requested"
	permAccept           = "accept"
	permAcceptForSession = "accept_for_session"
	permReject           = "reject"
)

// questionData is the data of question.requested and .resolved.
type questionData struct {
	QuestionID string   `json:"question_id"`
	Prompt     string   `json:"prompt"`
	Options    []string `json:"options"`
	Status     string   `json:"status"`
	Response   string   `json:"response,omitempty"`
}

// Question statuses (QuestionStatus).
const (
	questionRequested = "requested"
	questionAnswered  = "answered"
	questionRejected  = "rejected"
)

// sessionStartedData is the data of session.started.
type sessionStartedData struct {
	Metadata any `json:"metadata,omitempty"`
}

// sessionEndedData is the data of session.ended.
type sessionEndedData struct {
	Reason       string `json:"reason"`
	TerminatedBy string `json:"terminated_by"`
}

// parts renders AAP content as content parts: text, thinking as public
// reasoning, tool calls, images (by URL: a path is what the shape has).
func parts(c aap.Content) []Part {
	if !c.IsBlocks() {
		return []Part{{Type: "text", Text: c.Text}}
	}
	out := []Part{}
	for _, b := range c.Blocks {
		switch b.Type {
		case aap.BlockText:
			out = append(out, Part{Type: "text", Text: b.Text})
		case aap.BlockThinking:
			out = append(out, Part{Type: "reasoning", Text: b.Thinking, Visibility: "public"})
		case aap.BlockToolUse:
			out = append(out, toolCallPart(b.ToolCall()))
		case aap.BlockImage:
			out = append(out, Part{Type: "image", Path: b.URL, Mime: imageMime(b.URL)})
		}
	}
	return out
}

// toolCallPart is a tool call's part: its input as JSON text.
func toolCallPart(c aap.ToolCall) Part {
	args := string(c.Input)
	if args == "" || args == "null" {
		args = "{}"
	}
	return Part{Type: "tool_call", Name: c.Name, Arguments: args, CallID: c.ToolCallID}
}

// imageMime is the media type of a data: URI ("" for a URL).
func imageMime(url string) string {
	rest, ok := strings.CutPrefix(url, "data:")
	if !ok {
		return ""
	}
	mime, _, _ := strings.Cut(rest, ";")
	return mime
}
