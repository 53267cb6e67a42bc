package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/aapclient"
	"github.com/aapd/aapd/store"
	"github.com/aapd/aapd/store/storetest"
)

// Webhook deliveries with two replicas and a receiver on loopback; results
// and the command in docs/benchmarks.md ("Webhook deliveries").

// benchReceiver counts the webhook requests it gets and how long after
// its event each came (its body's timestamp: the turn's end, on the same
// machine's clock).
type benchReceiver struct {
	srv  *httptest.Server
	n    atomic.Int64
	mu   sync.Mutex
	lags []time.Duration
}

func newBenchReceiver(b *testing.B) *benchReceiver {
	r := &benchReceiver{}
	r.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var body struct {
			Timestamp time.Time `json:"timestamp"`
		}
		raw, _ := io.ReadAll(req.Body)
		if json.Unmarshal(raw, &body) == nil {
			lag := time.Since(body.Timestamp)
			r.mu.Lock()
			r.lags = append(r.lags, lag)
			r.mu.Unlock()
		}
		r.n.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	b.Cleanup(r.srv.Close)
	return r
}

// waitFor waits until the receiver has n requests.
func (r *benchReceiver) waitFor(b *testing.B, n int64, within time.Duration) {
	deadline := time.Now().Add(within)
	for r.n.Load() < n {
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d deliveries within %s", r.n.Load(), n, within)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// lagPercentiles returns the median and the 99th percentile of the lags.
func (r *benchReceiver) lagPercentiles() (p50, p99 time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := slices.Clone(r.lags)
	slices.Sort(l)
	if len(l) == 0 {
		return 0, 0
	}
	return l[len(l)/2], l[len(l)*99/100]
}

// webhookBench is two aapd processes on a database of their own, with a
// tenant whose one endpoint is a receiver on loopback.
type webhookBench struct {
	st       *store.Store
	tenant   storetest.Tenant
	endpoint store.WebhookEndpoint
	rcv      *benchReceiver
	replicas []*proc
}

func newWebhookBench(b *testing.B) *webhookBench {
	db := storetest.NewDatabase(b)
	w := &webhookBench{st: storetest.OpenURL(b, db), rcv: newBenchReceiver(b)}
	w.tenant = storetest.NewTenant(b, w.st)
	var err error
	w.endpoint, err = w.st.WebhookEndpointCreate(context.Background(), store.WebhookEndpointCreateParams{
		TenantID: w.tenant.ID, URL: w.rcv.srv.URL + "/hooks", Events: store.WebhookEventTypes, Secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", Max: 20,
	})
	if err != nil {
		b.Fatal(err)
	}
	hook := &hookReceiver{srv: w.rcv.srv}
	env := []string{"SSL_CERT_FILE=" + hook.certFile(b)}
	for range 2 {
		w.replicas = append(w.replicas, startProcEnv(b, db, env, "--webhook-allow-private", "--shutdown-delay", "0", "--log-level", "warn"))
	}
	return w
}

// BenchmarkWebhookDeliveries measures, with two replicas:
//
//   - drain: how fast they deliver a backlog (20,000 deliveries queued at
//     once): deliveries a second;
//   - turns: turns ending on both replicas (16 clients, stream "none"),
//     each delivered: the time from a turn's end to its delivery (p50,
//     p99), and deliveries a second.
func BenchmarkWebhookDeliveries(b *testing.B) {
	b.Run("drain", func(b *testing.B) {
		const backlog = 20_000
		w := newWebhookBench(b)
		b.ResetTimer()
		for b.Loop() {
			start := w.rcv.n.Load()
			began := time.Now()
			storetest.Exec(b, w.st.ConnString(), `INSERT INTO webhook_deliveries (tenant_id, endpoint_id, event_id, event_type, occurred_at, data, next_attempt_at)
				SELECT $1, $2, 'evt_' || lpad(to_hex(i), 16, '0') || substr(md5(random()::text), 1, 16), 'turn.completed', now(),
				       jsonb_build_object('sessionId', 'sess_bench', 'turnId', 'turn_' || i, 'status', 'completed'), now()
				FROM generate_series(1, $3) AS i`, w.tenant.ID, w.endpoint.ID, backlog)
			w.rcv.waitFor(b, start+backlog, 5*time.Minute)
			b.ReportMetric(backlog/time.Since(began).Seconds(), "deliveries/s")
		}
	})
	b.Run("turns", func(b *testing.B) {
		const clients, turnsEach = 16, 125
		w := newWebhookBench(b)
		b.ResetTimer()
		for b.Loop() {
			start := w.rcv.n.Load()
			began := time.Now()
			var wg sync.WaitGroup
			for i := range clients {
				wg.Add(1)
				go func() {
					defer wg.Done()
					// A plain client: the suite's checks of the OpenAPI
					// document would take the machine's CPU.
					api, err := aapclient.New(w.replicas[i%2].base, aapclient.WithAPIKey(w.tenant.Key),
						aapclient.WithRetryPolicy(aapclient.RetryPolicy{MaxAttempts: 1}))
					if err != nil {
						b.Error(err)
						return
					}
					ctx := context.Background()
					sess, err := api.CreateSession(ctx, aap.CreateSessionRequest{Agent: aap.AgentConfig{Name: "echo"}})
					if err != nil {
						b.Error(err)
						return
					}
					for range turnsEach {
						req := aap.TurnRequest{Stream: aap.StreamNone, Messages: []aap.Message{aap.UserMessage("hello")}}
						if _, err := api.SendTurn(ctx, sess.SessionID, req); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			w.rcv.waitFor(b, start+clients*turnsEach, time.Minute)
			b.ReportMetric(clients*turnsEach/time.Since(began).Seconds(), "deliveries/s")
		}
		p50, p99 := w.rcv.lagPercentiles()
		b.ReportMetric(float64(p50.Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(p99.Microseconds())/1000, "p99-ms")
	})
}
