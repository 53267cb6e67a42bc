package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"testing"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/agents"
	"github.com/aapd/aapd/agents/echo"
	"github.com/aapd/aapd/httpapi"
)

// The OpenAI door's request bodies, fuzzed (docs/security.md "Fuzzed front
// doors"). The property of each target: no panic; a refusal is an error
// the door answers as the client's (a *httpapi.Problem below 500, or an
// *aap.Error, a 400); what is accepted round-trips: its request encoded
// again is accepted again, as the same messages.

// clientError fails t unless err would be answered below 500.
func clientError(t *testing.T, err error) {
	t.Helper()
	var p *httpapi.Problem
	var e *aap.Error
	switch {
	case errors.As(err, &p):
		if p.Status >= http.StatusInternalServerError {
			t.Fatalf("refused with a %d: %v", p.Status, err)
		}
	case errors.As(err, &e):
	default:
		t.Fatalf("refused with %T (%v), which would be a 500", err, err)
	}
}

// sameJSON fails t unless a and b encode alike.
func sameJSON(t *testing.T, what string, a, b any) {
	t.Helper()
	ja, err := json.Marshal(a)
	if err != nil {
		t.Fatalf("encode %s: %v", what, err)
	}
	jb, err := json.Marshal(b)
	if err != nil {
		t.Fatalf("encode %s: %v", what, err)
	}
	if !bytes.Equal(ja, jb) {
		t.Fatalf("round trip changed %s:\n%s\n%s", what, ja, jb)
	}
}

func fuzzDoor(f *testing.F) *Door {
	registry, err := agents.NewRegistry(echo.NewAgent())
	if err != nil {
		f.Fatal(err)
	}
	return New(Config{Agents: registry})
}

// FuzzCreateResponse feeds bodies to the decoding and checks of POST
// /openai/v1/responses.
func FuzzCreateResponse(f *testing.F) {
	d := fuzzDoor(f)
	for _, s := range []string{
		`{"model":"echo","input":"hi"}`,
		`{"model":"echo","input":[{"role":"user","content":"hi"}],"instructions":"be brief","store":false,"stream":true,"metadata":{"k":"v"},"max_output_tokens":64}`,
		`{"model":"echo","input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"look"},{"type":"input_image","image_url":"https://example.com/a.png"}]}]}`,
		`{"model":"echo","input":[{"role":"user","content":"x"},{"type":"reasoning","summary":[{"text":"t"}]},{"type":"function_call","call_id":"c1","name":"f","arguments":"{\"a\":1}"},{"type":"function_call_output","call_id":"c1","output":"ok"}],"tools":[{"type":"function","name":"f","description":"d","parameters":{"type":"object"}}],"tool_choice":"auto"}`,
		`{"previous_response_id":"resp_1","input":[{"type":"mcp_approval_response","approval_request_id":"mcpr_c1","approve":true,"reason":"fine"}]}`,
		`{"conversation":{"id":"sess_1"},"input":"next","background":true}`,
		`{"model":"nope","input":"hi"}`,
		`{"model":"echo","input":[{"role":"robot","content":"hi"}]}`,
		`{"model":"echo","input":"hi","tool_choice":"required"}`,
		`{"model":"echo","input":"hi","tools":[{"type":"function","name":"f"}],"tool_choice":{"type":"function","name":"f"}}`,
		`{"model":"echo","input":"hi","tools":[{"type":"function","name":"f"},{"type":"function","name":"g"}],"tool_choice":{"type":"allowed_tools","mode":"required","tools":[{"type":"function","name":"g"}]}}`,
		`[]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		in, err := d.decode(body)
		if err != nil {
			clientError(t, err)
			return
		}
		enc, err := json.Marshal(in.req)
		if err != nil {
			t.Fatalf("encode accepted request: %v", err)
		}
		again, err := d.decode(enc)
		if err != nil {
			t.Fatalf("accepted request refused after a round trip: %v\n%s", err, enc)
		}
		sameJSON(t, "the request", in.req, again.req)
		sameJSON(t, "the messages", in.messages, again.messages)
		sameJSON(t, "the tools", in.tools, again.tools)
		sameJSON(t, "the tool choice", in.choice, again.choice)
		if in.convID != again.convID || in.prev != again.prev || in.store != again.store ||
			in.stream != again.stream || in.background != again.background {
			t.Fatalf("round trip changed the request's mode:\n%+v\n%+v", in, again)
		}
	})
}

// FuzzCreateConversation feeds bodies to the decoding and checks of POST
// /openai/v1/conversations.
func FuzzCreateConversation(f *testing.F) {
	info := echo.NewAgent().Info
	for _, s := range []string{
		``,
		`{}`,
		`{"items":[{"type":"message","role":"user","content":"hi"},{"role":"assistant","content":[{"type":"output_text","text":"hello"}]}],"metadata":{"topic":"demo"}}`,
		`{"items":[{"role":"system","content":"be brief"},{"role":"developer","content":[{"type":"input_text","text":"x"}]}]}`,
		`{"items":[{"role":"user","content":[{"type":"input_image","image_url":""}]}]}`,
		`{"metadata":{"k":1}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		msgs, md, err := decodeConversation(body)
		if err == nil {
			err = aap.ValidateCreateSession(aap.CreateSessionRequest{Agent: aap.AgentConfig{Name: info.Name}, Messages: msgs}, info)
		}
		if err != nil {
			clientError(t, err)
			return
		}
		var req conversationRequest
		if len(body) > 0 {
			if err := json.Unmarshal(body, &req); err != nil {
				t.Fatalf("accepted body no longer decodes: %v", err)
			}
		}
		enc, err := json.Marshal(req)
		if err != nil {
			t.Fatalf("encode accepted request: %v", err)
		}
		msgs2, md2, err := decodeConversation(enc)
		if err != nil {
			t.Fatalf("accepted request refused after a round trip: %v\n%s", err, enc)
		}
		sameJSON(t, "the messages", msgs, msgs2)
		if md != md2 {
			t.Fatalf("round trip changed the metadata: %s, then %s", md, md2)
		}
	})
}

// FuzzAddItems feeds bodies to the decoding and checks of POST
// /openai/v1/conversations/{id}/items.
func FuzzAddItems(f *testing.F) {
	info := echo.NewAgent().Info
	for _, s := range []string{
		`{"items":[{"type":"message","role":"user","content":"hi"}]}`,
		`{"items":[{"role":"user","content":[{"type":"input_text","text":"a"},{"type":"refusal","refusal":"no"}]},{"role":"assistant","content":"b"}]}`,
		`{"items":[]}`,
		`{"items":[{"type":"function_call_output","call_id":"c1","output":[{"type":"output_text","text":"x"}]}]}`,
		`{"items":[{"type":"file_search_call"}]}`,
		`{"items":null}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		msgs, err := decodeItems(body)
		if err == nil {
			err = aap.ValidateCreateSession(aap.CreateSessionRequest{Agent: aap.AgentConfig{Name: info.Name}, Messages: msgs}, info)
		}
		if err != nil {
			clientError(t, err)
			return
		}
		var req itemsRequest
		if err := json.Unmarshal(body, &req); err != nil {
			t.Fatalf("accepted body no longer decodes: %v", err)
		}
		enc, err := json.Marshal(req)
		if err != nil {
			t.Fatalf("encode accepted request: %v", err)
		}
		msgs2, err := decodeItems(enc)
		if err != nil {
			t.Fatalf("accepted request refused after a round trip: %v\n%s", err, enc)
		}
		sameJSON(t, "the messages", msgs, msgs2)
	})
}
