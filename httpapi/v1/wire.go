package v1

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/aapd/aapd/aap"
)

// The v1 shapes that differ from AAP v3's (seeds 000 and 004); every other
// shape — messages, content blocks, agent configs, options, capabilities,
// stop reasons, turn events — is the same in both, and is AAP v3's type.

// ToolSpec is a tool as AAP v1 writes it: AAP v3's, with its JSON Schema
// named inputSchema instead of parameters.
type ToolSpec struct {
	Name        string          `json:"name"`
	Title       string          `json:"title,omitempty"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"inputSchema"`
}

// AgentInfo is an agent in GET /v1/meta.
type AgentInfo struct {
	Name         string            `json:"name"`
	Title        string            `json:"title,omitempty"`
	Version      string            `json:"version"`
	Description  string            `json:"description,omitempty"`
	Tools        []ToolSpec        `json:"tools,omitempty"`
	Options      []aap.AgentOption `json:"options,omitempty"`
	Capabilities *aap.Capabilities `json:"capabilities,omitempty"`
}

// Meta is the body of GET /v1/meta.
type Meta struct {
	Version int         `json:"version"`
	Agents  []AgentInfo `json:"agents"`
}

// Session is the body of GET /v1/session/:id, written without its history
// (sessions.go streams that after it).
type Session struct {
	SessionID string          `json:"sessionId"`
	Agent     aap.AgentConfig `json:"agent"`
	Tools     []ToolSpec      `json:"tools,omitempty"`
}

// SessionList is the body of GET /v1/sessions. The two v1 seeds name the
// cursor differently (000: next, 004: nextCursor): both carry it, so that
// clients written against either page on.
type SessionList struct {
	Sessions   []string `json:"sessions"`
	Next       string   `json:"next,omitempty"`
	NextCursor string   `json:"nextCursor,omitempty"`
}

// AgentResponse is the body of a turn with stream "none"; SessionID is set
// for PUT /v1/session only.
type AgentResponse struct {
	SessionID  string         `json:"sessionId,omitempty"`
	StopReason aap.StopReason `json:"stopReason"`
	Messages   []aap.Message  `json:"messages"`
}

// SessionStart is the data of session_start, the first event of a PUT
// /v1/session stream: it tells the client its session's id.
type SessionStart struct {
	SessionID string `json:"sessionId"`
}

// EventSessionStart names the session_start event.
const EventSessionStart = "session_start"

func toolsOut(tools []aap.ToolSpec) []ToolSpec {
	if tools == nil {
		return nil
	}
	out := make([]ToolSpec, len(tools))
	for i, t := range tools {
		out[i] = ToolSpec{Name: t.Name, Title: t.Title, Description: t.Description, InputSchema: t.Parameters}
	}
	return out
}

func agentOut(a aap.AgentInfo) AgentInfo {
	return AgentInfo{Name: a.Name, Title: a.Title, Version: a.Version, Description: a.Description,
		Tools: toolsOut(a.Tools), Options: a.Options, Capabilities: a.Capabilities}
}

// toV3Body rewrites a v1 request body into AAP v3's form, so that AAP v3's
// decoding and rules apply to it unchanged: each client tool's inputSchema
// becomes parameters. A tool that names its schema parameters is refused:
// that is v3's name, and a v1 client sending it has a bug worth telling.
// A body that is no JSON object is left as it is, for the decoder to name.
func toV3Body(body []byte) ([]byte, error) {
	var top map[string]json.RawMessage
	if json.Unmarshal(body, &top) != nil {
		return body, nil
	}
	raw, ok := top["tools"]
	if !ok || isNull(raw) {
		return body, nil
	}
	var tools []json.RawMessage
	if json.Unmarshal(raw, &tools) != nil {
		return body, nil // not an array: the decoder says so
	}
	for i, t := range tools {
		var tool map[string]json.RawMessage
		if json.Unmarshal(t, &tool) != nil {
			continue // not an object: the decoder says so
		}
		field := fmt.Sprintf("tools[%d].inputSchema", i)
		schema, has := tool["inputSchema"]
		switch _, v3 := tool["parameters"]; {
		case v3 && !has:
			return nil, &aap.Error{Field: field, Msg: "required: AAP v1 names a tool's JSON Schema inputSchema (parameters is AAP v3's name, served at the base URL)"}
		case !has:
			return nil, &aap.Error{Field: field, Msg: "required: the JSON Schema of the tool's input"}
		case !bytes.HasPrefix(bytes.TrimSpace(schema), []byte("{")):
			return nil, &aap.Error{Field: field, Msg: "must be a JSON Schema object"}
		}
		delete(tool, "inputSchema")
		tool["parameters"] = schema
		if tools[i], ok = marshal(tool); !ok {
			return body, nil
		}
	}
	if top["tools"], ok = marshal(tools); !ok {
		return body, nil
	}
	out, ok := marshal(top)
	if !ok {
		return body, nil
	}
	return out, nil
}

func marshal(v any) (json.RawMessage, bool) {
	b, err := json.Marshal(v)
	return b, err == nil
}

func isNull(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }
