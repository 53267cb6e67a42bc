package agui

import (
	"encoding/json"
	"fmt"

	"github.com/aapd/aapd/aap"
)

// agentOverrides reads forwardedProps.agent: the AAP turn's "agent" member
// ({"tools": [{"name", "trust"}], "options": {name: value}}), which
// enables server tools and sets agent options for the thread's session.
// Other members of forwardedProps are the application's and are ignored.
func agentOverrides(props json.RawMessage) (*aap.AgentOverrides, error) {
	var fp map[string]json.RawMessage
	if len(props) == 0 || json.Unmarshal(props, &fp) != nil {
		return nil, nil // not an object: nothing of aapd's in it
	}
	raw, ok := fp["agent"]
	if !ok || string(raw) == "null" {
		return nil, nil
	}
	var a struct {
		Tools   json.RawMessage `json:"tools"`
		Options json.RawMessage `json:"options"`
	}
	if err := json.Unmarshal(raw, &a); err != nil {
		return nil, &aap.Error{Field: "forwardedProps.agent", Msg: `must be an object {"tools": [...], "options": {...}}`}
	}
	var o aap.AgentOverrides
	if len(a.Tools) > 0 && string(a.Tools) != "null" {
		if err := json.Unmarshal(a.Tools, &o.Tools); err != nil {
			return nil, &aap.Error{Field: "forwardedProps.agent.tools", Msg: `must be an array of {"name": string, "trust": boolean}`}
		}
		if o.Tools == nil {
			o.Tools = []aap.ServerToolRef{}
		}
		for i, t := range o.Tools {
			if t.Name == "" {
				return nil, &aap.Error{Field: fmt.Sprintf("forwardedProps.agent.tools[%d].name", i), Msg: "required"}
			}
		}
	}
	if len(a.Options) > 0 && string(a.Options) != "null" {
		if err := json.Unmarshal(a.Options, &o.Options); err != nil {
			return nil, &aap.Error{Field: "forwardedProps.agent.options", Msg: "must be an object of string values"}
		}
	}
	if o.Tools == nil && o.Options == nil {
		return nil, nil
	}
	return &o, nil
}

// noParameters is the schema of a tool that declares none: AG-UI lets a
// tool leave it out, AAP wants one.
var noParameters = json.RawMessage(`{"type":"object","properties":{}}`)

// clientTools converts the run's frontend tools to AAP client tools.
func clientTools(tools []Tool) ([]aap.ToolSpec, error) {
	out := make([]aap.ToolSpec, len(tools))
	for i, t := range tools {
		params := t.Parameters
		if len(params) == 0 || string(params) == "null" {
			params = noParameters
		}
		var obj map[string]any
		if json.Unmarshal(params, &obj) != nil || obj == nil {
			return nil, &aap.Error{Field: fmt.Sprintf("tools[%d].parameters", i), Msg: "must be a JSON Schema object"}
		}
		out[i] = aap.ToolSpec{Name: t.Name, Description: t.Description, Parameters: params}
	}
	return out, nil
}
