package admin

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
)

// FuzzWebhookRequest feeds an operator's webhook definitions to the admin
// API's decoding and validation. The property: no panic; a refusal is an
// *Error (a 4xx problem naming the field); an accepted definition is valid
// again once encoded and decoded, unchanged.
func FuzzWebhookRequest(f *testing.F) {
	for _, s := range []string{
		`{"url":"https://hooks.example.com/aapd","events":["turn.completed","turn.failed"],"description":"prod"}`,
		`{"url":"https://127.0.0.1:8443/h","events":["session.deleted","turn.requires_action"]}`,
		`{"url":"http://hooks.example.com/","events":["turn.completed"]}`,
		`{"url":"https://hooks.example.com/","events":["turn.done"]}`,
		`{"url":"https://hooks.example.com/","events":[],"descripton":"x"}`,
		`{"url":"https://[::1]:99999/","events":["turn.completed"]}`,
		`{"url":"https://user:pw@hooks.example.com/#frag","events":["turn.completed"],"description":"a\u0007"}`,
	} {
		f.Add([]byte(s), false)
	}
	f.Fuzz(func(t *testing.T, body []byte, allowPrivate bool) {
		var req WebhookRequest
		r := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
		if err := decode(httptest.NewRecorder(), r, &req); err != nil {
			requireAdminError(t, err)
			return
		}
		ok, err := req.validate(allowPrivate)
		if err != nil {
			requireAdminError(t, err)
			return
		}
		enc, err := json.Marshal(ok)
		if err != nil {
			t.Fatal(err)
		}
		var again WebhookRequest
		if err := decode(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(enc)), &again); err != nil {
			t.Fatalf("accepted definition does not decode once encoded: %v\n%s", err, enc)
		}
		twice, err := again.validate(allowPrivate)
		if err != nil {
			t.Fatalf("accepted definition refused once encoded: %v\n%s", err, enc)
		}
		if !reflect.DeepEqual(ok, twice) {
			t.Fatalf("round trip changed the definition: %+v, then %+v", ok, twice)
		}
	})
}

func requireAdminError(t *testing.T, err error) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("refused with %T (%v), which would be a 500", err, err)
	}
	if e.Kind != Invalid {
		t.Fatalf("refused as %v, not as invalid input: %v", e.Kind, e)
	}
}
