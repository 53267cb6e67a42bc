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

// attempt sends one claimed delivery and records what came of it.
func (d *Deliverer) attempt(c store.WebhookClaim, dl store.WebhookDelivery) {
	defer d.wg.Done()
	defer func() { d.freed <- struct{}{} }()
	target, ok := c.Targets[dl.EndpointID]
	if !ok {
		// Its endpoint was disabled as the delivery was claimed: the next
		// claim after this one's lease fails it.
		return
	}
	at := d.cfg.Now().Truncate(time.Microsecond) // as the database keeps it
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
	rec := store.WebhookAttemptResult{
		Delivery: dl, State: v.state, NextAttemptAt: v.next, DisableEndpoint: v.disable,
		Attempt: store.WebhookAttempt{At: at, StatusCode: a.status, LatencyMS: latency.Milliseconds(), Error: describe(a, d.cfg.Timeout)},
	}
	d.metrics.attempts.WithLabelValues(result(a)).Inc()
	recorded, othersFailed, err := d.record(rec)
	switch {
	case err != nil:
		// The claim runs out and the delivery is attempted again: its
		// receiver may get it twice, with the same webhook-id.
		d.log.Warn("record a webhook attempt", "tenant_id", dl.TenantID, "endpoint", dl.EndpointID, "event", dl.Event.ID, "err", err)
		return
	case !recorded:
		return // redelivered, or its endpoint disabled, meanwhile
	}
	switch v.state {
	case store.WebhookDelivered:
		d.metrics.deliveries.WithLabelValues(outcomeDeliver).Inc()
		d.metrics.lag.Observe(max(d.cfg.Now().Sub(dl.Event.OccurredAt), 0).Seconds())
	case store.WebhookFailed:
		d.metrics.deliveries.WithLabelValues(outcomeFail).Add(float64(1 + othersFailed))
		d.log.Warn("webhook delivery failed", "tenant_id", dl.TenantID, "endpoint", dl.EndpointID, "event", dl.Event.ID,
			"attempts", dl.Attempts+1, "error", rec.Attempt.Error)
	}
	if v.disable != "" {
		d.audits.LogAttrs(context.Background(), slog.LevelInfo, "audit",
			slog.String("action", "webhook.disable"), slog.String("actor", "deliverer"),
			slog.String("tenant", c.TenantName), slog.String("tenant_id", dl.TenantID),
			slog.String("target", dl.EndpointID), slog.String("reason", v.disable),
			slog.Int64("deliveries_failed", 1+othersFailed))
	}
}

// record records an attempt, trying again for a while if the database is
// unavailable (within the claim's lease).
func (d *Deliverer) record(r store.WebhookAttemptResult) (recorded bool, othersFailed int64, err error) {
	deadline := time.Now().Add(d.cfg.claimLease() - d.cfg.Timeout)
	backoff := 100 * time.Millisecond
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		recorded, othersFailed, err = d.st.WebhookAttemptRecord(ctx, r)
		cancel()
		if err == nil || !errors.Is(err, store.ErrUnavailable) || time.Now().Add(backoff).After(deadline) {
			return recorded, othersFailed, err
		}
		time.Sleep(backoff)
		backoff = min(2*backoff, 5*time.Second)
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
