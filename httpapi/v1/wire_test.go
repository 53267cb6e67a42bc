package v1

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/aapd/aapd/aap"
)

// Seed 000 (ToolSpec): a v1 tool declares its input's JSON Schema as
// inputSchema; the door hands AAP v3's rules the same tool with it as
// parameters, and refuses a tool without one, naming the member.
func TestV1ToolSpecInputSchemaBecomesParameters(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, body string
		want       string // the tools member after rewriting; "" for the body unchanged
		field      string // the field of the error, if one is expected
	}{
		{"renamed", `{"tools":[{"name":"a","description":"d","inputSchema":{"type":"object"}}]}`,
			`[{"description":"d","name":"a","parameters":{"type":"object"}}]`, ""},
		{"v3 name refused", `{"tools":[{"name":"a","parameters":{}}]}`, "", "tools[0].inputSchema"},
		{"missing", `{"tools":[{"name":"a"},{"name":"b"}]}`, "", "tools[0].inputSchema"},
		{"not an object", `{"tools":[{"name":"a","inputSchema":{}},{"name":"b","inputSchema":[1]}]}`, "", "tools[1].inputSchema"},
		{"no tools", `{"messages":[]}`, "", ""},
		{"null tools", `{"tools":null}`, "", ""},
		{"tools not an array", `{"tools":{}}`, "", ""},
		{"not an object body", `[1]`, "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, err := toV3Body([]byte(tc.body))
			var aerr *aap.Error
			if tc.field != "" {
				if !errors.As(err, &aerr) || aerr.Field != tc.field {
					t.Fatalf("err = %v, want an *aap.Error on %s", err, tc.field)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == "" {
				if string(out) != tc.body {
					t.Fatalf("body = %s, want it unchanged", out)
				}
				return
			}
			var top map[string]json.RawMessage
			if err := json.Unmarshal(out, &top); err != nil {
				t.Fatal(err)
			}
			if string(top["tools"]) != tc.want {
				t.Fatalf("tools = %s, want %s", top["tools"], tc.want)
			}
			var req aap.CreateSessionRequest
			if err := json.Unmarshal(append([]byte(`{"agent":{"name":"x"},`), out[1:]...), &req); err != nil {
				t.Fatalf("AAP v3 refuses the rewritten body: %v", err)
			}
		})
	}
}

// Seed 000 (ToolSpec) and 004 (GET /meta, GET /session/:id): tools are
// written with inputSchema, never parameters.
func TestV1ToolsAreWrittenWithInputSchema(t *testing.T) {
	t.Parallel()
	b, err := json.Marshal(toolsOut([]aap.ToolSpec{{Name: "a", Description: "d", Parameters: json.RawMessage(`{"type":"object"}`)}}))
	if err != nil {
		t.Fatal(err)
	}
	if want := `[{"name":"a","description":"d","inputSchema":{"type":"object"}}]`; string(b) != want {
		t.Fatalf("tools = %s, want %s", b, want)
	}
	if toolsOut(nil) != nil {
		t.Error("no tools must stay absent")
	}
}
