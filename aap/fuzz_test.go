package aap_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"

	"github.com/aapd/aapd/aap"
)

// The AAP v3 request bodies are the first bytes every client sends. The
// property for each: decoding never panics; a body that decodes is either
// refused by validation with an *aap.Error (a 400, never a 5xx) or
// accepted, and an accepted request round-trips: encoding it and decoding
// the result gives the same request.

func FuzzCreateSessionRequest(f *testing.F) {
	for _, s := range []string{
		`{"agent":{"name":"full"}}`,
		`{"agent":{"name":"full","tools":[{"name":"clock","trust":true}],"options":{"style":"shout","token":"t"}},"messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"thinking","thinking":"h"},{"type":"tool_use","toolCallId":"c1","name":"f","input":{"a":1}}]},{"role":"tool","toolCallId":"c1","content":"ok"}],"tools":[{"name":"f","description":"d","parameters":{"type":"object"}}]}`,
		`{"agent":{"name":"full"},"messages":[{"role":"user","content":[{"type":"image","url":"data:image/png;base64,AA=="}]}]}`,
		`{"agent":{"name":"full"},"mesages":[]}`,
		`{"agent":null}`,
		`[]`,
	} {
		f.Add([]byte(s))
	}
	agent := fuzzAgent()
	f.Fuzz(func(t *testing.T, body []byte) {
		var r aap.CreateSessionRequest
		if json.Unmarshal(body, &r) != nil {
			return
		}
		if err := aap.ValidateCreateSession(r, agent); err != nil {
			requireRequestError(t, err)
			return
		}
		var again aap.CreateSessionRequest
		requireRoundTrip(t, r, &again)
		if err := aap.ValidateCreateSession(again, agent); err != nil {
			t.Fatalf("accepted request refused after a round trip: %v", err)
		}
	})
}

func FuzzTurnRequest(f *testing.F) {
	for _, s := range []string{
		`{"messages":[{"role":"user","content":"hi"}]}`,
		`{"stream":"delta","messages":[{"role":"user","content":"hi"}]}`,
		`{"stream":"message","agent":{"name":"full","tools":[{"name":"clock"}],"options":{"prefix":"> "}},"messages":[{"role":"tool","toolCallId":"c1","content":[{"type":"text","text":"ok"}]}],"tools":[]}`,
		`{"stream":"sideways","messages":[]}`,
		`{"message":[{"role":"user","content":"hi"}]}`,
		`{"messages":[{"role":"user","content":[{"type":"image","url":"https://example.com/a.png"}]}]}`,
		`"hi"`,
	} {
		f.Add([]byte(s))
	}
	agent := fuzzAgent()
	refs := []aap.ServerToolRef{{Name: "clock"}}
	f.Fuzz(func(t *testing.T, body []byte) {
		var r aap.TurnRequest
		if json.Unmarshal(body, &r) != nil {
			return
		}
		if err := aap.ValidateTurn(r, agent.Name, refs, agent); err != nil {
			requireRequestError(t, err)
			return
		}
		var again aap.TurnRequest
		requireRoundTrip(t, r, &again)
		if err := aap.ValidateTurn(again, agent.Name, refs, agent); err != nil {
			t.Fatalf("accepted request refused after a round trip: %v", err)
		}
	})
}

// fuzzAgent declares every capability, so that validation reaches each rule.
func fuzzAgent() aap.AgentInfo {
	a := fullAgent()
	return a
}

// requireRequestError fails unless err is a validation refusal: the edge
// answers an *aap.Error with a 400, anything else with a 500.
func requireRequestError(t *testing.T, err error) {
	t.Helper()
	var e *aap.Error
	if !errors.As(err, &e) {
		t.Fatalf("validation refused with %T (%v), which would be a 500", err, err)
	}
}

// requireRoundTrip encodes v, decodes the result into into, and fails
// unless both encode the same.
func requireRoundTrip(t *testing.T, v any, into any) {
	t.Helper()
	first, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("encode accepted request: %v", err)
	}
	if err := json.Unmarshal(first, into); err != nil {
		t.Fatalf("accepted request does not decode after encoding: %v\n%s", err, first)
	}
	second, err := json.Marshal(into)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first, second) {
		t.Fatalf("round trip changed the request:\n%s\n%s", first, second)
	}
}
