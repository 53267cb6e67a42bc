package openapitest

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"github.com/aapd/aapd/httpapi/sandboxagent"
)

// The sandbox-agent door's traffic is held to its own document, the seed's
// (httpapi/sandboxagent/openapi.json), as the tests adapt it:
//
//   - it is read as OpenAPI 3.1, which the validator's schema checks
//     speak: each nullable member of 3.0 becomes a type that admits null;
//   - its server is the door's prefix, so its /v1/... paths match the
//     door's routes;
//   - every object schema but ProblemDetails (whose extensions are free)
//     is closed (additionalProperties: false), as aapd's own response
//     schemas are, so that a member the document does not name fails, and
//     so that the oneOf of UniversalEventData — whose first branch,
//     SessionStartedData, requires nothing and so matches any object —
//     has one branch per event's data;
//   - every operation answers any other status with a ProblemDetails
//     (default): the refusals the edge makes on every route (401, 403, 409
//     for a busy or ended session, 413, 429, 503) are the seed's shape,
//     and the seed lists only some of them.
//
// Each event's data is also checked against the schema its type names
// (CheckUniversalEvent): the document's union alone would take an
// item.delta carrying an item.

var loadSandboxAgent = sync.OnceValues(func() (*Document, error) {
	var doc map[string]any
	if err := json.Unmarshal(sandboxagent.OpenAPIJSON(), &doc); err != nil {
		return nil, fmt.Errorf("sandbox-agent openapi: %w", err)
	}
	doc["openapi"] = "3.1.0"
	doc["servers"] = []any{map[string]any{"url": sandboxagent.Prefix}}
	nullableToTypes(doc)
	schemas := doc["components"].(map[string]any)["schemas"].(map[string]any)
	for name, s := range schemas {
		if name != "ProblemDetails" {
			closeObjects(s)
		}
	}
	problem := map[string]any{"description": "a refusal of aapd's edge", "content": map[string]any{
		"application/json": map[string]any{"schema": map[string]any{"$ref": "#/components/schemas/ProblemDetails"}}}}
	for _, item := range doc["paths"].(map[string]any) {
		for _, op := range item.(map[string]any) {
			op.(map[string]any)["responses"].(map[string]any)["default"] = problem
		}
	}
	src, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	return Parse(src)
})

// SandboxAgent returns the sandbox-agent door's document, adapted for the
// tests as above, parsed once per process.
func SandboxAgent() (*Document, error) { return loadSandboxAgent() }

// nullableToTypes rewrites OpenAPI 3.0's nullable into 3.1's types: a
// typed schema takes "null" among its types, a reference (allOf) becomes
// one of it or null, and an untyped one admits null already.
func nullableToTypes(v any) {
	switch s := v.(type) {
	case map[string]any:
		for _, c := range s {
			nullableToTypes(c)
		}
		if n, _ := s["nullable"].(bool); !n {
			return
		}
		delete(s, "nullable")
		switch {
		case s["type"] != nil:
			s["type"] = []any{s["type"], "null"}
			if enum, ok := s["enum"].([]any); ok {
				s["enum"] = append(enum, nil)
			}
		case s["allOf"] != nil:
			s["anyOf"] = []any{map[string]any{"allOf": s["allOf"]}, map[string]any{"type": "null"}}
			delete(s, "allOf")
		}
	case []any:
		for _, c := range s {
			nullableToTypes(c)
		}
	}
}

// closeObjects sets additionalProperties: false on every object schema
// with properties, through allOf, oneOf and items.
func closeObjects(v any) {
	switch s := v.(type) {
	case map[string]any:
		if _, ok := s["properties"]; ok {
			if _, set := s["additionalProperties"]; !set {
				s["additionalProperties"] = false
			}
		}
		for _, k := range []string{"properties", "items", "allOf", "oneOf", "anyOf"} {
			switch c := s[k].(type) {
			case map[string]any:
				if k == "properties" {
					for _, p := range c {
						closeObjects(p)
					}
				} else {
					closeObjects(c)
				}
			case []any:
				for _, x := range c {
					closeObjects(x)
				}
			}
		}
	}
}

// universalData names the schema of each event type's data.
var universalData = map[string]string{
	"session.started":      "SessionStartedData",
	"session.ended":        "SessionEndedData",
	"item.started":         "ItemEventData",
	"item.completed":       "ItemEventData",
	"item.delta":           "ItemDeltaData",
	"error":                "ErrorData",
	"permission.requested": "PermissionEventData",
	"permission.resolved":  "PermissionEventData",
	"question.requested":   "QuestionEventData",
	"question.resolved":    "QuestionEventData",
	"agent.unparsed":       "AgentUnparsedData",
}

// CheckUniversalEvent validates one UniversalEvent (an SSE event's data):
// against the UniversalEvent schema, and its data against the schema its
// type names.
func (d *Document) CheckUniversalEvent(data []byte) []string {
	out := d.CheckSchema("UniversalEvent", data)
	var e struct {
		Type string          `json:"type"`
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(data, &e); err != nil {
		return append(out, err.Error())
	}
	name, ok := universalData[e.Type]
	if !ok {
		return append(out, fmt.Sprintf("event type %q has no data schema", e.Type))
	}
	for _, msg := range d.CheckSchema(name, e.Data) {
		out = append(out, fmt.Sprintf("%s data: %s", e.Type, msg))
	}
	return out
}

// IsSandboxAgent reports whether a request's path is one of the
// sandbox-agent door's routes, which its own document describes.
func IsSandboxAgent(path string) bool {
	return strings.HasPrefix(path, sandboxagent.Prefix+"/v1/")
}
