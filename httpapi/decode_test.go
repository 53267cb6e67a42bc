package httpapi

import (
	"encoding/json"
	"testing"

	"github.com/aapd/aapd/aap"
)

func TestDecodingErrorsNameTheirField(t *testing.T) {
	cases := []struct{ body, field string }{
		{`{"agent":{"name":"echo"},"messages":[{"role":"user","content":"a"},{"role":"user","content":[{"type":"image"}]}]}`, "messages[1].content[0]"},
		{`{"agent":{"name":"echo","options":{"style":5}}}`, "agent.options.style"},
		{`{"agent":{"name":"echo"},"tools":[{"name":"x"}]}`, "tools[0]"},
		{`{"agent":"echo"}`, "agent"},
		{`{"agent":{"name":"echo"},"messages":[{"role":"robot","content":"a"}]}`, "messages[0]"},
		{`{"agent":`, ""},
	}
	for _, tc := range cases {
		var req aap.CreateSessionRequest
		err := decodeJSON([]byte(tc.body), &req)
		p, ok := err.(*Problem)
		if !ok || p.Field != tc.field {
			t.Errorf("%s: field %q (detail %q), want %q", tc.body, p.Field, p.Detail, tc.field)
		}
	}
	_ = json.Valid
}
