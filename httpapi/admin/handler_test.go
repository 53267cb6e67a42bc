package admin_test

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aapd/aapd/agents"
	"github.com/aapd/aapd/agents/echo"
	"github.com/aapd/aapd/httpapi"
	"github.com/aapd/aapd/httpapi/admin"
	v3 "github.com/aapd/aapd/httpapi/v3"
	"github.com/aapd/aapd/store/storetest"
)

// Without an operator token the admin API does not exist.
func TestAdminOffWithoutToken(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t)
	registry, err := agents.NewRegistry(echo.NewAgent())
	if err != nil {
		t.Fatal(err)
	}
	api := httpapi.New(httpapi.Config{Store: st, Doors: []httpapi.Door{v3.New(v3.Config{Store: st, Agents: registry})}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Runner: agents.NewRunner(agents.RunnerConfig{Store: st, Agents: registry, Owner: func() int32 { return 0 }})})
	hs := httptest.NewServer(api)
	t.Cleanup(func() { hs.Close(); api.Close() })
	for _, path := range []string{"/admin/v1/tenants", "/admin/v1/tenants/x/keys"} {
		call(t, "GET", hs.URL+path, randomToken(), nil).problem(t, http.StatusNotFound, "not-found", "no such endpoint")
	}
	if _, err := admin.NewHandler(admin.NewService(admin.Config{Store: st}), "short"); err == nil {
		t.Error("a handler was made with a 5-character token")
	}
}

// Every path answers 401 without the operator token, the route unknown or
// not: an API key, another token, another scheme or none get nothing.
func TestAdminRefusesWithoutTheOperatorToken(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	tn := storetest.NewTenant(t, f.st)
	for _, tc := range []struct{ name, header string }{
		{"none", ""},
		{"wrong token", "Bearer " + randomToken()},
		{"token prefix", "Bearer " + f.token[:len(f.token)-1]},
		{"API key", "Bearer " + tn.Key},
		{"basic", "Basic " + f.token},
		{"bare token", f.token},
	} {
		for _, path := range []string{"/tenants", "/tenants/" + tn.Name + "/keys", "/nowhere"} {
			req, _ := http.NewRequest("GET", f.url+admin.Prefix+path, nil)
			if tc.header != "" {
				req.Header.Set("Authorization", tc.header)
			}
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != http.StatusUnauthorized || res.Header.Get("Content-Type") != "application/problem+json" ||
				!strings.HasPrefix(res.Header.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("%s on %s: %d %q, want 401 problem+json with WWW-Authenticate", tc.name, path, res.StatusCode, res.Header.Get("Content-Type"))
			}
		}
	}
	// The scheme is case-insensitive, as RFC 9110 says.
	req, _ := http.NewRequest("GET", f.url+admin.Prefix+"/tenants?limit=1", nil)
	req.Header.Set("Authorization", "bearer "+f.token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Errorf("lower-case bearer: %d", res.StatusCode)
	}
}

func TestAdminUnknownRouteAndMethod(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.admin("GET", "/nowhere", nil).problem(t, http.StatusNotFound, "not-found", "no such endpoint")
	r := f.admin("PATCH", "/tenants", nil)
	r.problem(t, http.StatusMethodNotAllowed, "method-not-allowed", "PATCH")
	if got := r.header.Get("Allow"); got != "GET, POST" {
		t.Errorf("Allow %q, want GET, POST", got)
	}
	if got := r.header.Get("Cache-Control"); got != "no-store" {
		t.Errorf("Cache-Control %q", got)
	}
}

// Bodies are JSON objects with known fields only.
func TestAdminRefusesBadBodies(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for _, tc := range []struct {
		body any
		want string
	}{
		{"", "empty"},
		{`{"name":`, "malformed JSON"},
		{`{"name":"a"} {}`, "nothing after"},
		{`[]`, "JSON object"},
		{`{"name": 5}`, "name"},
		{`{"name":"ok-name","nmae":"x"}`, "nmae"},
		{strings.Repeat(" ", 2<<20), "exceeds"},
	} {
		r := f.admin("POST", "/tenants", tc.body)
		if r.status == http.StatusRequestEntityTooLarge {
			r.problem(t, http.StatusRequestEntityTooLarge, "payload-too-large", tc.want)
			continue
		}
		r.problem(t, http.StatusBadRequest, "invalid-request", tc.want)
	}
}
