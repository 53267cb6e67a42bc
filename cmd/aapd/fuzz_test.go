package main

import (
	"bytes"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"golang.org/x/net/http/httpguts"
)

// fuzzRoute is a route of a front door the fuzzer sends bytes to: a body,
// a query string, and a value for one header.
type fuzzRoute struct {
	method, path string // path may hold {sid}, {tid}, {name} and {tenant}
	header       string // the header the fuzzed value goes in, if any
	admin        bool   // sent with the operator's token
	seedBody     string
	seedQuery    string // set on the routes that read their query
	seedHeader   string
}

// fuzzRoutes are the parsers that face the network, door by door: request
// bodies, cursors, event offsets and Last-Event-ID. Routes that end a
// session (DELETE, terminate) are left out: the fuzzer would end the one
// session every other input is tried on.
var fuzzRoutes = []fuzzRoute{
	{method: "POST", path: "/sessions", seedBody: `{"agent":{"name":"echo"},"messages":[{"role":"user","content":"hi"}]}`},
	{method: "POST", path: "/sessions/{sid}/turns", header: "Idempotency-Key", seedBody: `{"messages":[{"role":"user","content":"hi"}]}`, seedHeader: "k1"},
	{method: "POST", path: "/sessions/{sid}/turns", header: "Prefer", seedBody: `{"stream":"delta","messages":[{"role":"user","content":"hi"}]}`, seedHeader: "respond-async"},
	{method: "GET", path: "/sessions", seedQuery: "limit=2&cursor=c2Vzc18x"},
	{method: "GET", path: "/sessions/{sid}/history", seedQuery: "type=full"},
	{method: "GET", path: "/sessions/{sid}/events", header: "Last-Event-ID", seedQuery: "after=1&limit=3", seedHeader: "2"},
	{method: "POST", path: "/sessions/{sid}/fork", seedBody: `{"at":{"message":2}}`},
	{method: "POST", path: "/sessions/import", seedBody: `{"type":"header","format":"aapd-session","version":1}` + "\n", seedQuery: "owner=alice"},
	{method: "PUT", path: "/v1/session", seedBody: `{"agent":{"name":"echo"},"messages":[{"role":"user","content":"hi"}],"tools":[{"name":"f","description":"d","inputSchema":{"type":"object"}}]}`},
	{method: "POST", path: "/v1/session/{sid}", seedBody: `{"messages":[{"role":"user","content":"hi"}]}`},
	{method: "GET", path: "/v1/sessions", seedQuery: "cursor=abc"},
	{method: "POST", path: "/ag-ui/agents/echo", header: "Accept", seedBody: `{"threadId":"t1","runId":"r1","messages":[{"id":"m1","role":"user","content":"hi"}]}`, seedHeader: "text/event-stream"},
	{method: "POST", path: "/sandbox-agent/v1/sessions/{name}x", seedBody: `{"agent":"echo","permissionMode":"default"}`},
	{method: "POST", path: "/sandbox-agent/v1/sessions/{name}/messages", seedBody: `{"message":"hi"}`},
	{method: "GET", path: "/sandbox-agent/v1/sessions/{name}/events", header: "Last-Event-ID", seedQuery: "offset=1&limit=2&include_raw=true"},
	{method: "POST", path: "/sandbox-agent/v1/sessions/{name}/permissions/p1/reply", seedBody: `{"reply":"once"}`},
	{method: "POST", path: "/sandbox-agent/v1/sessions/{name}/questions/q1/reply", seedBody: `{"answers":[["yes"]]}`},
	{method: "GET", path: "/sandbox-agent/v1/sessions", seedQuery: "limit=5"},
	{method: "POST", path: "/openai/v1/responses", seedBody: `{"model":"echo","input":[{"role":"user","content":"hi"}],"metadata":{"k":"v"}}`},
	{method: "POST", path: "/openai/v1/conversations", seedBody: `{"items":[{"type":"message","role":"user","content":"hi"}],"metadata":{"k":"v"}}`},
	{method: "POST", path: "/openai/v1/conversations/{sid}/items", seedBody: `{"items":[{"role":"user","content":[{"type":"input_text","text":"hi"}]}]}`},
	{method: "GET", path: "/openai/v1/conversations/{sid}/items", seedQuery: "limit=2&order=asc"},
	{method: "POST", path: "/admin/v1/tenants/{tenant}/webhooks", admin: true, seedBody: `{"url":"https://hooks.example.com/x","events":["turn.completed"]}`},
	{method: "GET", path: "/admin/v1/tenants", admin: true, seedQuery: "limit=1&cursor=eA"},
	{method: "PUT", path: "/admin/v1/tenants/{tenant}/limits", admin: true, seedBody: `{"turnsPerMinute":100}`},
	{method: "PUT", path: "/admin/v1/tenants/{tenant}/retention", admin: true, seedBody: `{"idleSessionDays":90,"fullHistoryDays":1.5}`},
	{method: "POST", path: "/sessions/{sid}/schedules", seedBody: `{"cron":"0 9 * * 1-5","timezone":"Europe/Berlin","endAt":"2030-01-01T00:00:00Z","messages":[{"role":"user","content":"report"}]}`},
	{method: "GET", path: "/sessions/{sid}/turns/{tid}", header: "Prefer", seedHeader: "wait=1"},
	{method: "GET", path: "/sessions/{sid}/turns", seedQuery: "limit=1&after=dHVybl8x"},
	{method: "GET", path: "/admin/v1/tenants/{tenant}/webhooks", admin: true, seedQuery: "limit=1&cursor=d2hfMQ"},
	{method: "GET", path: "/admin/v1/tenants/{tenant}/owners/alice/export", admin: true},
}

// FuzzFrontDoors sends fuzzed requests to every door of a real server
// (AAP v3, AAP v1, AG-UI, sandbox-agent, OpenAI, the admin API). The property: no
// input is answered with a 5xx: whatever a client sends, a mistake is
// its, and answered as one; and a route that reads its query answers a
// query string that does not parse with a 4xx, never as if it had not
// been sent (httpapi.Query).
func FuzzFrontDoors(f *testing.F) {
	token := operatorToken()
	srv := startServer(f, func(c *Config) { c.AdminToken = token })
	c := srv.newTenant(f)
	sid, tid := c.sessionWithATurn()
	name := uniqueName("fuzz")
	c.do("POST", "/sandbox-agent/v1/sessions/"+name, map[string]any{"agent": "echo"}).expect(f, http.StatusOK)
	tenant := uniqueName("fuzz")
	(&client{t: f, base: srv.base + "/admin/v1", key: token}).do("POST", "/tenants", map[string]string{"name": tenant}).expect(f, http.StatusCreated)
	for i, r := range fuzzRoutes {
		f.Add(uint8(i), []byte(r.seedBody), r.seedQuery, r.seedHeader)
	}
	f.Fuzz(func(t *testing.T, which uint8, body []byte, query, header string) {
		r := fuzzRoutes[int(which)%len(fuzzRoutes)]
		path := strings.NewReplacer("{sid}", sid, "{tid}", tid, "{name}", name, "{tenant}", tenant).Replace(r.path)
		u, err := url.Parse(srv.base + path)
		if err != nil {
			t.Fatal(err)
		}
		u.RawQuery = query
		if _, err := url.ParseQuery(query); err != nil && strings.ContainsAny(query, " #\x00\r\n") {
			return // not a query a client can send
		}
		req, err := http.NewRequest(r.method, u.String(), bytes.NewReader(body))
		if err != nil {
			return
		}
		req.Header.Set("Content-Type", "application/json")
		key := c.key
		if r.admin {
			key = token
		}
		req.Header.Set("Authorization", "Bearer "+key)
		if r.header != "" {
			if !httpguts.ValidHeaderFieldValue(header) {
				return // not a header a client can send
			}
			req.Header.Set(r.header, header)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", r.method, u, err)
		}
		b, _ := io.ReadAll(io.LimitReader(res.Body, 1<<16))
		res.Body.Close()
		if res.StatusCode >= 500 {
			t.Fatalf("%s %s (%s: %q) with body %q: %d %s", r.method, u, r.header, header, body, res.StatusCode, b)
		}
		if _, err := url.ParseQuery(req.URL.RawQuery); err != nil && r.seedQuery != "" && res.StatusCode < 400 {
			t.Fatalf("%s %s: a query string that does not parse (%v) answered %d %s", r.method, u, err, res.StatusCode, b)
		}
	})
}
