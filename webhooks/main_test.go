package webhooks_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/aapd/aapd/store"
	"github.com/aapd/aapd/store/storetest"
	"github.com/aapd/aapd/webhooks"
)

func TestMain(m *testing.M) { os.Exit(storetest.Main(m)) }

// request is a request a receiver got.
type request struct {
	header http.Header
	body   []byte
}

// receiver is a webhook receiver on loopback, over TLS, answering as
// answer says (204 when nil).
type receiver struct {
	srv    *httptest.Server
	mu     sync.Mutex
	got    []request
	answer func(n int, w http.ResponseWriter) // n counts requests from 1
}

func newReceiver(t *testing.T, answer func(n int, w http.ResponseWriter)) *receiver {
	t.Helper()
	r := &receiver{answer: answer}
	r.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.got = append(r.got, request{header: req.Header.Clone(), body: body})
		n := len(r.got)
		r.mu.Unlock()
		if r.answer == nil {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		r.answer(n, w)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// requests returns what the receiver got so far.
func (r *receiver) requests() []request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]request(nil), r.got...)
}

// trust is a TLS configuration that trusts the receiver's certificate.
func (r *receiver) trust() *tls.Config {
	pool := x509.NewCertPool()
	pool.AddCert(r.srv.Certificate())
	return &tls.Config{RootCAs: pool}
}

// clock is a clock the test moves.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// logBuffer collects log lines; it is safe for concurrent use.
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

// fixture is a tenant with an endpoint at a receiver, and a deliverer.
type fixture struct {
	st       *store.Store
	tenant   storetest.Tenant
	endpoint store.WebhookEndpoint
	secret   string
	rcv      *receiver
	d        *webhooks.Deliverer
	registry *prometheus.Registry
	logs     *logBuffer
}

// newFixture starts a deliverer for a new tenant whose endpoint is rcv;
// edit adjusts the deliverer's configuration.
func newFixture(t *testing.T, rcv *receiver, edit ...func(*webhooks.Config)) *fixture {
	t.Helper()
	// A database of its own: a deliverer serves every tenant of its
	// database, and those of parallel tests would serve this one's.
	st := storetest.OpenURL(t, storetest.NewDatabase(t))
	f := &fixture{st: st, tenant: storetest.NewTenant(t, st), rcv: rcv, registry: prometheus.NewRegistry(), logs: &logBuffer{}}
	f.secret = newSecret(t)
	var err error
	f.endpoint, err = st.WebhookEndpointCreate(context.Background(), store.WebhookEndpointCreateParams{
		TenantID: f.tenant.ID, URL: rcv.srv.URL + "/hooks", Events: store.WebhookEventTypes, Secret: f.secret, Max: 20,
	})
	if err != nil {
		t.Fatal(err)
	}
	cfg := webhooks.Config{
		Store: st, Logger: slog.New(slog.NewJSONHandler(f.logs, nil)), Registry: f.registry,
		AllowPrivate: true, TLS: rcv.trust(), PollInterval: 20 * time.Millisecond,
	}
	for _, e := range edit {
		e(&cfg)
	}
	f.d = webhooks.Start(cfg)
	t.Cleanup(func() { f.d.Stop(context.Background()) })
	return f
}

func newSecret(t *testing.T) string {
	t.Helper()
	s, err := webhooks.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// delivery reads the fixture endpoint's delivery of an event.
func (f *fixture) delivery(t *testing.T, eventID string) store.WebhookDelivery {
	t.Helper()
	page, err := f.st.WebhookDeliveryList(context.Background(), f.tenant.ID, f.endpoint.ID, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range page.Deliveries {
		if d.Event.ID == eventID {
			return d
		}
	}
	t.Fatalf("no delivery of event %s", eventID)
	return store.WebhookDelivery{}
}

// onlyDelivery waits for the endpoint's one delivery and returns it.
func (f *fixture) onlyDelivery(t *testing.T) store.WebhookDelivery {
	t.Helper()
	var page store.WebhookDeliveryPage
	waitFor(t, "a delivery", 5*time.Second, func() bool {
		var err error
		page, err = f.st.WebhookDeliveryList(context.Background(), f.tenant.ID, f.endpoint.ID, "", 100)
		return err == nil && len(page.Deliveries) == 1
	})
	return page.Deliveries[0]
}

// waitFor polls cond until it holds, or fails the test after within.
func waitFor(t *testing.T, what string, within time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
