package webhooks

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"time"

	"github.com/aapd/aapd/store"
)

// maxResponseRead bounds what is read of a receiver's answer (and thrown
// away), so its connection can be used again.
const maxResponseRead = 64 << 10

// outcome is an attempt's result, on its way to the recorder.
type outcome struct {
	tenantName string
	delivery   store.WebhookDelivery
	result     store.WebhookAttemptResult
	answer     answer
}

// attempt sends one claimed delivery and hands what came of it to the
// recorder.
func (d *Deliverer) attempt(c store.WebhookClaim, dl store.WebhookDelivery) {
	defer d.wg.Done()
	defer func() { d.freed <- struct{}{} }()
	target, ok := c.Targets[dl.EndpointID]
	if !ok {
		return // its endpoint was deleted as it was claimed, and the delivery with it
	}
	at := d.cfg.Now().Truncate(time.Microsecond) // as the database keeps it
	if target.Endpoint.DisabledAt != nil {
		// Disabled as the delivery was claimed: it fails, unsent.
		d.results <- outcome{tenantName: c.TenantName, delivery: dl, result: store.WebhookAttemptResult{
			Delivery: dl, State: store.WebhookFailed, Attempt: store.WebhookAttempt{At: at, Error: "not sent: the endpoint is disabled"},
		}}
		return
	}
	started := time.Now()
	a := d.send(target, c.TenantName, dl, at)
	latency := time.Since(started)
	if d.work.Err() != nil {
		// Stopped mid-attempt: give the delivery back, uncounted.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := d.st.WebhookDeliveryRelease(ctx, dl, d.cfg.Now()); err != nil {
			d.log.Warn("give back a webhook delivery", "tenant_id", dl.TenantID, "event", dl.Event.ID, "err", err)
		}
		return
	}
	v := decide(a, dl.Attempts+1, at, target.Endpoint.FailingSince, d.cfg.Rand)
	d.metrics.attempts.WithLabelValues(result(a)).Inc()
	d.results <- outcome{tenantName: c.TenantName, delivery: dl, answer: a, result: store.WebhookAttemptResult{
		Delivery: dl, State: v.state, NextAttemptAt: v.next, DisableEndpoint: v.disable,
		Attempt: store.WebhookAttempt{At: at, StatusCode: a.status, LatencyMS: latency.Milliseconds(), Error: describe(a, d.cfg.Timeout)},
	}}
}

// recordBatch bounds the attempts one recording writes.
const recordBatch = 256

// recorder records attempts' outcomes, as many at a time as have come
// while the previous recording was written: one transaction per tenant
// for them all, so a busy deliverer commits far less often than it
// attempts. It returns when results is closed and drained.
func (d *Deliverer) recorder() {
	defer close(d.recorded)
	for first := range d.results {
		batch := []outcome{first}
	more:
		for len(batch) < recordBatch {
			select {
			case o, ok := <-d.results:
				if !ok {
					break more
				}
				batch = append(batch, o)
			default:
				break more
			}
		}
		byTenant := map[string][]outcome{}
		for _, o := range batch {
			byTenant[o.delivery.TenantID] = append(byTenant[o.delivery.TenantID], o)
		}
		for tenantID, outcomes := range byTenant {
			d.record(tenantID, outcomes)
		}
	}
}

// record records a tenant's outcomes, trying again for a while if the
// database is unavailable (within the claims' lease), then counts them.
func (d *Deliverer) record(tenantID string, outcomes []outcome) {
	results := make([]store.WebhookAttemptResult, len(outcomes))
	for i, o := range outcomes {
		results[i] = o.result
	}
	deadline := time.Now().Add(d.cfg.claimLease() - d.cfg.Timeout)
	backoff := 100 * time.Millisecond
	var (
		rec store.WebhookRecorded
		err error
	)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		rec, err = d.st.WebhookAttemptsRecord(ctx, tenantID, results)
		cancel()
		if err == nil || !errors.Is(err, store.ErrUnavailable) || time.Now().Add(backoff).After(deadline) {
			break
		}
		time.Sleep(backoff)
		backoff = min(2*backoff, 5*time.Second)
	}
	if err != nil {
		// The claims run out and the deliveries are attempted again: their
		// receivers may get them twice, with the same webhook-id.
		d.log.Warn("record webhook attempts", "tenant_id", tenantID, "attempts", len(results), "err", err)
		return
	}
	if rec.OthersFailed > 0 {
		d.metrics.deliveries.WithLabelValues(outcomeFail).Add(float64(rec.OthersFailed))
	}
	for i, o := range outcomes {
		r := o.result
		if r.DisableEndpoint != "" {
			d.audits.LogAttrs(context.Background(), slog.LevelInfo, "audit",
				slog.String("action", "webhook.disable"), slog.String("actor", "deliverer"),
				slog.String("tenant", o.tenantName), slog.String("tenant_id", tenantID),
				slog.String("target", r.Delivery.EndpointID), slog.String("reason", r.DisableEndpoint))
		}
		if !rec.Recorded[i] {
			continue // redelivered, or failed with its endpoint's disabling, meanwhile
		}
		switch r.State {
		case store.WebhookDelivered:
			d.metrics.deliveries.WithLabelValues(outcomeDeliver).Inc()
			d.metrics.lag.Observe(max(d.cfg.Now().Sub(r.Delivery.Event.OccurredAt), 0).Seconds())
		case store.WebhookFailed:
			d.metrics.deliveries.WithLabelValues(outcomeFail).Inc()
			d.log.Warn("webhook delivery failed", "tenant_id", tenantID, "endpoint", r.Delivery.EndpointID,
				"event", r.Delivery.Event.ID, "attempts", r.Delivery.Attempts+1, "error", r.Attempt.Error)
		}
	}
}

// send makes one request of a delivery, at the time at.
func (d *Deliverer) send(t store.WebhookTarget, tenantName string, dl store.WebhookDelivery, at time.Time) answer {
	if t.SecretErr != nil {
		return answer{err: refusal{t.SecretErr}} // nothing is sent unsigned
	}
	u, err := url.Parse(t.Endpoint.URL)
	if err != nil || (u.Scheme != "https" && !(u.Scheme == "http" && d.cfg.AllowPrivate)) {
		return answer{err: refusal{fmt.Errorf("%s URLs are not sent to (https only, unless --webhook-allow-private)", u.Scheme)}}
	}
	body, err := Body(tenantName, dl.Event)
	if err != nil {
		return answer{err: err}
	}
	ctx, cancel := context.WithTimeout(d.work, d.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.Endpoint.URL, bytes.NewReader(body))
	if err != nil {
		return answer{err: refusal{err}}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "aapd-webhooks")
	if err := Sign(req.Header, t.Secrets, dl.Event.ID, at, body); err != nil {
		return answer{err: err}
	}
	res, err := d.client.Do(req)
	if err != nil {
		return answer{err: err}
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, maxResponseRead))
	return answer{status: res.StatusCode, retryAfter: res.Header.Get("Retry-After")}
}

// refusal is an attempt not made: its URL or address is not allowed.
type refusal struct{ error }

func (r refusal) Unwrap() error { return r.error }

// result names an attempt's result for the metrics.
func result(a answer) string {
	var r refusal
	switch {
	case a.err == nil && a.status >= 200 && a.status < 300:
		return resultSuccess
	case a.err == nil:
		return resultStatus
	case errors.As(a.err, &r) || errors.Is(a.err, ErrNotPublic):
		return resultRefused
	case errors.Is(a.err, context.DeadlineExceeded) || errors.Is(a.err, os.ErrDeadlineExceeded):
		return resultTimeout
	}
	return resultNetwork
}

// describe says why an attempt failed, for the delivery's log; "" if it
// succeeded.
func describe(a answer, timeout time.Duration) string {
	switch result(a) {
	case resultSuccess:
		return ""
	case resultStatus:
		return fmt.Sprintf("HTTP %d %s", a.status, http.StatusText(a.status))
	case resultTimeout:
		return fmt.Sprintf("no answer within %s", timeout)
	}
	var ue *url.Error
	if errors.As(a.err, &ue) {
		return ue.Err.Error() // without the method and URL, which the endpoint says
	}
	return a.err.Error()
}
