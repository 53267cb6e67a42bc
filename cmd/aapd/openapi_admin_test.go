package main

import (
	"bufio"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aapd/aapd/httpapi"
)

// TestOpenAPIAdminRoutes drives every route of the admin API through the
// checked client (openapi_test.go), with its successes and its refusals, so
// that the document's /admin/v1 is held to the handlers as the AAP routes
// are. (httpapi/admin's own tests call its handler directly, unchecked.)
func TestOpenAPIAdminRoutes(t *testing.T) {
	t.Parallel()
	s := startParallelServer(t, func(c *Config) { c.AdminToken = testOperatorToken })
	op := &client{t: t, base: s.base + "/admin/v1", key: testOperatorToken}
	name := uniqueName("oapi")

	// Authentication, routing.
	checkProblem(t, (&client{t: t, base: op.base}).do("GET", "/tenants", nil), http.StatusUnauthorized, "unauthorized")
	checkProblem(t, (&client{t: t, base: op.base, key: "aapd_not_the_operator"}).do("GET", "/tenants/"+name, nil), http.StatusUnauthorized, "unauthorized")
	if r := op.do("PUT", "/tenants", "{}"); r.StatusCode != http.StatusMethodNotAllowed || r.Header.Get("Allow") != "GET, POST" {
		t.Errorf("PUT /tenants: %d, Allow %q", r.StatusCode, r.Header.Get("Allow"))
	}
	checkProblem(t, op.do("GET", "/no-such-route", nil), http.StatusNotFound, "not-found")

	// Tenants.
	r := op.do("POST", "/tenants", map[string]string{"name": name}).expect(t, http.StatusCreated)
	if r.Header.Get("Location") != "/admin/v1/tenants/"+name || r.Header.Get("Cache-Control") != "no-store" {
		t.Errorf("created tenant: headers %v", r.Header)
	}
	checkProblem(t, op.do("POST", "/tenants", map[string]string{"name": name}), http.StatusConflict, "already-exists")
	checkProblem(t, op.do("POST", "/tenants", map[string]string{"name": "-bad"}), http.StatusBadRequest, "invalid-request")
	checkProblem(t, op.do("POST", "/tenants", map[string]any{"name": uniqueName("x"), "nmae": 1}), http.StatusBadRequest, "invalid-request")
	checkProblem(t, op.do("POST", "/tenants", `{"name":"`+strings.Repeat("a", 2<<20)+`"}`), http.StatusRequestEntityTooLarge, "payload-too-large")
	other := uniqueName("oapi")
	op.do("POST", "/tenants", map[string]string{"name": other}).expect(t, http.StatusCreated)
	var page struct {
		NextCursor string `json:"nextCursor"`
	}
	op.do("GET", "/tenants?limit=1", nil).expect(t, http.StatusOK).json(t, &page)
	if page.NextCursor == "" {
		t.Fatal("a page of one tenant of two or more has no nextCursor")
	}
	op.do("GET", "/tenants?limit=100&cursor="+page.NextCursor, nil).expect(t, http.StatusOK)
	checkProblem(t, op.do("GET", "/tenants?limit=0", nil), http.StatusBadRequest, "invalid-request")
	checkProblem(t, op.do("GET", "/tenants?cursor=nonsense", nil), http.StatusBadRequest, "invalid-request")
	op.do("GET", "/tenants/"+name, nil).expect(t, http.StatusOK)
	checkProblem(t, op.do("GET", "/tenants/"+uniqueName("none"), nil), http.StatusNotFound, "not-found")

	// Keys.
	var key struct {
		ID  string `json:"id"`
		Key string `json:"key"`
	}
	op.do("POST", "/tenants/"+name+"/keys", map[string]any{
		"scopes": []string{"sessions:read"}, "expiresAt": time.Now().Add(time.Hour).UTC().Format(time.RFC3339), "label": "reader",
	}).expect(t, http.StatusCreated)
	op.do("POST", "/tenants/"+name+"/keys", map[string]any{"scopes": nil, "expiresAt": nil}).expect(t, http.StatusCreated).json(t, &key)
	checkProblem(t, op.do("POST", "/tenants/"+name+"/keys", map[string]any{"scopes": []string{"sessions:admin"}}), http.StatusBadRequest, "invalid-request")
	checkProblem(t, op.do("POST", "/tenants/"+uniqueName("none")+"/keys", map[string]any{}), http.StatusNotFound, "not-found")
	op.do("GET", "/tenants/"+name+"/keys?limit=1", nil).expect(t, http.StatusOK).json(t, &page)
	op.do("GET", "/tenants/"+name+"/keys?cursor="+page.NextCursor, nil).expect(t, http.StatusOK)

	// Limits, and the AAP API of the tenant under them.
	op.do("GET", "/tenants/"+name+"/limits", nil).expect(t, http.StatusOK)
	checkProblem(t, op.do("PUT", "/tenants/"+name+"/limits", map[string]any{"requestsPerSecond": 5}), http.StatusBadRequest, "invalid-request")
	checkProblem(t, op.do("PUT", "/tenants/"+name+"/limits", map[string]any{"burst": 1.5}), http.StatusBadRequest, "invalid-request")
	op.do("PUT", "/tenants/"+name+"/limits", map[string]any{"requestsPerSecond": 0.5, "burst": 2, "maxRunningTurns": nil}).expect(t, http.StatusOK)
	app := &client{t: t, base: s.base, key: key.Key}
	if r := app.do("GET", "/sessions", nil).expect(t, http.StatusOK); r.Header.Get("RateLimit") == "" {
		t.Errorf("no RateLimit header under a rate limit: %v", r.Header)
	}
	app.do("GET", "/sessions", nil)
	if r := app.do("GET", "/sessions", nil); r.StatusCode != http.StatusTooManyRequests || r.Header.Get("Retry-After") == "" {
		t.Errorf("a third request at a burst of 2: %d %v", r.StatusCode, r.Header)
	}
	op.do("PUT", "/tenants/"+name+"/limits", map[string]any{}).expect(t, http.StatusOK)
	op.do("DELETE", "/tenants/"+name+"/keys/"+key.ID, nil).expect(t, http.StatusNoContent)
	checkProblem(t, op.do("DELETE", "/tenants/"+other+"/keys/"+key.ID, nil), http.StatusNotFound, "not-found")

	// Issuers.
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	pemKey := string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
	var issuer struct {
		ID string `json:"id"`
	}
	op.do("POST", "/tenants/"+name+"/issuers", map[string]any{
		"issuer": "https://login." + name + ".example", "audience": "aapd", "jwksUrl": "https://login." + name + ".example/jwks.json",
	}).expect(t, http.StatusCreated)
	op.do("POST", "/tenants/"+name+"/issuers", map[string]any{
		"issuer": name + "-backend", "audience": "aapd", "publicKeys": []string{pemKey},
	}).expect(t, http.StatusCreated).json(t, &issuer)
	checkProblem(t, op.do("POST", "/tenants/"+other+"/issuers", map[string]any{
		"issuer": name + "-backend", "audience": "aapd", "publicKeys": []string{pemKey},
	}), http.StatusConflict, "already-exists")
	checkProblem(t, op.do("POST", "/tenants/"+name+"/issuers", map[string]any{
		"issuer": "i", "audience": "a", "jwksUrl": "http://login.example/jwks.json",
	}), http.StatusBadRequest, "invalid-request")
	op.do("GET", "/tenants/"+name+"/issuers?limit=1", nil).expect(t, http.StatusOK)
	op.do("DELETE", "/tenants/"+name+"/issuers/"+issuer.ID, nil).expect(t, http.StatusNoContent)
	checkProblem(t, op.do("DELETE", "/tenants/"+name+"/issuers/"+issuer.ID, nil), http.StatusNotFound, "not-found")

	// Retention.
	op.do("GET", "/tenants/"+name+"/retention", nil).expect(t, http.StatusOK)
	op.do("PUT", "/tenants/"+name+"/retention", map[string]any{"idleSessionDays": 90, "fullHistoryDays": nil}).expect(t, http.StatusOK)
	checkProblem(t, op.do("PUT", "/tenants/"+name+"/retention", map[string]any{"idleSessionDays": 0}), http.StatusBadRequest, "invalid-request")
	checkProblem(t, op.do("GET", "/tenants/"+uniqueName("none")+"/retention", nil), http.StatusNotFound, "not-found")

	// Usage.
	op.do("GET", "/tenants/"+name+"/usage", nil).expect(t, http.StatusOK)
	op.do("GET", "/tenants/"+name+"/usage?from=2025-01-01&to=2025-01-31T12:00:00Z", nil).expect(t, http.StatusOK)
	checkProblem(t, op.do("GET", "/tenants/"+name+"/usage?from=yesterday", nil), http.StatusBadRequest, "invalid-request")

	op.do("DELETE", "/tenants/"+name, nil).expect(t, http.StatusNoContent)
	op.do("DELETE", "/tenants/"+other, nil).expect(t, http.StatusNoContent)
	checkProblem(t, op.do("DELETE", "/tenants/"+name, nil), http.StatusNotFound, "not-found")
	checkProblem(t, op.do("GET", "/tenants/"+name+"/usage", nil), http.StatusNotFound, "not-found")
}

// A body that stalls on the admin API is a 408 request-timeout, as on the
// AAP routes (docs/operations.md, httpapi/openapi.yaml).
func TestAdminStalledBodyIs408(t *testing.T) {
	t.Parallel()
	s := startParallelServer(t, func(c *Config) { c.AdminToken = testOperatorToken; c.BodyTimeout = 300 * time.Millisecond })
	conn := dialRaw(t, s.base)
	fmt.Fprintf(conn, "POST /admin/v1/tenants HTTP/1.1\r\nHost: aapd\r\nAuthorization: Bearer %s\r\n"+
		"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"name\":", testOperatorToken)
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer to a stalled body: %v", err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusRequestTimeout || res.Header.Get("Content-Type") != "application/problem+json" ||
		!strings.Contains(string(body), httpapi.ProblemTypeBase+"request-timeout") {
		t.Errorf("stalled body: %d %s", res.StatusCode, body)
	}
}
