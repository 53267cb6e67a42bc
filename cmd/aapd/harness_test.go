package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aapd/aapd/aap"
	v3 "github.com/aapd/aapd/httpapi/v3"
	"github.com/aapd/aapd/store"
	"github.com/aapd/aapd/store/storetest"
)

func TestMain(m *testing.M) {
	code := storetest.Main(m)
	removeBinary()
	os.Exit(code)
}

// testServer is a real aapd server on 127.0.0.1:0 over the package's test
// database, shut down when the test ends.
type testServer struct {
	*Main
	base string
}

// startServer starts a server; edit adjusts its configuration.
func startServer(t testing.TB, edit ...func(*Config)) *testServer {
	t.Helper()
	cfg := Config{
		Addr: "127.0.0.1:0", DatabaseURL: storetest.URL(t), NoMigrate: true,
		CORSOrigins: []string{"*"}, Workers: 16, Lease: 30 * time.Second,
		DrainTimeout: 5 * time.Second, MaxBodyBytes: 1 << 20,
	}
	for _, e := range edit {
		e(&cfg)
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	m, err := Start(context.Background(), cfg, logger, io.Discard)
	if err != nil {
		t.Fatalf("start server: %v", err)
	}
	t.Cleanup(func() {
		if err := m.Shutdown(); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	return &testServer{Main: m, base: "http://" + m.Addr()}
}

// client calls a server as one tenant.
type client struct {
	t    testing.TB
	base string
	key  string
}

// newTenant makes a tenant with a key and returns a client acting as it.
func (s *testServer) newTenant(t testing.TB) *client {
	t.Helper()
	tn := storetest.NewTenant(t, s.Store)
	return &client{t: t, base: s.base, key: tn.Key}
}

// response is a finished HTTP exchange.
type response struct {
	*http.Response
	body []byte
}

func (r response) json(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decode %s body %q: %v", r.Request.URL.Path, r.body, err)
	}
}

// problem decodes an application/problem+json body.
func (r response) problem(t testing.TB) map[string]any {
	t.Helper()
	if ct := r.Header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("Content-Type = %q, want application/problem+json (status %d, body %s)", ct, r.StatusCode, r.body)
	}
	var p map[string]any
	r.json(t, &p)
	return p
}

// do sends a request; body is marshalled unless it is a string or []byte.
func (c *client) do(method, path string, body any, headers ...string) response {
	c.t.Helper()
	var rd io.Reader
	var raw []byte // the body sent, for checkOpenAPI
	switch b := body.(type) {
	case nil:
	case string:
		rd, raw = strings.NewReader(b), []byte(b)
	case []byte:
		rd, raw = bytes.NewReader(b), b
	default:
		j, err := json.Marshal(b)
		if err != nil {
			c.t.Fatal(err)
		}
		rd, raw = bytes.NewReader(j), j
	}
	req, err := http.NewRequest(method, c.base+path, rd)
	if err != nil {
		c.t.Fatal(err)
	}
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		c.t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	checkOpenAPI(c.t, req, raw, res, b) // openapi_test.go
	return response{Response: res, body: b}
}

// expect fails the test unless the response has the status.
func (r response) expect(t testing.TB, status int) response {
	t.Helper()
	if r.StatusCode != status {
		t.Fatalf("%s %s: status %d, want %d; body: %s", r.Request.Method, r.Request.URL.Path, r.StatusCode, status, r.body)
	}
	return r
}

// createSession creates a session and returns its id.
func (c *client) createSession(body any) string {
	c.t.Helper()
	out := c.createSessionVia(body) // aapclient_test.go
	if !strings.HasPrefix(out.SessionID, "sess_") {
		c.t.Fatalf("sessionId %q", out.SessionID)
	}
	return out.SessionID
}

// echoSession creates an echo session with the given server tools and
// client tools.
func (c *client) echoSession(serverTools []aap.ServerToolRef, clientTools ...string) string {
	c.t.Helper()
	req := map[string]any{"agent": map[string]any{"name": "echo", "tools": serverTools}}
	var tools []map[string]any
	for _, name := range clientTools {
		tools = append(tools, map[string]any{"name": name, "description": "client tool " + name,
			"parameters": map[string]any{"type": "object"}})
	}
	if tools != nil {
		req["tools"] = tools
	}
	return c.createSession(req)
}

// turn sends a stream "none" turn through aapclient (aapclient_test.go)
// and returns its response.
func (c *client) turn(sid string, body any) aap.TurnResponse {
	c.t.Helper()
	return c.turnVia(sid, body)
}

// say sends a user message with stream "none".
func (c *client) say(sid, text string) aap.TurnResponse {
	c.t.Helper()
	return c.turn(sid, map[string]any{"messages": []any{map[string]any{"role": "user", "content": text}}})
}

// sessionWithATurn makes an echo session with one ended turn and returns
// the ids of both: what tests of the routes about a turn need first.
func (c *client) sessionWithATurn() (sid, turnID string) {
	c.t.Helper()
	sid = c.echoSession(nil)
	c.say(sid, "hello")
	var turns v3.TurnList
	c.do("GET", "/sessions/"+sid+"/turns", nil).expect(c.t, http.StatusOK).json(c.t, &turns)
	if len(turns.Turns) == 0 {
		c.t.Fatal("no turn listed")
	}
	return sid, turns.Turns[0].TurnID
}

// history returns a session's history of the given type.
func (c *client) history(sid string, typ aap.HistoryType) []aap.Message {
	c.t.Helper()
	msgs, err := c.api().History(context.Background(), sid, typ) // aapclient_test.go
	if err != nil {
		c.t.Fatalf("GET /sessions/%s/history?type=%s: %v", sid, typ, err)
	}
	return msgs
}

// sseEvent is one event as it came over the wire.
type sseEvent struct {
	ID    string
	Event string
	Data  string
}

func (e sseEvent) parse(t testing.TB) aap.Event {
	t.Helper()
	ev, err := aap.ParseEvent(aap.EventType(e.Event), []byte(e.Data))
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

// openStream posts a streaming turn and returns the live response.
func (c *client) openStream(sid string, body any, headers ...string) *http.Response {
	c.t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest("POST", c.base+"/sessions/"+sid+"/turns", bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+c.key)
	req.Header.Set("Accept", "text/event-stream")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	checkOpenAPIStream(c.t, req, b, res) // openapi_test.go
	return res
}

// stream posts a streaming turn and reads every event to the end.
func (c *client) stream(sid string, body any) (*http.Response, []sseEvent) {
	c.t.Helper()
	res := c.openStream(sid, body)
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(res.Body)
		c.t.Fatalf("stream: status %d: %s", res.StatusCode, b)
	}
	return res, readEvents(c.t, bufio.NewReader(res.Body), -1)
}

// readEvents reads SSE events until EOF or, if n >= 0, n events.
func readEvents(t testing.TB, r *bufio.Reader, n int) []sseEvent {
	t.Helper()
	var (
		events []sseEvent
		cur    sseEvent
	)
	for n < 0 || len(events) < n {
		line, err := r.ReadString('\n')
		if err != nil {
			if err != io.EOF {
				t.Fatalf("read stream: %v", err)
			}
			return events
		}
		line = strings.TrimRight(line, "\r\n")
		switch {
		case line == "":
			if cur.Event != "" || cur.Data != "" {
				events = append(events, cur)
			}
			cur = sseEvent{}
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "id: "):
			cur.ID = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "event: "):
			cur.Event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			cur.Data = strings.TrimPrefix(line, "data: ")
		}
	}
	return events
}

// eventTypes lists the events' types.
func eventTypes(events []sseEvent) []string {
	out := make([]string, len(events))
	for i, e := range events {
		out[i] = e.Event
	}
	return out
}

// user is a user message body.
func user(text string) map[string]any {
	return map[string]any{"messages": []any{map[string]any{"role": "user", "content": text}}}
}

// streamUser is a user message body with a stream mode.
func streamUser(mode, text string) map[string]any {
	b := user(text)
	b["stream"] = mode
	return b
}

// toolCalls returns the tool_use blocks of the messages.
func toolCalls(msgs []aap.Message) []aap.ToolCall {
	var calls []aap.ToolCall
	for _, m := range msgs {
		calls = append(calls, m.ToolCalls()...)
	}
	return calls
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t testing.TB, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

var _ = store.ErrNotFound

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }
