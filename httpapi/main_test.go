package httpapi

import (
	"bufio"
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"os"
	"sync"
	"testing"

	"github.com/aapd/aapd/agents"
	"github.com/aapd/aapd/agents/echo"
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

// newTestServer serves st with the echo agent; it runs no turn worker
// until a turn starts, and stops when the test ends.
func newTestServer(t *testing.T, st *store.Store, edit ...func(*Config)) *testServer {
	t.Helper()
	registry, err := agents.NewRegistry(echo.NewAgent())
	if err != nil {
		t.Fatal(err)
	}
	logs := &logBuffer{}
	logger := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	cfg := Config{
		Store: st, Agents: registry, Logger: logger,
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
