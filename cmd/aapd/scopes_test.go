package main

import (
	"net/http"
	"strings"
	"testing"

	"github.com/aapd/aapd/auth/authtest"
)

// expectInsufficientScope checks a 403 naming the missing scope. The tests
// of this file make raw requests: the scope challenge (WWW-Authenticate)
// is the wire itself.
func expectInsufficientScope(t *testing.T, r response, scope string) {
	t.Helper()
	checkProblem(t, r, http.StatusForbidden, "insufficient-scope")
	ch := r.Header.Get("WWW-Authenticate")
	if !strings.Contains(ch, `error="insufficient_scope"`) || !strings.Contains(ch, `scope="`+scope+`"`) {
		t.Errorf("%s %s: WWW-Authenticate = %q, want insufficient_scope naming %s", r.Request.Method, r.Request.URL.Path, ch, scope)
	}
}

func TestReadOnlyKeysCanReadButNotWrite(t *testing.T) {
	t.Parallel()
	s := startParallelServer(t)
	full, tenant := s.newTenantWithKey(t)
	sid := full.echoSession(nil)
	r := full.do("POST", "/sessions/"+sid+"/turns", user("hello")).expect(t, http.StatusOK)
	turn := r.Header.Get("Aapd-Turn-Id")
	ro := s.keyWithScopes(t, tenant, "sessions:read")

	for _, path := range []string{"/sessions", "/sessions/" + sid, "/sessions/" + sid + "/history?type=full",
		"/sessions/" + sid + "/turns", "/sessions/" + sid + "/turns/" + turn, "/sessions/" + sid + "/compactions",
		"/sessions/" + sid + "/events"} {
		ro.do("GET", path, nil).expect(t, http.StatusOK)
	}
	// Following a finished turn's events from its end is a read too.
	ro.do("GET", "/sessions/"+sid+"/turns/"+turn+"/events?after=0", nil).expect(t, http.StatusOK)
	for _, w := range []struct {
		method, path string
		body         any
	}{
		{"POST", "/sessions", map[string]any{"agent": map[string]any{"name": "echo"}}},
		{"POST", "/sessions/" + sid + "/turns", user("hi")},
		{"POST", "/sessions/" + sid + "/turns/" + turn + "/cancel", nil},
		{"POST", "/sessions/" + sid + "/compact", nil},
		{"DELETE", "/sessions/" + sid, nil},
	} {
		expectInsufficientScope(t, ro.do(w.method, w.path, w.body), "sessions:write")
	}
	if h := full.history(sid, "full"); len(h) != 2 {
		t.Errorf("the read-only key changed the session: %+v", h)
	}
}

func TestWriteOnlyKeysCanWriteButNotRead(t *testing.T) {
	t.Parallel()
	s := startParallelServer(t)
	_, tenant := s.newTenantWithKey(t)
	wo := s.keyWithScopes(t, tenant, "sessions:write")
	sid := wo.echoSession(nil)
	wo.say(sid, "hello")
	for _, path := range []string{"/sessions", "/sessions/" + sid, "/sessions/" + sid + "/history?type=full", "/sessions/" + sid + "/turns",
		"/sessions/" + sid + "/events"} {
		expectInsufficientScope(t, wo.do("GET", path, nil), "sessions:read")
	}
	// A key with no scope at all can do nothing.
	none := s.keyWithScopes(t, tenant)
	expectInsufficientScope(t, none.do("GET", "/sessions", nil), "sessions:read")
	expectInsufficientScope(t, none.do("POST", "/sessions", map[string]any{"agent": map[string]any{"name": "echo"}}), "sessions:write")
	wo.do("DELETE", "/sessions/"+sid, nil).expect(t, http.StatusNoContent)
}

func TestTokenScopeClaimNarrowsWhatTheUserMayDo(t *testing.T) {
	t.Parallel()
	s := startParallelServer(t)
	_, tenant := s.newTenantWithKey(t)
	es := authtest.NewES256(t, "")
	s.registerIssuer(t, tenant, "https://scopes.example", "aapd", "", es.PublicPEM(t))
	token := func(scope *string) *client {
		c := authtest.Claims("https://scopes.example", "aapd", "user1")
		if scope != nil {
			c["scope"] = *scope
		}
		return s.bearer(t, es.Sign(t, c))
	}
	str := func(s string) *string { return &s }

	// No scope claim: the user may do everything with their sessions.
	sid := token(nil).echoSession(nil)
	readOnly := token(str("openid profile sessions:read"))
	readOnly.do("GET", "/sessions/"+sid, nil).expect(t, http.StatusOK)
	expectInsufficientScope(t, readOnly.do("POST", "/sessions/"+sid+"/turns", user("hi")), "sessions:write")
	writeOnly := token(str("sessions:write"))
	writeOnly.say(sid, "hi")
	expectInsufficientScope(t, writeOnly.do("GET", "/sessions", nil), "sessions:read")
	// Scopes aapd does not know are ignored: this token may do nothing.
	nothing := token(str("admin sessions:*"))
	expectInsufficientScope(t, nothing.do("GET", "/sessions", nil), "sessions:read")
}
