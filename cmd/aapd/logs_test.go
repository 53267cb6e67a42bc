package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aapd/aapd/httpapi"
	"github.com/aapd/aapd/store/storetest"
)

// Raw requests in this file: the X-Request-Id header is what is under test.

// lockedBuffer collects log lines written from many goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// lines decodes the JSON lines written so far.
func (b *lockedBuffer) lines(t *testing.T) []map[string]any {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(b.buf.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q is not JSON: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

// find returns the first line for which match is true, or nil.
func (b *lockedBuffer) find(t *testing.T, match func(map[string]any) bool) map[string]any {
	for _, l := range b.lines(t) {
		if match(l) {
			return l
		}
	}
	return nil
}

// A request's lines, the access line written after its handler returned
// included, carry its request id, tenant, session and turn; so does a line
// its turn's worker writes after the request has gone.
func TestLogLinesNameTheirRequest(t *testing.T) {
	logs := &lockedBuffer{}
	m, err := Start(context.Background(), Config{
		Addr: "127.0.0.1:0", DatabaseURL: storetest.URL(t), NoMigrate: true, Workers: 4,
		Lease: 30 * time.Second, DrainTimeout: 5 * time.Second, MaxBodyBytes: 1 << 20,
	}, newLogger(logs, slog.LevelInfo), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Shutdown() })
	s := &testServer{Main: m, base: "http://" + m.Addr()}
	c, tn := s.newTenantWithID(t)
	sid := c.echoSession(nil)

	r := c.do("POST", "/sessions/"+sid+"/turns", user("/error boom"), "X-Request-Id", "logs-test-1").expect(t, http.StatusOK)
	turn := r.Header.Get(httpapi.TurnIDHeader)
	want := map[string]any{"request_id": "logs-test-1", "tenant": tn.ID, "session": sid, "turn": turn}

	var access, worker map[string]any
	waitFor(t, "the access log line", 10*time.Second, func() bool {
		access = logs.find(t, func(l map[string]any) bool { return l["msg"] == "request" && l["request_id"] == "logs-test-1" })
		return access != nil
	})
	worker = logs.find(t, func(l map[string]any) bool { return l["msg"] == "turn ended with an error" })
	if worker == nil {
		t.Fatal("no worker line for the failed turn")
	}
	for name, line := range map[string]map[string]any{"access": access, "worker": worker} {
		for k, v := range want {
			if line[k] != v {
				t.Errorf("%s line: %s = %v, want %v (%v)", name, k, line[k], v, line)
			}
		}
	}
	if access["status"] != float64(http.StatusOK) || access["bytes"] != float64(len(r.body)) || access["duration_ms"] == nil ||
		access["route"] != "/sessions/{id}/turns" {
		t.Errorf("access line: %v (body of %d bytes)", access, len(r.body))
	}

	// A request id the client sends that is not a sane token is replaced,
	// and the one generated is echoed and logged.
	r = c.do("GET", "/sessions/"+sid, nil, "X-Request-Id", "not a token\u00e9").expect(t, http.StatusOK)
	id := r.Header.Get("X-Request-Id")
	if id == "" || strings.Contains(id, " ") {
		t.Fatalf("generated request id %q", id)
	}
	waitFor(t, "the second access line", 10*time.Second, func() bool {
		l := logs.find(t, func(l map[string]any) bool { return l["msg"] == "request" && l["request_id"] == id })
		return l != nil && l["session"] == sid && l["tenant"] == tn.ID && l["turn"] == nil
	})
}
