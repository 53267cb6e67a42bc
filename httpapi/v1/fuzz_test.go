package v1

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/aapd/aapd/aap"
)

// FuzzV1Request feeds AAP v1 request bodies through the door's rewriting
// into AAP v3's form and the decoding after it. The property: no panic; a
// refusal is an *aap.Error (a 400); a rewritten body is JSON that keeps
// every tool's schema, now named parameters.
func FuzzV1Request(f *testing.F) {
	for _, s := range []string{
		`{"agent":{"name":"echo"},"messages":[{"role":"user","content":"hi"}]}`,
		`{"agent":{"name":"echo"},"stream":"delta","tools":[{"name":"f","description":"d","inputSchema":{"type":"object"}}],"messages":[{"role":"user","content":"hi"}]}`,
		`{"messages":[{"role":"user","content":"hi"}],"tools":[{"name":"f","parameters":{}}]}`,
		`{"tools":[{"name":"f","inputSchema":"object"}]}`,
		`{"tools":[1,{"inputSchema":{}}]}`,
		`{"tools":null}`,
		`[]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		v3, err := toV3Body(body)
		if err != nil {
			var e *aap.Error
			if !errors.As(err, &e) {
				t.Fatalf("refused with %T (%v), which would be a 500", err, err)
			}
			return
		}
		var before, after struct {
			Tools []map[string]json.RawMessage `json:"tools"`
		}
		if json.Unmarshal(body, &before) == nil && json.Unmarshal(v3, &after) == nil {
			if len(before.Tools) != len(after.Tools) {
				t.Fatalf("the rewrite changed the number of tools: %s -> %s", body, v3)
			}
			for i, tool := range before.Tools {
				if s, ok := tool["inputSchema"]; ok && string(after.Tools[i]["parameters"]) != string(compactJSON(t, s)) {
					t.Fatalf("tools[%d]: inputSchema %s became parameters %s", i, s, after.Tools[i]["parameters"])
				}
			}
		}
		// What AAP v3's decoding makes of the rewritten body: no panic.
		var create createRequest
		_ = json.Unmarshal(v3, &create)
		var turn aap.TurnRequest
		_ = json.Unmarshal(v3, &turn)
	})
}

func compactJSON(t *testing.T, raw json.RawMessage) json.RawMessage {
	t.Helper()
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return raw
	}
	out, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
