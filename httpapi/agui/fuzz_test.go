package agui

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/aapd/aapd/aap"
)

// FuzzRunAgentInput feeds bodies to the decoding of AG-UI's RunAgentInput.
// The property: no panic; a refusal is an *aap.Error (a 400); an accepted
// input round-trips through its JSON encoding unchanged.
func FuzzRunAgentInput(f *testing.F) {
	for _, s := range []string{
		`{"threadId":"t1","runId":"r1","messages":[{"id":"m1","role":"user","content":"hi"}],"tools":[],"context":[],"state":{},"forwardedProps":{}}`,
		`{"threadId":"t1","runId":"r2","messages":[{"id":"m1","role":"user","content":"hi"},{"id":"m2","role":"assistant","content":"","toolCalls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},{"id":"m3","role":"tool","toolCallId":"c1","content":"ok"}],"tools":[{"name":"f","description":"d","parameters":{"type":"object"}}]}`,
		`{"threadId":"t1","runId":"r3","resume":[{"interruptId":"i1","status":"resolved","payload":{"approved":true}}]}`,
		`{"threadId":"","runId":"r"}`,
		`{"threadId":"t","runId":"r","messages":[{"id":"a","role":"bot"}]}`,
		`{"threadId":"t","runId":"r","messages":[{"id":"a","role":"user","content":[{"type":"text","text":"x"},{"type":"binary","mimeType":"image/png","data":"AA=="}]}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		in, err := decodeInput(body)
		if err != nil {
			var e *aap.Error
			if !errors.As(err, &e) {
				t.Fatalf("refused with %T (%v), which would be a 500", err, err)
			}
			return
		}
		enc, err := json.Marshal(in)
		if err != nil {
			t.Fatalf("encode accepted input: %v", err)
		}
		again, err := decodeInput(enc)
		if err != nil {
			t.Fatalf("accepted input refused after a round trip: %v\n%s", err, enc)
		}
		enc2, err := json.Marshal(again)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(enc, enc2) {
			t.Fatalf("round trip changed the input:\n%s\n%s", enc, enc2)
		}
	})
}
