package admin

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/gorilla/mux"
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

// FuzzRetentionRequest feeds an operator's retention policies (PUT
// …/retention) to the admin API's decoding and validation. The property:
// no panic; a refusal is an *Error of kind Invalid (a 400 naming the
// field); an accepted policy is whole days from 1 to MaxRetentionDays (or
// the default), and what a GET would answer for it, sent back, is
// accepted as the same policy.
func FuzzRetentionRequest(f *testing.F) {
	for _, s := range []string{
		`{"idleSessionDays":90,"fullHistoryDays":30}`,
		`{"idleSessionDays":null,"fullHistoryDays":null}`,
		`{}`,
		`{"idleSessionDays":1.5}`,
		`{"idleSessionDays":0}`,
		`{"fullHistoryDays":-1}`,
		`{"fullHistoryDays":1e300}`,
		`{"fullHistoryDays":1e400}`,
		`{"idleSessionDays":"90"}`,
		`{"idleSessionDays":36500,"effective":{"idleSessionDays":36500,"idleSessionDaysFrom":"tenant"}}`,
		`{"idleSessionsDays":9}`,
		`[90]`,
		`{"idleSessionDays":9}{}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var req RetentionRequest
		if err := decode(httptest.NewRecorder(), httptest.NewRequest(http.MethodPut, "/", bytes.NewReader(body)), &req); err != nil {
			requireAdminError(t, err)
			return
		}
		policy, err := req.validate()
		if err != nil {
			requireAdminError(t, err)
			return
		}
		for _, d := range []int{policy.IdleSessionDays, policy.FullHistoryDays} {
			if d < 0 || d > MaxRetentionDays {
				t.Fatalf("%s accepted as %+v", body, policy)
			}
		}
		shown, err := json.Marshal(retentionOf(policy, policy))
		if err != nil {
			t.Fatal(err)
		}
		var again RetentionRequest
		if err := decode(httptest.NewRecorder(), httptest.NewRequest(http.MethodPut, "/", bytes.NewReader(shown)), &again); err != nil {
			t.Fatalf("the policy as shown does not decode: %v\n%s", err, shown)
		}
		twice, err := again.validate()
		if err != nil || twice != policy {
			t.Fatalf("the policy as shown, sent back, is %+v (%v), not %+v\n%s", twice, err, policy, shown)
		}
	})
}

// FuzzOwnerSubject feeds the path segment that names an end user (DELETE
// …/owners/{sub}, GET …/owners/{sub}/export) to the router's unescaping
// and the subject's check. The property: no panic; a subject that is
// accepted is what a token's sub may be (valid UTF-8, no control
// character, 1 to 255 bytes: nothing PostgreSQL would refuse, which would
// be a 500); a subject escaped as a client escapes it reaches the check
// as it was, '/' and '%' included.
func FuzzOwnerSubject(f *testing.F) {
	for _, s := range []string{"alice", "auth0|5f0c", "a/b", "a%2Fb", "%FF", "a\x00b", "a\nb", "", "ü", "%", "%%41", strings.Repeat("x", 256)} {
		f.Add(s)
	}
	h := &Handler{}
	router := h.routes()
	f.Fuzz(func(t *testing.T, sub string) {
		req := httptest.NewRequest(http.MethodDelete, "/", nil)
		req.URL.Path = Prefix + "/tenants/t/owners/" + sub
		req.URL.RawPath = Prefix + "/tenants/t/owners/" + url.PathEscape(sub)
		var match mux.RouteMatch
		if !router.Match(req, &match) || match.MatchErr != nil {
			return // not a route: a 404
		}
		got := mux.Vars(unescapeVars(mux.SetURLVars(req, match.Vars)))["sub"]
		if got != sub {
			t.Fatalf("subject %q reached the handler as %q", sub, got)
		}
		if err := checkOwner(got); err != nil {
			requireAdminError(t, err)
			return
		}
		if !utf8.ValidString(got) || got == "" || len(got) > 255 || strings.ContainsFunc(got, unicode.IsControl) {
			t.Fatalf("subject %q accepted", got)
		}
	})
}
