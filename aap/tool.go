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

// UnmarshalJSON reads a tool spec; "name" and an object "parameters" are
// required. A missing description reads as empty.
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
	if !isJSONObject(raw.Parameters) {
		return errors.New(`"parameters" must be a JSON Schema object`)
	}
	*t = ToolSpec{Name: *raw.Name, Parameters: compact(raw.Parameters)}
	if raw.Title != nil {
		t.Title = *raw.Title
	}
	if raw.Description != nil {
		t.Description = *raw.Description
	}
	return nil
}

// ServerToolRef enables a server-side tool for a session.
type ServerToolRef struct {
	Name string `json:"name"`
	// Trust lets the server run the tool without asking the client.
	Trust bool `json:"trust"`
}

// toolNamePattern is what the major model providers accept as a function name.
var toolNamePattern = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// ValidToolName reports whether a tool name is one every supported model
// provider accepts: 1 to 64 letters, digits, '_' or '-'.
func ValidToolName(name string) bool { return toolNamePattern.MatchString(name) }
