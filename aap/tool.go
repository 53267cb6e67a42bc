package aap

import (
	"encoding/json"
	"errors"
	"regexp"
)

// ToolCall is a tool invocation requested by the model.
type ToolCall struct {
	ToolCallID string          `json:"toolCallId"`
	Name       string          `json:"name"`
	Input      json.RawMessage `json:"input"`
}

// ToolResult is the outcome of a tool call.
type ToolResult struct {
	ToolCallID string  `json:"toolCallId"`
	Content    Content `json:"content"`
}

// ToolSpec declares a tool: a client-side tool in a request, or a server-side
// tool in GET /meta.
type ToolSpec struct {
	Name        string          `json:"name"`
	Title       string          `json:"title,omitempty"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

// UnmarshalJSON reads a tool spec; "name", a string "description" (which
// the specification requires, and a model needs to know what the tool is
// for; it may be empty) and an object "parameters" are required.
func (t *ToolSpec) UnmarshalJSON(data []byte) error {
	var raw struct {
		Name        *string         `json:"name"`
		Title       *string         `json:"title"`
		Description *string         `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	}
	if err := strictObject(data, &raw); err != nil {
		return err
	}
	if raw.Name == nil {
		return errors.New(`"name" is required`)
	}
	if raw.Description == nil {
		return errors.New(`"description" is required: say what the tool does (the model reads it)`)
	}
	if !isJSONObject(raw.Parameters) {
		return errors.New(`"parameters" must be a JSON Schema object`)
	}
	*t = ToolSpec{Name: *raw.Name, Parameters: compact(raw.Parameters)}
	if raw.Title != nil {
		t.Title = *raw.Title
	}
	t.Description = *raw.Description
	return nil
}

// ServerToolRef enables a server-side tool for a session.
type ServerToolRef struct {
	Name string `json:"name"`
	// Trust lets the server run the tool without asking the client.
	Trust bool `json:"trust"`
}

// toolNamePattern is the form of a tool name: the specification sets no
// rule, so aapd takes MCP's (1 to 128 ASCII letters, digits, '_', '-' and
// '.'), which every tool an MCP server declares follows. Names a model
// provider refuses (a '.', more than 64 characters) are mapped to ones it
// accepts on the way to the model and back (agents/toolnames.go).
var toolNamePattern = regexp.MustCompile(`^[a-zA-Z0-9_.-]{1,128}$`)

// ToolNameRule describes the form of a tool name, for error messages.
const ToolNameRule = "1 to 128 letters, digits, '_', '-' or '.'"

// ValidToolName reports whether a tool name has the form of
// toolNamePattern.
func ValidToolName(name string) bool { return toolNamePattern.MatchString(name) }
