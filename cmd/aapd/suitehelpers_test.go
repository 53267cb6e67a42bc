package main

import (
	"encoding/json"
	"net/http"
	"sync"
	"testing"

	"github.com/aapd/aapd/httpapi"
	"github.com/aapd/aapd/store/storetest"
)

// Helpers shared by badinput_test.go, isolation_test.go, pagination_test.go
// and cli_test.go.

// problemType is the full problem type URI of a slug.
func problemType(slug string) string { return httpapi.ProblemTypeBase + slug }

// checkProblem asserts that r is an RFC 9457 problem with the status and
// type slug, a title and a non-empty detail, and returns it decoded. It
// reports with t.Errorf so that a table shows every mismatch at once.
func checkProblem(t *testing.T, r response, status int, slug string) map[string]any {
	t.Helper()
	if r.StatusCode >= 500 {
		t.Errorf("%s %s: server error %d for client input: %s", r.Request.Method, r.Request.URL, r.StatusCode, r.body)
	}
	if r.StatusCode != status {
		t.Errorf("%s %s: status %d, want %d; body: %s", r.Request.Method, r.Request.URL, r.StatusCode, status, r.body)
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/problem+json" {
		t.Errorf("Content-Type = %q, want application/problem+json (body %s)", ct, r.body)
		return nil
	}
	var p map[string]any
	if err := json.Unmarshal(r.body, &p); err != nil {
		t.Errorf("problem body %q: %v", r.body, err)
		return nil
	}
	if p["type"] != problemType(slug) {
		t.Errorf("problem type = %v, want %s (detail %v)", p["type"], problemType(slug), p["detail"])
	}
	if st, _ := p["status"].(float64); int(st) != r.StatusCode {
		t.Errorf("problem status member = %v, HTTP status %d", p["status"], r.StatusCode)
	}
	if s, _ := p["title"].(string); s == "" {
		t.Errorf("problem has no title: %s", r.body)
	}
	if s, _ := p["detail"].(string); s == "" {
		t.Errorf("problem has no detail: %s", r.body)
	}
	return p
}

// newTenantWithID is newTenant that also returns the tenant, for tests that
// reach into the store as that tenant.
func (s *testServer) newTenantWithID(t *testing.T) (*client, storetest.Tenant) {
	t.Helper()
	tn := storetest.NewTenant(t, s.Store)
	return &client{t: t, base: s.base, key: tn.Key}, tn
}

// as returns a copy of c that reports to t: for subtests and goroutines
// that must not fail their parent.
func (c *client) as(t *testing.T) *client {
	return &client{t: t, base: c.base, key: c.key}
}

var databaseKeyOnce sync.Once

// startParallelServer is startServer for tests that run in parallel. The
// first store opened on a database without a configured encryption key
// generates the key it keeps there; stores opened concurrently on such a
// database race (see TestServersStartingTogetherOnAFreshDatabase), so the
// key is created once, before the parallel servers start.
func startParallelServer(t *testing.T, edit ...func(*Config)) *testServer {
	t.Helper()
	databaseKeyOnce.Do(func() { storetest.Open(t) })
	s := startServer(t, edit...)
	// Before the server shuts down, drop the client's idle connections: a
	// connection the client dialled but never used looks new to the server,
	// and http.Server.Shutdown waits 5s for new connections.
	t.Cleanup(http.DefaultClient.CloseIdleConnections)
	return s
}
