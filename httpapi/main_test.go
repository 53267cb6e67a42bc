package httpapi

import (
	"bufio"
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"

	"github.com/gorilla/mux"

	"github.com/aapd/aapd/agents"
	"github.com/aapd/aapd/agents/echo"
	"github.com/aapd/aapd/auth"
	"github.com/aapd/aapd/store"
	"github.com/aapd/aapd/store/storetest"
)

func TestMain(m *testing.M) { os.Exit(storetest.Main(m)) }

// testServer is a Server over a store, behind a real HTTP listener, with
// its log lines kept for the test to read.
type testServer struct {
	*Server
	URL  string
	logs *logBuffer
}

// newTestServer serves st through the edge with testDoor; it runs no turn
// worker until a turn starts, and stops when the test ends.
func newTestServer(t *testing.T, st *store.Store, edit ...func(*Config)) *testServer {
	t.Helper()
	registry, err := agents.NewRegistry(echo.NewAgent())
	if err != nil {
		t.Fatal(err)
	}
	logs := &logBuffer{}
	logger := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	cfg := Config{
		Store: st, Logger: logger, Doors: []Door{testDoor{st}},
		Runner: agents.NewRunner(agents.RunnerConfig{Store: st, Agents: registry, Owner: func() int32 { return 0 }, Logger: logger}),
	}
	for _, e := range edit {
		e(&cfg)
	}
	s := New(cfg)
	hs := httptest.NewServer(s)
	t.Cleanup(func() {
		hs.Close()
		s.Close()
	})
	return &testServer{Server: s, URL: hs.URL, logs: logs}
}

// logBuffer collects JSON log lines; it is safe for concurrent use.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// lines returns the log lines written so far, decoded.
func (b *logBuffer) lines(t *testing.T) []map[string]any {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(b.buf.Bytes()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var line map[string]any
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("log line %q: %v", sc.Text(), err)
		}
		out = append(out, line)
	}
	return out
}

// testDoor stands in for a protocol in the edge's own tests: a few routes
// that read a body or the store through the edge, so that what the edge
// does around a door (credentials, limits, body timeouts, metrics, logs)
// is tested without one.
type testDoor struct{ st *store.Store }

func (d testDoor) Mount(r *mux.Router, e Edge) {
	const read, write = auth.ScopeSessionsRead, auth.ScopeSessionsWrite
	r.Handle("/meta", e.Meta(func(w http.ResponseWriter, _ *http.Request) error {
		return WriteJSON(w, http.StatusOK, map[string]any{"agents": []any{}})
	})).Methods(http.MethodGet)
	r.Handle("/sessions", e.Guard(read, func(w http.ResponseWriter, r *http.Request) error {
		page, err := d.st.SessionList(r.Context(), store.SessionListParams{TenantID: TenantOf(r), Limit: 10})
		if err != nil {
			return err
		}
		return WriteJSON(w, http.StatusOK, map[string]int{"sessions": len(page.Sessions)})
	})).Methods(http.MethodGet)
	r.Handle("/sessions", e.Guard(write, func(w http.ResponseWriter, r *http.Request) error {
		body, err := e.ReadBody(w, r)
		if err != nil {
			return err
		}
		var v map[string]any
		if err := e.Decode(body, &v); err != nil {
			return err
		}
		return WriteJSON(w, http.StatusCreated, v)
	})).Methods(http.MethodPost)
	r.Handle("/sessions/{id}", e.Guard(read, func(w http.ResponseWriter, r *http.Request) error {
		sess, err := d.st.SessionGetOwned(r.Context(), TenantOf(r), OwnerOf(r), mux.Vars(r)["id"])
		if err != nil {
			return err
		}
		return WriteJSON(w, http.StatusOK, map[string]string{"sessionId": sess.ID})
	})).Methods(http.MethodGet)
	r.Handle("/sessions/{id}/turns", e.Guard(write, func(w http.ResponseWriter, r *http.Request) error {
		return NotFound("no such session")
	})).Methods(http.MethodPost)
}
