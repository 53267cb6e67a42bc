package aapclient_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/aapd/aapd/aapclient"
	"github.com/aapd/aapd/agents"
	"github.com/aapd/aapd/agents/echo"
	"github.com/aapd/aapd/httpapi"
	v3 "github.com/aapd/aapd/httpapi/v3"
	"github.com/aapd/aapd/store"
	"github.com/aapd/aapd/store/storetest"
)

func TestMain(m *testing.M) { os.Exit(storetest.Main(m)) }

// testServer is a real aapd API (the echo agent, a turn runner, an instance
// holding its liveness lock) on a loopback listener, over the package's test
// database. It is wired the way cmd/aapd's Main is, minus flags and
// configuration files.
type testServer struct {
	URL   string
	Store *store.Store
}

// startServer starts a server that stops when the test ends.
func startServer(t testing.TB) *testServer {
	t.Helper()
	ctx := context.Background()
	st := storetest.Open(t)
	registry, err := agents.NewRegistry(echo.NewAgent())
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	var inst *store.Instance // set before the first request, read by turns
	runner := agents.NewRunner(agents.RunnerConfig{Store: st, Agents: registry, Logger: logger,
		Owner: func() int32 { return inst.ID() }})
	api := httpapi.New(httpapi.Config{Store: st, Runner: runner, Logger: logger,
		Doors: []httpapi.Door{v3.New(v3.Config{Store: st, Agents: registry, Runner: runner})}})
	inst, err = st.StartInstance(ctx, store.InstanceParams{
		Channels: []string{store.CancelChannel, store.KeyRevokedChannel},
		OnNotify: func(n store.Notification) {
			runner.Notify(n)
			api.Notify(n)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(api)
	t.Cleanup(func() {
		hs.CloseClientConnections()
		hs.Close()
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := runner.Shutdown(sctx); err != nil {
			t.Errorf("runner shutdown: %v", err)
		}
		api.Close()
		inst.Close()
	})
	return &testServer{URL: hs.URL, Store: st}
}

// client returns a client acting as a new tenant of the server.
func (s *testServer) client(t testing.TB, opts ...aapclient.Option) *aapclient.Client {
	t.Helper()
	tn := storetest.NewTenant(t, s.Store)
	c, err := aapclient.New(s.URL, append([]aapclient.Option{aapclient.WithAPIKey(tn.Key)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// exampleTB lets the examples start a server with the tests' helpers,
// outside a test: a failure panics, and stop runs the cleanups.
type exampleTB struct {
	testing.TB // nil: only the methods below are called
	cleanups   []func()
}

func (*exampleTB) Helper()                   {}
func (*exampleTB) Name() string              { return "Example" }
func (*exampleTB) Fatal(args ...any)         { panic(fmt.Sprint(args...)) }
func (*exampleTB) Fatalf(f string, a ...any) { panic(fmt.Sprintf(f, a...)) }
func (*exampleTB) Errorf(f string, a ...any) { panic(fmt.Sprintf(f, a...)) }
func (e *exampleTB) Cleanup(f func())        { e.cleanups = append(e.cleanups, f) }

// exampleServer starts a server for an example and returns its URL, an API
// key of a new tenant, and the function that stops it.
func exampleServer() (baseURL, apiKey string, stop func()) {
	tb := &exampleTB{}
	srv := startServer(tb)
	tn := storetest.NewTenant(tb, srv.Store)
	return srv.URL, tn.Key, func() {
		for i := len(tb.cleanups) - 1; i >= 0; i-- {
			tb.cleanups[i]()
		}
	}
}

// recorder is a RoundTripper that records the requests it sends and, when
// told to, cuts event streams short after a number of bytes by closing
// their connection: the client sees a connection dropped mid-stream.
type recorder struct {
	base http.RoundTripper
	mu   sync.Mutex
	sent []sentRequest
	cuts []int // byte counts after which the next event streams are cut
}

// sentRequest is what the recorder saw of a request and its answer.
type sentRequest struct {
	Method, Path   string
	IdempotencyKey string
	LastEventID    string
	Status         int
}

func newRecorder(cuts ...int) *recorder {
	return &recorder{base: http.DefaultTransport, cuts: cuts}
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	res, err := r.base.RoundTrip(req)
	r.mu.Lock()
	defer r.mu.Unlock()
	s := sentRequest{Method: req.Method, Path: req.URL.Path,
		IdempotencyKey: req.Header.Get("Idempotency-Key"), LastEventID: req.Header.Get("Last-Event-ID")}
	if err == nil {
		s.Status = res.StatusCode
		if res.Header.Get("Content-Type") == "text/event-stream" && len(r.cuts) > 0 {
			res.Body = &cutBody{rc: res.Body, left: r.cuts[0]}
			r.cuts = r.cuts[1:]
		}
	}
	r.sent = append(r.sent, s)
	return res, err
}

// requests returns the requests sent so far.
func (r *recorder) requests() []sentRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]sentRequest(nil), r.sent...)
}

// cutBody passes left bytes of a body, then closes it (which closes its
// connection) and fails as a dropped connection does.
type cutBody struct {
	rc   io.ReadCloser
	left int
}

func (b *cutBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		b.rc.Close()
		return 0, io.ErrUnexpectedEOF
	}
	if len(p) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= n
	return n, err
}

func (b *cutBody) Close() error { return b.rc.Close() }
