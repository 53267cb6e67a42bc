package agui

import (
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/aapd/aapd/aap"
)

// RunAgentInput is the body of POST /ag-ui/agents/{agent}: @ag-ui/core's
// RunAgentInput. Members the door does not name are ignored, as AG-UI
// clients send members of later protocol versions.
type RunAgentInput struct {
	ThreadID    string `json:"threadId"`
	RunID       string `json:"runId"`
	ParentRunID string `json:"parentRunId,omitempty"`
	// State is the client's agent state. aapd keeps none: it is read, never
	// stored, and the run sends no STATE_* events (docs/protocols.md).
	State          json.RawMessage `json:"state,omitempty"`
	Messages       []Message       `json:"messages"`
	Tools          []Tool          `json:"tools,omitempty"`
	Context        []Context       `json:"context,omitempty"`
	ForwardedProps json.RawMessage `json:"forwardedProps,omitempty"`
	Resume         []ResumeEntry   `json:"resume,omitempty"`
}

// Message is any message of an AG-UI thread; only the members of its Role
// are meaningful.
type Message struct {
	ID   string `json:"id"`
	Role string `json:"role"`
	// Content is a string (developer, system, assistant, reasoning), a
	// string or parts (user, tool), or an object (activity).
	Content    json.RawMessage `json:"content,omitempty"`
	ToolCalls  []ToolCall      `json:"toolCalls,omitempty"`
	ToolCallID string          `json:"toolCallId,omitempty"`
	Error      *string         `json:"error,omitempty"`
}

// AG-UI message roles.
const (
	RoleDeveloper = "developer"
	RoleSystem    = "system"
	RoleAssistant = "assistant"
	RoleUser      = "user"
	RoleTool      = "tool"
	RoleActivity  = "activity"
	RoleReasoning = "reasoning"
)

// ToolCall is a call in an assistant message.
type ToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function FunctionCall `json:"function"`
}

// FunctionCall names the tool and carries its arguments as JSON text.
type FunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Tool is a frontend tool: it becomes an AAP client tool.
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}

// Context is ambient information for the run: aapd shows it to the model
// with the run's user message (userContext).
type Context struct {
	Description string `json:"description"`
	Value       string `json:"value"`
}

// ResumeEntry answers an interrupt of the previous run: for aapd, a
// permission for a server tool call (interrupt.go).
type ResumeEntry struct {
	InterruptID string          `json:"interruptId"`
	Status      string          `json:"status"`
	Payload     json.RawMessage `json:"payload,omitempty"`
}

// part is one part of a multimodal content array.
type part struct {
	Type   string `json:"type"`
	Text   string `json:"text"`
	Source *struct {
		Type     string `json:"type"`
		Value    string `json:"value"`
		MimeType string `json:"mimeType"`
	} `json:"source"`
}

// maxThreadID bounds a thread id (and a run id): it is stored, and is a
// client's name, not a document.
const maxThreadID = 256

// decodeInput reads and checks a RunAgentInput: the members aapd relies on
// are present and well formed. What the turn pipeline checks (tool names,
// content the agent accepts, option values) is left to it.
func decodeInput(body []byte) (RunAgentInput, error) {
	var in RunAgentInput
	if err := json.Unmarshal(body, &in); err != nil {
		return in, &aap.Error{Msg: "the body is not a RunAgentInput: " + describeJSON(err)}
	}
	if !utf8.Valid(body) {
		if field := idNotUTF8(body); field != "" {
			return in, &aap.Error{Field: field, Msg: "must be UTF-8 text: it names the run's events, and a byte that is not UTF-8 would be sent back as U+FFFD, naming another thread or run"}
		}
	}
	switch {
	case in.ThreadID == "":
		return in, &aap.Error{Field: "threadId", Msg: "required: the thread (conversation) to run"}
	case len(in.ThreadID) > maxThreadID || !printable(in.ThreadID):
		return in, &aap.Error{Field: "threadId", Msg: fmt.Sprintf("must be 1 to %d bytes of printable text", maxThreadID)}
	case in.RunID == "":
		return in, &aap.Error{Field: "runId", Msg: "required"}
	case len(in.RunID) > maxThreadID || !printable(in.RunID):
		return in, &aap.Error{Field: "runId", Msg: fmt.Sprintf("must be 1 to %d bytes of printable text", maxThreadID)}
	case len(in.ParentRunID) > maxThreadID || !printable(in.ParentRunID):
		return in, &aap.Error{Field: "parentRunId", Msg: fmt.Sprintf("must be at most %d bytes of printable text", maxThreadID)}
	}
	seen := map[string]bool{}
	for i, m := range in.Messages {
		field := fmt.Sprintf("messages[%d]", i)
		if m.ID == "" {
			return in, &aap.Error{Field: field + ".id", Msg: "required: aapd tells the messages it has stored by their ids"}
		}
		if seen[m.ID] {
			return in, &aap.Error{Field: field + ".id", Msg: fmt.Sprintf("message id %q is used twice", m.ID)}
		}
		seen[m.ID] = true
		switch m.Role {
		case RoleDeveloper, RoleSystem, RoleAssistant, RoleUser, RoleTool, RoleActivity, RoleReasoning:
		default:
			return in, &aap.Error{Field: field + ".role", Msg: fmt.Sprintf("unknown role %q", m.Role)}
		}
	}
	for i, e := range in.Resume {
		if e.InterruptID == "" {
			return in, &aap.Error{Field: fmt.Sprintf("resume[%d].interruptId", i), Msg: "required"}
		}
		if e.Status != "resolved" && e.Status != "cancelled" {
			return in, &aap.Error{Field: fmt.Sprintf("resume[%d].status", i), Msg: `must be "resolved" or "cancelled"`}
		}
	}
	return in, nil
}

func describeJSON(err error) string {
	switch e := err.(type) {
	case *json.SyntaxError:
		return fmt.Sprintf("malformed JSON at byte %d: %v", e.Offset, e)
	case *json.UnmarshalTypeError:
		if e.Field == "" {
			return "it must be a JSON object, not " + e.Value
		}
		return fmt.Sprintf("%s must not be %s", e.Field, e.Value)
	}
	return err.Error()
}

// idNotUTF8 names the first id member (threadId, runId, parentRunId)
// whose text, as sent, is not UTF-8; "" when each is. json.Unmarshal reads
// such a byte as U+FFFD, which the checks after it cannot tell from a
// U+FFFD the client meant.
func idNotUTF8(body []byte) string {
	var raw struct {
		ThreadID    json.RawMessage `json:"threadId"`
		RunID       json.RawMessage `json:"runId"`
		ParentRunID json.RawMessage `json:"parentRunId"`
	}
	if json.Unmarshal(body, &raw) != nil {
		return ""
	}
	for _, id := range []struct {
		name string
		raw  json.RawMessage
	}{{"threadId", raw.ThreadID}, {"runId", raw.RunID}, {"parentRunId", raw.ParentRunID}} {
		if !utf8.Valid(id.raw) {
			return id.name
		}
	}
	return ""
}

func printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return false
		}
	}
	return true
}
