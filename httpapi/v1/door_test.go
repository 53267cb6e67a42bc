package v1_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/agents"
	"github.com/aapd/aapd/agents/echo"
	"github.com/aapd/aapd/httpapi"
	v1 "github.com/aapd/aapd/httpapi/v1"
	v3 "github.com/aapd/aapd/httpapi/v3"
	"github.com/aapd/aapd/store/storetest"
)

// The door over a real httpapi.Server and Postgres, with agents the
// end-to-end suite cannot configure: "bare" declares no history, no
// client tools and the stream mode none alone. The end-to-end tests of
// every v1 rule are in cmd/aapd/v1_test.go.

func TestMain(m *testing.M) { os.Exit(storetest.Main(m)) }

type server struct {
	t   *testing.T
	url string
	key string
}

func newServer(t *testing.T, edit ...func(*agents.RunnerConfig)) *server {
	t.Helper()
	st := storetest.Open(t)
	bare := echo.NewAgent()
	bare.Info.Name = "bare"
	bare.Info.Capabilities = &aap.Capabilities{Stream: &aap.StreamCapabilities{None: &aap.Empty{}}}
	registry, err := agents.NewRegistry(echo.NewAgent(), bare)
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	rc := agents.RunnerConfig{Store: st, Agents: registry, Owner: func() int32 { return 0 }, Logger: logger}
	for _, e := range edit {
		e(&rc)
	}
	runner := agents.NewRunner(rc)
	s := httpapi.New(httpapi.Config{Store: st, Logger: logger, Runner: runner, Doors: []httpapi.Door{
		v3.New(v3.Config{Store: st, Agents: registry, Runner: runner}),
		v1.New(v1.Config{Sessions: st, Agents: registry, Runner: runner}),
	}})
	hs := httptest.NewServer(s)
	t.Cleanup(func() {
		hs.Close()
		s.Close()
	})
	return &server{t: t, url: hs.URL, key: storetest.NewTenant(t, st).Key}
}

// do sends a request and returns its status and body.
func (s *server) do(method, path, body string) (int, []byte) {
	s.t.Helper()
	req, err := http.NewRequest(method, s.url+path, strings.NewReader(body))
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+s.key)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		s.t.Fatal(err)
	}
	return res.StatusCode, b
}

func (s *server) expect(status int, method, path, body string) []byte {
	s.t.Helper()
	got, b := s.do(method, path, body)
	if got != status {
		s.t.Fatalf("%s %s: status %d, want %d: %s", method, path, got, status, b)
	}
	return b
}

// field returns the field a 400 problem names.
func field(t *testing.T, b []byte) string {
	t.Helper()
	var p struct{ Field string }
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatalf("problem %s: %v", b, err)
	}
	return p.Field
}

func (s *server) sessionIDs() []string {
	s.t.Helper()
	var list struct{ Sessions []string }
	if err := json.Unmarshal(s.expect(200, "GET", "/v1/sessions", ""), &list); err != nil {
		s.t.Fatal(err)
	}
	return list.Sessions
}

// Seed 004 (GET /session/:id): "If the agent declared
// capabilities.history.compacted or capabilities.history.full in GET
// /meta, the server must return the corresponding field(s). Otherwise the
// server may omit them." aapd omits them.
func TestV1HistoryIsInlineAsTheAgentDeclares(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	for _, tc := range []struct {
		agent string
		want  []string
	}{{"echo", []string{"compacted", "full"}}, {"bare", nil}} {
		var created struct{ SessionID string }
		json.Unmarshal(s.expect(201, "PUT", "/v1/session",
			`{"agent":{"name":"`+tc.agent+`"},"messages":[{"role":"user","content":"one"}]}`), &created)
		var got struct {
			History map[string][]aap.Message `json:"history"`
		}
		body := s.expect(200, "GET", "/v1/session/"+created.SessionID, "")
		if err := json.Unmarshal(body, &got); err != nil {
			t.Fatal(err)
		}
		if len(got.History) != len(tc.want) {
			t.Fatalf("%s: history = %s, want %v", tc.agent, body, tc.want)
		}
		for _, typ := range tc.want {
			h := got.History[typ]
			if len(h) != 2 || h[0].Content.PlainText() != "one" || h[1].Content.PlainText() != "Echo: one" {
				t.Errorf("%s: history.%s = %+v", tc.agent, typ, h)
			}
		}
	}
}

// Seed 004 (GET /meta, capabilities.stream): "If omitted, clients should
// assume only "none" is supported" — and a mode the agent does not declare
// is refused, before any session is made.
func TestV1StreamModeMustBeDeclared(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	b := s.expect(400, "PUT", "/v1/session", `{"agent":{"name":"bare"},"stream":"delta","messages":[{"role":"user","content":"hi"}]}`)
	if f := field(t, b); f != "stream" {
		t.Errorf("field = %q, want stream: %s", f, b)
	}
	if ids := s.sessionIDs(); len(ids) != 0 {
		t.Errorf("a refused PUT left sessions %v", ids)
	}
}

// Seed 004 (capabilities.application.tools): "if present, the agent
// accepts application-side tools in requests" — and if absent, it does not.
func TestV1ApplicationToolsNeedTheCapability(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	tools := `"tools":[{"name":"get_weather","description":"w","inputSchema":{"type":"object"}}]`
	b := s.expect(400, "PUT", "/v1/session", `{"agent":{"name":"bare"},"messages":[{"role":"user","content":"hi"}],`+tools+`}`)
	if f := field(t, b); f != "tools" {
		t.Errorf("field = %q, want tools: %s", f, b)
	}
	var created struct{ SessionID string }
	json.Unmarshal(s.expect(201, "PUT", "/v1/session", `{"agent":{"name":"bare"},"messages":[{"role":"user","content":"hi"}]}`), &created)
	b = s.expect(400, "POST", "/v1/session/"+created.SessionID, `{"messages":[{"role":"user","content":"hi"}],`+tools+`}`)
	if f := field(t, b); f != "tools" {
		t.Errorf("turn: field = %q, want tools: %s", f, b)
	}
	// The echo agent declares the capability: the same tools are taken.
	s.expect(201, "PUT", "/v1/session", `{"agent":{"name":"echo"},"messages":[{"role":"user","content":"hi"}],`+tools+`}`)
}

// A PUT whose first turn is refused after the checks (here by the tenant's
// limit of running turns) leaves no session behind: the client got no id
// to reach it with.
func TestV1CreateRefusedLeavesNoSession(t *testing.T) {
	t.Parallel()
	s := newServer(t, func(c *agents.RunnerConfig) {
		c.MaxRunningTurns = func(context.Context, string) int { return 1 }
	})
	// A turn that runs until the test has looked: its stream is held open.
	req, _ := http.NewRequest("PUT", s.url+"/v1/session", strings.NewReader(
		`{"agent":{"name":"echo"},"stream":"delta","messages":[{"role":"user","content":"/slow 50\n/words 20"}]}`))
	req.Header.Set("Authorization", "Bearer "+s.key)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	first, err := bufio.NewReader(res.Body).ReadString('\n')
	if err != nil || first != "event: session_start\n" {
		t.Fatalf("first line %q, %v", first, err)
	}
	before := s.sessionIDs()
	got, b := s.do("PUT", "/v1/session", `{"agent":{"name":"echo"},"messages":[{"role":"user","content":"hi"}]}`)
	if got != http.StatusTooManyRequests || !bytes.Contains(b, []byte("running-turns-limit")) {
		t.Fatalf("second PUT: %d %s, want 429 running-turns-limit", got, b)
	}
	if after := s.sessionIDs(); len(after) != len(before) || len(after) != 1 {
		t.Errorf("sessions %v after the refused PUT, want only %v", after, before)
	}
}
