package webhooks_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/aapd/aapd/store"
	"github.com/aapd/aapd/store/storetest"
	"github.com/aapd/aapd/webhooks"
)

// Every request is Standard Webhooks v1: webhook-id (the event's id),
// webhook-timestamp, webhook-signature "v1,<base64 HMAC-SHA256 of
// id.timestamp.body>", checked here with the Standard Webhooks library;
// the body is {"type","timestamp","data"}, naming the tenant, session,
// turn, status, stop reason and usage, and no message content.
func TestWebhookRequestsAreStandardWebhooksV1(t *testing.T) {
	t.Parallel()
	f := newFixture(t, newReceiver(t, nil))
	ref := storetest.CompletedTurn(t, f.st, f.tenant.ID)
	d := f.onlyDelivery(t)
	waitFor(t, "the delivery", 5*time.Second, func() bool { return f.delivery(t, d.Event.ID).State == store.WebhookDelivered })

	got := f.rcv.requests()
	if len(got) != 1 {
		t.Fatalf("%d requests, want 1", len(got))
	}
	req := got[0]
	wh, err := standardwebhooks.NewWebhook(f.secret)
	if err != nil {
		t.Fatal(err)
	}
	if err := wh.Verify(req.body, req.header); err != nil {
		t.Errorf("the signature does not verify: %v (headers %v)", err, req.header)
	}
	other, _ := standardwebhooks.NewWebhook(newSecret(t))
	if err := other.Verify(req.body, req.header); !errors.Is(err, standardwebhooks.ErrNoMatchingSignature) {
		t.Errorf("another secret verifies the request: %v", err)
	}
	if id := req.header.Get("webhook-id"); id != d.Event.ID || !strings.HasPrefix(id, "evt_") {
		t.Errorf("webhook-id %q, want the event's id %s", id, d.Event.ID)
	}
	ts, err := strconv.ParseInt(req.header.Get("webhook-timestamp"), 10, 64)
	if err != nil || time.Since(time.Unix(ts, 0)).Abs() > time.Minute {
		t.Errorf("webhook-timestamp %q", req.header.Get("webhook-timestamp"))
	}
	if sig := req.header.Get("webhook-signature"); !strings.HasPrefix(sig, "v1,") || strings.Contains(sig, " ") {
		t.Errorf("webhook-signature %q, want one v1 signature", sig)
	}
	if ct := req.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	var body map[string]any
	if err := json.Unmarshal(req.body, &body); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"type": "turn.completed", "timestamp": d.Event.OccurredAt.UTC().Format(time.RFC3339Nano),
		"data": map[string]any{"tenant": f.tenant.Name, "sessionId": ref.SessionID, "turnId": ref.TurnID, "status": "completed",
			"stopReason": "end_turn", "usage": map[string]any{"inputTokens": 5.0, "outputTokens": 2.0}},
	}
	if fmt.Sprint(body) != fmt.Sprint(want) {
		t.Errorf("body %s,\nwant %v", req.body, want)
	}
	if strings.Contains(string(req.body), `"hi"`) {
		t.Errorf("the body holds the turn's message: %s", req.body)
	}
	dl := f.delivery(t, d.Event.ID)
	if dl.Attempts != 1 || len(dl.Log) != 1 || dl.Log[0].StatusCode != http.StatusNoContent || dl.Log[0].Error != "" || dl.FinishedAt == nil {
		t.Errorf("delivery %+v", dl)
	}
	checkCounter(t, f, `aapd_webhook_attempts_total{result="success"}`, 1)
	checkCounter(t, f, `aapd_webhook_deliveries_total{outcome="delivered"}`, 1)
}

// A failing endpoint is tried again after 5 s, 5 min, 30 min, 2 h, 5 h,
// 10 h, 14 h, 20 h and 24 h, each moved by up to a tenth, then the
// delivery fails; every attempt carries the same event id and body. The
// clock is the test's: the three days pass at once.
func TestWebhookRetryScheduleRunsOnTheInjectedClock(t *testing.T) {
	t.Parallel()
	clk := &clock{now: time.Now().Add(time.Hour).Truncate(time.Microsecond)} // every delivery is due
	f := newFixture(t, newReceiver(t, func(_ int, w http.ResponseWriter) { w.WriteHeader(http.StatusInternalServerError) }),
		func(c *webhooks.Config) { c.Now = clk.Now })
	storetest.CompletedTurn(t, f.st, f.tenant.ID)
	d := f.onlyDelivery(t)
	start := clk.Now()
	for n := 1; n <= len(webhooks.Schedule)+1; n++ {
		waitFor(t, fmt.Sprintf("attempt %d", n), 5*time.Second, func() bool { return f.delivery(t, d.Event.ID).Attempts == n })
		dl := f.delivery(t, d.Event.ID)
		last := dl.Log[n-1]
		if !last.At.Equal(clk.Now()) || last.StatusCode != 500 || last.Error != "HTTP 500 Internal Server Error" {
			t.Errorf("attempt %d: %+v at %v", n, last, clk.Now())
		}
		if n > len(webhooks.Schedule) {
			if dl.State != store.WebhookFailed || dl.NextAttemptAt != nil {
				t.Errorf("after the last attempt: %s, next %v; want failed", dl.State, dl.NextAttemptAt)
			}
			break
		}
		step := webhooks.Schedule[n-1]
		if delay := dl.NextAttemptAt.Sub(last.At); dl.State != store.WebhookPending ||
			delay < step-step/10-time.Millisecond || delay > step+step/10+time.Millisecond {
			t.Fatalf("after attempt %d: %s, next in %v; want pending, next in %v ± 10%%", n, dl.State, delay, step)
		}
		// Not a moment before it is due.
		clk.set(dl.NextAttemptAt.Add(-time.Second))
		time.Sleep(100 * time.Millisecond)
		if got := len(f.rcv.requests()); got != n {
			t.Fatalf("%d requests before attempt %d was due", got, n+1)
		}
		clk.set(*dl.NextAttemptAt)
	}
	reqs := f.rcv.requests()
	if len(reqs) != len(webhooks.Schedule)+1 {
		t.Errorf("%d requests, want %d", len(reqs), len(webhooks.Schedule)+1)
	}
	wh, _ := standardwebhooks.NewWebhook(f.secret)
	for i, r := range reqs {
		if r.header.Get("webhook-id") != d.Event.ID || string(r.body) != string(reqs[0].body) {
			t.Errorf("request %d: id %s, body %s; want the event's id and body on every attempt", i+1, r.header.Get("webhook-id"), r.body)
		}
		if err := wh.VerifyIgnoringTimestamp(r.body, r.header); err != nil {
			t.Errorf("request %d: %v", i+1, err)
		}
	}
	e, err := f.st.WebhookEndpointGet(context.Background(), f.tenant.ID, f.endpoint.ID)
	if err != nil || e.DisabledAt != nil || e.FailingSince == nil || !e.FailingSince.Equal(start) {
		t.Errorf("endpoint after three days of failures: %+v, %v; want enabled, failing since %v", e, err, start)
	}
	checkCounter(t, f, `aapd_webhook_attempts_total{result="status"}`, float64(len(reqs)))
	checkCounter(t, f, `aapd_webhook_deliveries_total{outcome="failed"}`, 1)
}

// A 429 or 503 with Retry-After sets the next attempt's delay, bounded to
// 1 s – 24 h, instead of the schedule's step.
func TestWebhookRetryAfterSetsTheNextDelay(t *testing.T) {
	t.Parallel()
	clk := &clock{now: time.Now().Add(time.Hour).Truncate(time.Microsecond)} // every delivery is due
	f := newFixture(t, newReceiver(t, func(_ int, w http.ResponseWriter) {
		w.Header().Set("Retry-After", "120")
		w.WriteHeader(http.StatusTooManyRequests)
	}), func(c *webhooks.Config) { c.Now = clk.Now })
	storetest.CompletedTurn(t, f.st, f.tenant.ID)
	d := f.onlyDelivery(t)
	waitFor(t, "the first attempt", 5*time.Second, func() bool { return f.delivery(t, d.Event.ID).Attempts == 1 })
	dl := f.delivery(t, d.Event.ID)
	if got := dl.NextAttemptAt.Sub(dl.Log[0].At); got != 120*time.Second {
		t.Errorf("next attempt in %v, want 2m0s (Retry-After: 120)", got)
	}
}

// 410 Gone disables the endpoint at once, with an audit line, and fails
// its pending deliveries.
func TestWebhook410GoneDisablesTheEndpoint(t *testing.T) {
	t.Parallel()
	ready := make(chan struct{}) // both turns ended: both deliveries are queued
	f := newFixture(t, newReceiver(t, func(_ int, w http.ResponseWriter) {
		<-ready
		w.WriteHeader(http.StatusGone)
	}))
	storetest.CompletedTurn(t, f.st, f.tenant.ID)
	storetest.CompletedTurn(t, f.st, f.tenant.ID)
	close(ready)
	waitFor(t, "the endpoint's disabling", 5*time.Second, func() bool {
		e, err := f.st.WebhookEndpointGet(context.Background(), f.tenant.ID, f.endpoint.ID)
		return err == nil && e.DisabledAt != nil
	})
	e, _ := f.st.WebhookEndpointGet(context.Background(), f.tenant.ID, f.endpoint.ID)
	if e.DisabledReason != "the endpoint answered 410 Gone" {
		t.Errorf("disabled because %q", e.DisabledReason)
	}
	// Both fail: by the disabling, or (queued as it happened) at their claim.
	waitFor(t, "both deliveries to fail", 5*time.Second, func() bool {
		page, err := f.st.WebhookDeliveryList(context.Background(), f.tenant.ID, f.endpoint.ID, "", 10)
		return err == nil && len(page.Deliveries) == 2 &&
			page.Deliveries[0].State == store.WebhookFailed && page.Deliveries[1].State == store.WebhookFailed
	})
	checkCounter(t, f, `aapd_webhook_deliveries_total{outcome="failed"}`, 2)
	checkAudit(t, f, "the endpoint answered 410 Gone")
	// Nothing is queued for it any more.
	storetest.CompletedTurn(t, f.st, f.tenant.ID)
	if page, _ := f.st.WebhookDeliveryList(context.Background(), f.tenant.ID, f.endpoint.ID, "", 10); len(page.Deliveries) != 2 {
		t.Errorf("a disabled endpoint got a delivery: %d", len(page.Deliveries))
	}
}

// An endpoint whose every attempt failed for 5 days is disabled, with an
// audit line.
func TestWebhookEndpointFailingFor5DaysIsDisabled(t *testing.T) {
	t.Parallel()
	clk := &clock{now: time.Now().Add(time.Hour).Truncate(time.Microsecond)} // every delivery is due
	f := newFixture(t, newReceiver(t, func(_ int, w http.ResponseWriter) { w.WriteHeader(http.StatusBadGateway) }),
		func(c *webhooks.Config) { c.Now = clk.Now })
	storetest.CompletedTurn(t, f.st, f.tenant.ID)
	first := f.onlyDelivery(t)
	waitFor(t, "the first attempt", 5*time.Second, func() bool { return f.delivery(t, first.Event.ID).Attempts == 1 })
	// Five days later, the next event fails too.
	clk.set(clk.Now().Add(webhooks.FailingLimit))
	storetest.CompletedTurn(t, f.st, f.tenant.ID)
	waitFor(t, "the endpoint's disabling", 5*time.Second, func() bool {
		e, err := f.st.WebhookEndpointGet(context.Background(), f.tenant.ID, f.endpoint.ID)
		return err == nil && e.DisabledAt != nil
	})
	if got := f.delivery(t, first.Event.ID); got.State != store.WebhookFailed {
		t.Errorf("the first delivery: %s, want failed with its endpoint", got.State)
	}
	checkAudit(t, f, "every attempt failed for 5 days")
}

// Redirects are not followed: a 3xx is a failed attempt.
func TestWebhookRedirectsAreNotFollowed(t *testing.T) {
	t.Parallel()
	f := newFixture(t, newReceiver(t, func(n int, w http.ResponseWriter) {
		if n > 1 {
			w.WriteHeader(http.StatusNoContent) // the redirect's target, were it followed
			return
		}
		w.Header().Set("Location", "/elsewhere")
		w.WriteHeader(http.StatusFound)
	}))
	storetest.CompletedTurn(t, f.st, f.tenant.ID)
	d := f.onlyDelivery(t)
	waitFor(t, "the first attempt", 5*time.Second, func() bool { return f.delivery(t, d.Event.ID).Attempts == 1 })
	dl := f.delivery(t, d.Event.ID)
	if dl.State != store.WebhookPending || dl.Log[0].StatusCode != http.StatusFound || dl.Log[0].Error != "HTTP 302 Found" {
		t.Errorf("delivery %+v", dl)
	}
	if n := len(f.rcv.requests()); n != 1 {
		t.Errorf("%d requests: the redirect was followed", n)
	}
}

// After a rotation the previous secret keeps signing beside the new one:
// a receiver that holds either verifies the request.
func TestWebhookRotatedSecretSignsBesideTheNewOne(t *testing.T) {
	t.Parallel()
	f := newFixture(t, newReceiver(t, nil))
	fresh := newSecret(t)
	if _, err := f.st.WebhookEndpointRotateSecret(context.Background(), f.tenant.ID, f.endpoint.ID, fresh, 24*time.Hour); err != nil {
		t.Fatal(err)
	}
	storetest.CompletedTurn(t, f.st, f.tenant.ID)
	waitFor(t, "a request", 5*time.Second, func() bool { return len(f.rcv.requests()) == 1 })
	req := f.rcv.requests()[0]
	if sigs := strings.Split(req.header.Get("webhook-signature"), " "); len(sigs) != 2 {
		t.Errorf("webhook-signature %q, want two signatures", req.header.Get("webhook-signature"))
	}
	for _, s := range []string{f.secret, fresh} {
		wh, _ := standardwebhooks.NewWebhook(s)
		if err := wh.Verify(req.body, req.header); err != nil {
			t.Errorf("secret %s…: %v", s[:10], err)
		}
	}
}

// A redelivery sends the same event (id and body) again.
func TestWebhookRedeliveryKeepsTheEventID(t *testing.T) {
	t.Parallel()
	f := newFixture(t, newReceiver(t, nil))
	storetest.CompletedTurn(t, f.st, f.tenant.ID)
	d := f.onlyDelivery(t)
	waitFor(t, "the delivery", 5*time.Second, func() bool { return f.delivery(t, d.Event.ID).State == store.WebhookDelivered })
	if _, err := f.st.WebhookRedeliver(context.Background(), f.tenant.ID, f.endpoint.ID, d.Event.ID, time.Now()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the redelivery", 5*time.Second, func() bool { return len(f.rcv.requests()) == 2 })
	reqs := f.rcv.requests()
	if reqs[1].header.Get("webhook-id") != d.Event.ID || string(reqs[1].body) != string(reqs[0].body) {
		t.Errorf("redelivered %s %s; want %s %s", reqs[1].header.Get("webhook-id"), reqs[1].body, d.Event.ID, reqs[0].body)
	}
	waitFor(t, "the redelivery's record", 5*time.Second, func() bool {
		dl := f.delivery(t, d.Event.ID)
		return dl.State == store.WebhookDelivered && len(dl.Log) == 2
	})
}

// The deliverers of two replicas share the work and never send an event
// twice.
func TestWebhookDeliverersOfTwoReplicasNeverSendAnEventTwice(t *testing.T) {
	t.Parallel()
	f := newFixture(t, newReceiver(t, nil))
	other := webhooks.Start(webhooks.Config{Store: storetest.OpenURL(t, f.st.ConnString()), AllowPrivate: true, TLS: f.rcv.trust(), PollInterval: 20 * time.Millisecond})
	t.Cleanup(func() { other.Stop(context.Background()) })
	const turns = 60
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range turns / 4 {
				storetest.CompletedTurn(t, f.st, f.tenant.ID)
			}
		}()
	}
	wg.Wait()
	waitFor(t, "every delivery", 10*time.Second, func() bool { return len(f.rcv.requests()) >= turns })
	time.Sleep(200 * time.Millisecond) // ten polls: a delivery sent twice would show
	ids := map[string]int{}
	for _, r := range f.rcv.requests() {
		ids[r.header.Get("webhook-id")]++
	}
	for id, n := range ids {
		if n != 1 {
			t.Errorf("event %s sent %d times", id, n)
		}
	}
	if len(ids) != turns {
		t.Errorf("%d events, want %d", len(ids), turns)
	}
}

// No server-side request forgery: without --webhook-allow-private, a
// loopback address is refused where it is dialled, also when a name
// resolves to it, and the receiver gets nothing.
func TestWebhookPrivateAddressesAreRefusedWhereTheyAreDialled(t *testing.T) {
	t.Parallel()
	f := newFixture(t, newReceiver(t, nil), func(c *webhooks.Config) { c.AllowPrivate = false })
	// A name that resolves to loopback: no check of the URL would see it.
	port := f.rcv.srv.URL[strings.LastIndex(f.rcv.srv.URL, ":")+1:]
	named, err := f.st.WebhookEndpointCreate(context.Background(), store.WebhookEndpointCreateParams{
		TenantID: f.tenant.ID, URL: "https://localhost:" + port + "/hooks", Events: store.WebhookEventTypes, Secret: f.secret, Max: 20,
	})
	if err != nil {
		t.Fatal(err)
	}
	storetest.CompletedTurn(t, f.st, f.tenant.ID)
	for _, e := range []store.WebhookEndpoint{f.endpoint, named} {
		waitFor(t, "an attempt to "+e.URL, 5*time.Second, func() bool {
			page, err := f.st.WebhookDeliveryList(context.Background(), f.tenant.ID, e.ID, "", 1)
			return err == nil && len(page.Deliveries) == 1 && page.Deliveries[0].Attempts == 1
		})
		page, _ := f.st.WebhookDeliveryList(context.Background(), f.tenant.ID, e.ID, "", 1)
		if l := page.Deliveries[0].Log[0]; l.StatusCode != 0 || !strings.Contains(l.Error, "not a public address") {
			t.Errorf("%s: attempt %+v, want refused as not public", e.URL, l)
		}
	}
	if n := len(f.rcv.requests()); n != 0 {
		t.Errorf("the receiver got %d requests", n)
	}
	checkCounter(t, f, `aapd_webhook_attempts_total{result="refused"}`, 2)
}

// Stopping gives back the deliveries whose attempts are still running when
// the stop's time runs out: due again at once, no attempt counted.
func TestWebhookStopGivesBackAttemptsInFlight(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	defer close(release)
	rcv := newReceiver(t, func(_ int, w http.ResponseWriter) { <-release })
	f := newFixture(t, rcv)
	storetest.CompletedTurn(t, f.st, f.tenant.ID)
	waitFor(t, "a request", 5*time.Second, func() bool { return len(rcv.requests()) == 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	f.d.Stop(ctx)
	d := f.onlyDelivery(t)
	if d.State != store.WebhookPending || d.Attempts != 0 || len(d.Log) != 0 || d.NextAttemptAt.After(time.Now()) {
		t.Errorf("delivery after the stop: %+v; want pending, due, no attempt", d)
	}
}

// Every series of the deliverer is there, at zero, before anything
// happens.
func TestWebhookMetricsStartAtZero(t *testing.T) {
	t.Parallel()
	f := newFixture(t, newReceiver(t, nil))
	for _, s := range []string{
		`aapd_webhook_attempts_total{result="success"}`, `aapd_webhook_attempts_total{result="status"}`,
		`aapd_webhook_attempts_total{result="timeout"}`, `aapd_webhook_attempts_total{result="network"}`,
		`aapd_webhook_attempts_total{result="refused"}`,
		`aapd_webhook_deliveries_total{outcome="delivered"}`, `aapd_webhook_deliveries_total{outcome="failed"}`,
		`aapd_webhook_oldest_due_seconds`, `aapd_webhook_endpoints_disabled`,
	} {
		if _, ok := series(t, f)[s]; !ok {
			t.Errorf("no series %s", s)
		}
	}
	if _, ok := series(t, f)["aapd_webhook_delivery_lag_seconds_count"]; !ok {
		t.Error("no histogram aapd_webhook_delivery_lag_seconds")
	}
}

// series gathers the fixture's metrics as "name{label="value"}" → value.
func series(t *testing.T, f *fixture) map[string]float64 {
	t.Helper()
	families, err := f.registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, fam := range families {
		for _, m := range fam.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			name := fam.GetName()
			if len(labels) > 0 {
				name += "{" + strings.Join(labels, ",") + "}"
			}
			switch {
			case m.GetCounter() != nil:
				out[name] = m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				out[name] = m.GetGauge().GetValue()
			case m.GetHistogram() != nil:
				out[name+"_count"] = float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return out
}

// checkCounter waits for a series to reach want (an attempt is counted
// before it is recorded).
func checkCounter(t *testing.T, f *fixture, name string, want float64) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%s = %v (is %v)", name, want, series(t, f)[name]), 5*time.Second, func() bool { return series(t, f)[name] == want })
}

// checkAudit checks that the deliverer logged the disabling of the
// fixture's endpoint, for reason.
func checkAudit(t *testing.T, f *fixture, reason string) {
	t.Helper()
	waitFor(t, "the audit line", 5*time.Second, func() bool { return strings.Contains(f.logs.String(), `"msg":"audit"`) })
	for _, line := range strings.Split(f.logs.String(), "\n") {
		var l map[string]any
		if json.Unmarshal([]byte(line), &l) != nil || l["msg"] != "audit" {
			continue
		}
		if l["action"] != "webhook.disable" || l["actor"] != "deliverer" || l["tenant"] != f.tenant.Name ||
			l["target"] != f.endpoint.ID || l["reason"] != reason || l["level"] != "INFO" {
			t.Errorf("audit line %v", l)
		}
		return
	}
	t.Errorf("no audit line in %s", f.logs.String())
}

// A delivery whose deliverer died mid-attempt (its replica killed) is
// attempted again, with the same event id, once its claim has run out.
func TestWebhookClaimOfADeadDelivererRunsOut(t *testing.T) {
	t.Parallel()
	clk := &clock{now: time.Now().Add(-time.Hour)} // nothing is due yet for this deliverer
	f := newFixture(t, newReceiver(t, nil), func(c *webhooks.Config) { c.Now = clk.Now })
	storetest.CompletedTurn(t, f.st, f.tenant.ID)
	dead, err := f.st.WebhookDeliveriesClaim(context.Background(), f.tenant.ID, time.Now(), webhooks.DefaultTimeout+15*time.Second, 10)
	if err != nil || len(dead.Deliveries) != 1 {
		t.Fatalf("the dead replica's claim: %+v, %v", dead, err)
	}
	clk.set(dead.Until.Add(-time.Second))
	time.Sleep(100 * time.Millisecond)
	if n := len(f.rcv.requests()); n != 0 {
		t.Fatalf("%d requests while the dead replica's claim held", n)
	}
	clk.set(dead.Until)
	waitFor(t, "the delivery", 5*time.Second, func() bool { return f.delivery(t, dead.Deliveries[0].Event.ID).State == store.WebhookDelivered })
	if r := f.rcv.requests(); len(r) != 1 || r[0].header.Get("webhook-id") != dead.Deliveries[0].Event.ID {
		t.Errorf("requests %d", len(r))
	}
}
