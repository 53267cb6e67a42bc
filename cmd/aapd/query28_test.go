package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// A query string that does not parse (a bad escape, a semicolon
// separator) is a client's mistake, answered 400 in the door's own error
// shape, naming the parameter — never dropped, which would answer a list
// with its first page as if no cursor had been sent (httpapi.Query).
func TestAMalformedQueryStringIsA400OnEveryList(t *testing.T) {
	t.Parallel()
	s := startParallelServer(t, func(c *Config) { c.AdminToken = testOperatorToken })
	c, tn := s.newTenantWithID(t)
	op := &client{t: t, base: s.base + "/admin/v1", key: testOperatorToken}
	sid, tid := c.sessionWithATurn()
	c.do("POST", "/sandbox-agent/v1/sessions/q28", map[string]any{"agent": "echo"}).expect(t, http.StatusOK)

	// shape is the door's error shape: "problem" (RFC 9457: AAP v3, AAP
	// v1, the admin API), "openai" (OpenAI's error object), "sandbox" (the
	// sandbox-agent seed's ProblemDetails).
	cases := []struct {
		name, path, shape, field string
		operator                 bool
	}{
		{name: "v3 sessions: after a bad escape", path: "/sessions?after=%%%", shape: "problem", field: "after"},
		{name: "v3 sessions: after a bad escape behind a good limit", path: "/sessions?limit=2&after=%zz", shape: "problem", field: "after"},
		{name: "v3 sessions: a semicolon separator", path: "/sessions?limit=2;after=x", shape: "problem"},
		{name: "v3 sessions: owner a bad escape", path: "/sessions?owner=al%ice", shape: "problem", field: "owner"},
		{name: "v3 turns", path: "/sessions/{sid}/turns?after=%%%", shape: "problem", field: "after"},
		{name: "v3 turn events", path: "/sessions/{sid}/turns/{tid}/events?after=%", shape: "problem", field: "after"},
		{name: "v3 session events", path: "/sessions/{sid}/events?after=%%%&limit=2", shape: "problem", field: "after"},
		{name: "v3 compactions", path: "/sessions/{sid}/compactions?limit=%3", shape: "problem", field: "limit"},
		{name: "v3 history", path: "/sessions/{sid}/history?type=full%", shape: "problem", field: "type"},
		{name: "v1 sessions", path: "/v1/sessions?after=%%%", shape: "problem", field: "after"},
		{name: "admin tenants", path: "/tenants?cursor=%%%", shape: "problem", field: "cursor", operator: true},
		{name: "admin keys", path: "/tenants/{tenant}/keys?cursor=%%%", shape: "problem", field: "cursor", operator: true},
		{name: "admin issuers", path: "/tenants/{tenant}/issuers?cursor=%%%", shape: "problem", field: "cursor", operator: true},
		{name: "admin webhooks", path: "/tenants/{tenant}/webhooks?cursor=%%%", shape: "problem", field: "cursor", operator: true},
		{name: "admin usage", path: "/tenants/{tenant}/usage?from=%%%", shape: "problem", field: "from", operator: true},
		{name: "openai items: after a bad escape", path: "/openai/v1/conversations/{sid}/items?after=%%%", shape: "openai", field: "after"},
		{name: "openai items: a semicolon separator", path: "/openai/v1/conversations/{sid}/items?limit=1;order=asc", shape: "openai"},
		{name: "sandbox-agent sessions", path: "/sandbox-agent/v1/sessions?limit=%%%", shape: "sandbox", field: "limit"},
		{name: "sandbox-agent events", path: "/sandbox-agent/v1/sessions/q28/events?offset=%%%", shape: "sandbox", field: "offset"},
	}
	repl := strings.NewReplacer("{sid}", sid, "{tid}", tid, "{tenant}", tn.Name)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			who := c.as(t)
			if tc.operator {
				who = op.as(t)
			}
			r := who.do("GET", repl.Replace(tc.path), nil)
			switch tc.shape {
			case "problem":
				p := checkProblem(t, r, http.StatusBadRequest, "invalid-request")
				if got, _ := p["field"].(string); p != nil && got != tc.field {
					t.Errorf("field = %v, want %q (detail %v)", p["field"], tc.field, p["detail"])
				}
			case "openai":
				var e struct {
					Error struct {
						Type  string  `json:"type"`
						Param *string `json:"param"`
					} `json:"error"`
				}
				if r.StatusCode != http.StatusBadRequest || json.Unmarshal(r.body, &e) != nil || e.Error.Type != "invalid_request_error" {
					t.Fatalf("status %d, body %s: want 400 and an invalid_request_error", r.StatusCode, r.body)
				}
				if got := e.Error.Param; tc.field != "" && (got == nil || *got != tc.field) || tc.field == "" && got != nil {
					t.Errorf("param = %v, want %q", got, tc.field)
				}
			case "sandbox":
				var p struct {
					Type  string `json:"type"`
					Field string `json:"field"`
				}
				if r.StatusCode != http.StatusBadRequest || json.Unmarshal(r.body, &p) != nil || p.Type != "urn:sandbox-agent:error:invalid_request" {
					t.Fatalf("status %d, body %s: want 400 and an invalid_request problem", r.StatusCode, r.body)
				}
				if p.Field != tc.field {
					t.Errorf("field = %q, want %q", p.Field, tc.field)
				}
			}
		})
	}
}
