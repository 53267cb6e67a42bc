package admin_test

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aapd/aapd/agents"
	"github.com/aapd/aapd/agents/echo"
	"github.com/aapd/aapd/httpapi"
	"github.com/aapd/aapd/httpapi/admin"
	v3 "github.com/aapd/aapd/httpapi/v3"
	"github.com/aapd/aapd/store"
	"github.com/aapd/aapd/store/storetest"
)

func TestMain(m *testing.M) { os.Exit(storetest.Main(m)) }

// fixture is the whole HTTP API (AAP and admin) of one process over the
// package's test database, with its log lines kept.
type fixture struct {
	t     *testing.T
	st    *store.Store
	url   string
	token string
	logs  *logBuffer
}

// newFixture serves the AAP API with the admin API mounted, as aapd serve
// does. edit adjusts the admin service's configuration.
func newFixture(t *testing.T, edit ...func(*admin.Config)) *fixture {
	t.Helper()
	st := storetest.Open(t)
	logs := &logBuffer{}
	logger := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	registry, err := agents.NewRegistry(echo.NewAgent())
	if err != nil {
		t.Fatal(err)
	}
	var api *httpapi.Server
	cfg := admin.Config{Store: st, Logger: logger, Actor: "admin-api", Notify: func(n store.Notification) { api.Notify(n) }}
	for _, e := range edit {
		e(&cfg)
	}
	token := randomToken()
	h, err := admin.NewHandler(admin.NewService(cfg), token)
	if err != nil {
		t.Fatal(err)
	}
	runner := agents.NewRunner(agents.RunnerConfig{Store: st, Agents: registry, Owner: func() int32 { return 0 }, Logger: logger})
	api = httpapi.New(httpapi.Config{
		Store: st, Logger: logger, Admin: h, Runner: runner,
		Doors: []httpapi.Door{v3.New(v3.Config{Store: st, Agents: registry, Runner: runner})},
	})
	hs := httptest.NewServer(api)
	t.Cleanup(func() {
		hs.Close()
		api.Close()
	})
	return &fixture{t: t, st: st, url: hs.URL, token: token, logs: logs}
}

func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func uniqueName(prefix string) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return prefix + "-" + hex.EncodeToString(b)
}

// response is a finished exchange.
type response struct {
	status int
	header http.Header
	body   []byte
}

// call sends a request with a bearer credential ("" for none); body is
// marshalled unless it is a string.
func call(t *testing.T, method, url, bearer string, body any) response {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{status: res.StatusCode, header: res.Header, body: b}
}

// admin calls the admin API with the operator token.
func (f *fixture) admin(method, path string, body any) response {
	f.t.Helper()
	return call(f.t, method, f.url+admin.Prefix+path, f.token, body)
}

// aap calls the AAP API with an API key.
func (f *fixture) aap(method, path, key string, body any) response {
	f.t.Helper()
	return call(f.t, method, f.url+path, key, body)
}

// expect fails the test unless the status is want; it returns r.
func (r response) expect(t *testing.T, want int) response {
	t.Helper()
	if r.status != want {
		t.Fatalf("status %d, want %d; body %s", r.status, want, r.body)
	}
	return r
}

func (r response) json(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decode %q: %v", r.body, err)
	}
}

// problem checks a problem response: its status, its type slug, and that
// its detail (or field) mentions want.
func (r response) problem(t *testing.T, status int, slug, want string) map[string]any {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d; body %s", r.status, status, r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("Content-Type %q, want application/problem+json; body %s", ct, r.body)
	}
	var p map[string]any
	r.json(t, &p)
	if p["type"] != httpapi.ProblemTypeBase+slug || p["status"] != float64(status) {
		t.Errorf("problem %v, want type %s", p, slug)
	}
	detail, _ := p["detail"].(string)
	field, _ := p["field"].(string)
	if !strings.Contains(detail, want) && field != want {
		t.Errorf("problem detail %q (field %q) does not say %q", detail, field, want)
	}
	return p
}

// tenant creates a tenant through the admin API.
func (f *fixture) tenant(prefix string) admin.Tenant {
	f.t.Helper()
	var t admin.Tenant
	f.admin("POST", "/tenants", map[string]string{"name": uniqueName(prefix)}).expect(f.t, http.StatusCreated).json(f.t, &t)
	return t
}

// key creates a key of a tenant through the admin API.
func (f *fixture) key(tenant string, body any) admin.CreatedKey {
	f.t.Helper()
	var k admin.CreatedKey
	f.admin("POST", "/tenants/"+tenant+"/keys", body).expect(f.t, http.StatusCreated).json(f.t, &k)
	return k
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

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// audits returns the audit lines logged so far, decoded.
func (b *logBuffer) audits(t *testing.T) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(b.String()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var line map[string]any
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("log line %q: %v", sc.Text(), err)
		}
		if line["msg"] == "audit" {
			out = append(out, line)
		}
	}
	return out
}

// waitFor polls cond until it holds, or fails the test after within.
func waitFor(t *testing.T, what string, within time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
