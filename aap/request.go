package aap

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// StreamMode selects how a turn's response is delivered.
type StreamMode string

// Stream modes. The empty mode means StreamNone.
const (
	StreamNone    StreamMode = "none"
	StreamDelta   StreamMode = "delta"
	StreamMessage StreamMode = "message"
)

// HistoryType selects a history in GET /sessions/:id/history.
type HistoryType string

// History types.
const (
	HistoryCompacted HistoryType = "compacted"
	HistoryFull      HistoryType = "full"
)

// CreateSessionRequest is the body of POST /sessions.
type CreateSessionRequest struct {
	Agent    AgentConfig `json:"agent"`
	Messages []Message   `json:"messages,omitempty"`
	Tools    []ToolSpec  `json:"tools,omitempty"`
	// unknown is the members of the decoded body a create-session request
	// does not have: ignored, but named if the request is refused.
	unknown unknownMembers
}

// UnmarshalJSON decodes the body so that errors name the offending element.
func (r *CreateSessionRequest) UnmarshalJSON(data []byte) error {
	var raw struct {
		Agent    json.RawMessage `json:"agent"`
		Messages json.RawMessage `json:"messages"`
		Tools    json.RawMessage `json:"tools"`
	}
	unknown, err := decodeMembers(data, &raw)
	if err != nil {
		return err
	}
	*r = CreateSessionRequest{unknown: unknown}
	if len(raw.Agent) == 0 || string(raw.Agent) == "null" {
		return unknown.explain(errors.New(`"agent" is required`), "a create-session request", &CreateSessionRequest{})
	}
	if err := decodeAgent(raw.Agent, &r.Agent); err != nil {
		return err
	}
	if err := decodeList("messages", raw.Messages, &r.Messages); err != nil {
		return err
	}
	return decodeList("tools", raw.Tools, &r.Tools)
}

// TurnRequest is the body of POST /sessions/:id/turns.
type TurnRequest struct {
	Agent    *AgentOverrides `json:"agent,omitempty"`
	Stream   StreamMode      `json:"stream,omitempty"`
	Messages []Message       `json:"messages"`
	// Tools replaces the session's client tools when non-nil.
	Tools []ToolSpec `json:"tools,omitempty"`
	// unknown is the members of the decoded body a turn request does not
	// have: ignored, but named if the request is refused (members.go).
	unknown unknownMembers
}

// UnmarshalJSON decodes the body so that errors name the offending element.
func (r *TurnRequest) UnmarshalJSON(data []byte) (err error) {
	var raw struct {
		Agent    json.RawMessage `json:"agent"`
		Stream   json.RawMessage `json:"stream"`
		Messages json.RawMessage `json:"messages"`
		Tools    json.RawMessage `json:"tools"`
	}
	unknown, err := decodeMembers(data, &raw)
	if err != nil {
		return err
	}
	*r = TurnRequest{unknown: unknown}
	if len(raw.Agent) > 0 && string(raw.Agent) != "null" {
		var a struct {
			Name    json.RawMessage `json:"name"`
			Tools   json.RawMessage `json:"tools"`
			Options json.RawMessage `json:"options"`
		}
		if err := strictObject(raw.Agent, &a); err != nil {
			return fmt.Errorf("agent: %w", err)
		}
		r.Agent = new(AgentOverrides)
		if len(a.Name) > 0 && string(a.Name) != "null" {
			r.Agent.Name = new(string)
			if err := decodeField("agent.name", a.Name, r.Agent.Name); err != nil {
				return err
			}
		}
		if err := decodeList("agent.tools", a.Tools, &r.Agent.Tools); err != nil {
			return err
		}
		if r.Agent.Options, err = decodeOptions("agent.options", a.Options); err != nil {
			return err
		}
	}
	if len(raw.Stream) > 0 && string(raw.Stream) != "null" {
		if err := decodeField("stream", raw.Stream, &r.Stream); err != nil {
			return err
		}
	}
	if err := decodeList("messages", raw.Messages, &r.Messages); err != nil {
		return err
	}
	return decodeList("tools", raw.Tools, &r.Tools)
}

// Mode returns the requested stream mode, defaulting to StreamNone.
func (r TurnRequest) Mode() StreamMode {
	if r.Stream == "" {
		return StreamNone
	}
	return r.Stream
}

func decodeAgent(data json.RawMessage, a *AgentConfig) error {
	var raw struct {
		Name    json.RawMessage `json:"name"`
		Tools   json.RawMessage `json:"tools"`
		Options json.RawMessage `json:"options"`
	}
	if err := strictObject(data, &raw); err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	if err := decodeField("agent.name", raw.Name, &a.Name); err != nil {
		return err
	}
	if err := decodeList("agent.tools", raw.Tools, &a.Tools); err != nil {
		return err
	}
	var err error
	a.Options, err = decodeOptions("agent.options", raw.Options)
	return err
}

// decodeOptions decodes an options object, naming the key of a value that
// is not a string.
func decodeOptions(field string, data json.RawMessage) (map[string]string, error) {
	if len(data) == 0 || string(data) == "null" {
		return nil, nil
	}
	var raws map[string]json.RawMessage
	if err := decodeField(field, data, &raws); err != nil {
		return nil, err
	}
	opts := make(map[string]string, len(raws))
	for k, v := range raws {
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return nil, fmt.Errorf("%s.%s: must be of type string, not %s", field, k, kindOf(v))
		}
		opts[k] = s
	}
	return opts, nil
}

// decodeField decodes one field, naming it in the error.
func decodeField(field string, data json.RawMessage, v any) error {
	if len(data) == 0 || string(data) == "null" {
		return nil
	}
	if err := json.Unmarshal(data, v); err != nil {
		if te, ok := err.(*json.UnmarshalTypeError); ok {
			sub := field
			if te.Field != "" {
				sub += "." + te.Field
			}
			return fmt.Errorf("%s: must be of type %s, not %s", sub, jsonTypeName(te.Type.Kind().String()), te.Value)
		}
		return fmt.Errorf("%s: %w", field, err)
	}
	return nil
}

func jsonTypeName(kind string) string {
	switch kind {
	case "map", "struct":
		return "object"
	case "slice":
		return "array"
	case "bool":
		return "boolean"
	case "int", "int64", "float64":
		return "number"
	}
	return kind
}

// kindOf names the JSON type of a value, for errors.
func kindOf(v json.RawMessage) string {
	switch t := bytes.TrimSpace(v); {
	case len(t) == 0:
		return "nothing"
	case t[0] == '{':
		return "object"
	case t[0] == '[':
		return "array"
	case t[0] == '"':
		return "string"
	case t[0] == 't' || t[0] == 'f':
		return "boolean"
	case t[0] == 'n':
		return "null"
	}
	return "number"
}
