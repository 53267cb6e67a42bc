package store_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/store"
	"github.com/aapd/aapd/store/storetest"
)

// newEndpoint registers an endpoint of the tenant listening for events.
func newEndpoint(t *testing.T, st *store.Store, tenantID string, events ...string) store.WebhookEndpoint {
	t.Helper()
	if events == nil {
		events = store.WebhookEventTypes
	}
	e, err := st.WebhookEndpointCreate(context.Background(), store.WebhookEndpointCreateParams{
		TenantID: tenantID, URL: "https://hooks.example/" + tenantID, Events: events, Secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", Max: 20,
	})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// deliveries lists every delivery of an endpoint, newest first.
func deliveries(t *testing.T, st *store.Store, e store.WebhookEndpoint) []store.WebhookDelivery {
	t.Helper()
	page, err := st.WebhookDeliveryList(context.Background(), e.TenantID, e.ID, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	return page.Deliveries
}

// A turn's end is queued for every enabled endpoint listening for its
// event, in the transaction that ends the turn, with one event id whatever
// the number of endpoints; the event's type follows how the turn ended.
func TestWebhookEventIsWrittenWithTheTurnsEnd(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t)
	ctx := context.Background()
	tn := storetest.NewTenant(t, st)
	all, other := newEndpoint(t, st, tn.ID), newEndpoint(t, st, tn.ID)
	onlyFailures := newEndpoint(t, st, tn.ID, store.WebhookTurnFailed)

	cases := []struct {
		name string
		p    store.TurnFinishParams
		want string
	}{
		{"completed", store.TurnFinishParams{Status: store.TurnCompleted, StopReason: aap.StopEndTurn, InputTokens: 7, OutputTokens: 3}, store.WebhookTurnCompleted},
		{"cancelled", store.TurnFinishParams{Status: store.TurnCancelled, StopReason: aap.StopEndTurn}, store.WebhookTurnCompleted},
		{"tool calls", store.TurnFinishParams{Status: store.TurnCompleted, StopReason: aap.StopToolUse,
			Pending: []aap.PendingToolCall{{ToolCall: aap.ToolCall{ToolCallID: "c1", Name: "lookup", Input: []byte(`{}`)}}}}, store.WebhookTurnRequiresAction},
		{"failed", store.TurnFinishParams{Status: store.TurnFailed, StopReason: aap.StopError, ErrorType: aap.TurnErrorModel, Error: "the model failed"}, store.WebhookTurnFailed},
	}
	for _, c := range cases {
		begun := storetest.BeginTurn(t, st, tn.ID)
		storetest.FinishTurn(t, st, begun, c.p)
		got := deliveries(t, st, all)[0]
		ev := got.Event
		if ev.Type != c.want || ev.Data.SessionID != begun.Turn.SessionID || ev.Data.TurnID != begun.Turn.ID ||
			ev.Data.Status != c.p.Status || ev.Data.StopReason != c.p.StopReason || got.State != store.WebhookPending {
			t.Errorf("%s: delivery %+v, want a pending %s of the turn", c.name, got, c.want)
		}
		if u := ev.Data.Usage; u == nil || u.InputTokens != c.p.InputTokens || u.OutputTokens != c.p.OutputTokens {
			t.Errorf("%s: usage %+v", c.name, u)
		}
		if (ev.Data.Error != nil) != (c.p.ErrorType != "") || (ev.Data.Error != nil && ev.Data.Error.Message != c.p.Error) {
			t.Errorf("%s: error %+v", c.name, ev.Data.Error)
		}
		if o := deliveries(t, st, other)[0]; o.Event.ID != ev.ID {
			t.Errorf("%s: event ids %s and %s for one event", c.name, ev.ID, o.Event.ID)
		}
	}
	if n := len(deliveries(t, st, all)); n != len(cases) {
		t.Errorf("%d deliveries, want %d", n, len(cases))
	}
	if got := deliveries(t, st, onlyFailures); len(got) != 1 || got[0].Event.Type != store.WebhookTurnFailed {
		t.Errorf("an endpoint of turn.failed only got %+v", got)
	}

	// A retried finish (its answer lost) queues nothing more.
	begun := storetest.BeginTurn(t, st, tn.ID)
	for range 2 {
		storetest.FinishTurn(t, st, begun, store.TurnFinishParams{Status: store.TurnCompleted, StopReason: aap.StopEndTurn})
	}
	if n := len(deliveries(t, st, all)); n != len(cases)+1 {
		t.Errorf("a finish written twice: %d deliveries, want %d", n, len(cases)+1)
	}
	// Nor does a finish refused because the turn lost its session.
	lost := storetest.BeginTurn(t, st, tn.ID)
	storetest.Exec(t, storetest.URL(t), `UPDATE sessions SET active_turn_id = NULL WHERE tenant_id = $1 AND id = $2`, tn.ID, lost.Turn.SessionID)
	if _, err := st.TurnFinish(ctx, store.TurnFinishParams{Ref: lost.Turn.Ref(), Step: 1, FirstSeq: lost.LastSeq + 1,
		Status: store.TurnCompleted, Events: []aap.Event{aap.TurnStart(), aap.TurnStop(aap.StopEndTurn)}}); !errors.Is(err, store.ErrClaimLost) {
		t.Fatalf("finish without the claim: %v", err)
	}
	if n := len(deliveries(t, st, all)); n != len(cases)+1 {
		t.Errorf("a refused finish: %d deliveries, want %d", n, len(cases)+1)
	}
}

// A tenant without endpoints pays no round trip for webhooks: a turn's end
// is still one round trip and one commit, and writes no delivery.
func TestWebhooksCostATenantWithoutEndpointsNoRoundTrip(t *testing.T) {
	t.Parallel()
	counter := &storetest.Counter{}
	st, err := store.Open(context.Background(), store.Config{DatabaseURL: storetest.URL(t), Tracer: counter})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	tn := storetest.NewTenant(t, st)
	begun := storetest.BeginTurn(t, st, tn.ID)
	counter.Reset()
	storetest.FinishTurn(t, st, begun, store.TurnFinishParams{Status: store.TurnCompleted, StopReason: aap.StopEndTurn})
	if trips, commits, stmts := counter.Counts(); trips != 1 || commits != 1 {
		t.Errorf("a turn's end: %d round trips, %d commits (%q), want 1 and 1", trips, commits, stmts)
	}
	var n int
	storetest.Scan(t, storetest.URL(t), `SELECT count(*) FROM webhook_deliveries WHERE tenant_id = $1`, []any{tn.ID}, &n)
	if n != 0 {
		t.Errorf("%d deliveries for a tenant without endpoints", n)
	}
	select {
	case id := <-st.WebhooksQueued():
		t.Errorf("tenant %s told of deliveries it has none of", id)
	default:
	}
}

// A disabled endpoint is sent nothing new; its process is told of queued
// deliveries at once.
func TestWebhookDisabledEndpointGetsNoEvent(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t)
	tn := storetest.NewTenant(t, st)
	e := newEndpoint(t, st, tn.ID)
	storetest.Exec(t, storetest.URL(t), `UPDATE webhook_endpoints SET disabled_at = now() WHERE tenant_id = $1 AND id = $2`, tn.ID, e.ID)
	storetest.FinishTurn(t, st, storetest.BeginTurn(t, st, tn.ID), store.TurnFinishParams{Status: store.TurnCompleted, StopReason: aap.StopEndTurn})
	if got := deliveries(t, st, e); len(got) != 0 {
		t.Errorf("a disabled endpoint got %d deliveries", len(got))
	}
	if _, err := st.WebhookEndpointEnable(context.Background(), tn.ID, e.ID); err != nil {
		t.Fatal(err)
	}
	drainQueued(st)
	storetest.FinishTurn(t, st, storetest.BeginTurn(t, st, tn.ID), store.TurnFinishParams{Status: store.TurnCompleted, StopReason: aap.StopEndTurn})
	if got := deliveries(t, st, e); len(got) != 1 {
		t.Errorf("an enabled endpoint got %d deliveries, want 1", len(got))
	}
	if !queuedFor(st, tn.ID) {
		t.Error("the process was not told of the tenant's new delivery")
	}
}

// drainQueued empties the store's channel of queued tenants.
func drainQueued(st *store.Store) {
	for {
		select {
		case <-st.WebhooksQueued():
		default:
			return
		}
	}
}

// queuedFor reports whether the store told of the tenant's deliveries.
func queuedFor(st *store.Store, tenantID string) bool {
	for {
		select {
		case id := <-st.WebhooksQueued():
			if id == tenantID {
				return true
			}
		default:
			return false
		}
	}
}

// Deleting a session queues session.deleted in the same transaction;
// deleting a session that is not there queues nothing.
func TestWebhookSessionDeletedIsWrittenWithTheDeletion(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t)
	ctx := context.Background()
	tn := storetest.NewTenant(t, st)
	e := newEndpoint(t, st, tn.ID, store.WebhookSessionDeleted)
	sess, _, err := st.SessionCreate(ctx, store.SessionCreateParams{TenantID: tn.ID, AgentName: "echo"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.SessionDelete(ctx, tn.ID, sess.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := st.SessionDelete(ctx, tn.ID, sess.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("second deletion: %v", err)
	}
	got := deliveries(t, st, e)
	if len(got) != 1 || got[0].Event.Type != store.WebhookSessionDeleted || got[0].Event.Data.SessionID != sess.ID ||
		got[0].Event.Data.TurnID != "" || got[0].Event.Data.Usage != nil {
		t.Errorf("deliveries %+v, want one session.deleted of %s", got, sess.ID)
	}
}

// A turn whose process died is recorded as interrupted once, and so is its
// turn.failed, whichever of the two ways records it.
func TestWebhookInterruptedTurnIsQueuedOnce(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t)
	ctx := context.Background()
	tn := storetest.NewTenant(t, st)
	e := newEndpoint(t, st, tn.ID)
	url := storetest.URL(t)

	// By the next turn's claim.
	taken := storetest.BeginTurn(t, st, tn.ID)
	storetest.Exec(t, url, `UPDATE sessions SET lease_expires_at = now() - interval '1 second' WHERE tenant_id = $1 AND id = $2`, tn.ID, taken.Turn.SessionID)
	next, err := st.TurnBegin(ctx, &store.TurnBeginParams{TenantID: tn.ID, SessionID: taken.Turn.SessionID, TurnID: store.NewTurnID(),
		Stream: aap.StreamNone, Owner: 2, Lease: time.Minute,
		Prepare: func(store.Session) (store.TurnPlan, error) { return store.TurnPlan{}, nil }})
	if err != nil || next.Interrupted != taken.Turn.ID {
		t.Fatalf("takeover: %+v, %v", next, err)
	}
	// By the sweep of dead turns, twice.
	swept := storetest.BeginTurn(t, st, tn.ID)
	storetest.Exec(t, url, `UPDATE sessions SET lease_expires_at = now() - interval '1 second' WHERE tenant_id = $1 AND id = $2`, tn.ID, swept.Turn.SessionID)
	for range 2 {
		if _, err := st.TurnInterruptIfDead(ctx, swept.Turn.Ref()); err != nil {
			t.Fatal(err)
		}
	}
	got := map[string]int{}
	for _, d := range deliveries(t, st, e) {
		if d.Event.Type != store.WebhookTurnFailed || d.Event.Data.Status != store.TurnInterrupted ||
			d.Event.Data.Error == nil || d.Event.Data.Error.Type != aap.TurnErrorInterrupted {
			t.Errorf("delivery %+v, want turn.failed of an interrupted turn", d.Event)
		}
		got[d.Event.Data.TurnID]++
	}
	if want := map[string]int{taken.Turn.ID: 1, swept.Turn.ID: 1}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("events by turn %v, want %v", got, want)
	}
}

// Claims of two deliverers at once never share a delivery (FOR UPDATE SKIP
// LOCKED), a claimed delivery is not due again until its claim ends, and
// an attempt is recorded only while its claim holds.
func TestWebhookClaimsNeverShareADelivery(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t)
	ctx := context.Background()
	tn := storetest.NewTenant(t, st)
	e := newEndpoint(t, st, tn.ID)
	const turns = 30
	for range turns {
		storetest.FinishTurn(t, st, storetest.BeginTurn(t, st, tn.ID), store.TurnFinishParams{Status: store.TurnCompleted, StopReason: aap.StopEndTurn})
	}
	now := time.Now()
	var (
		mu     sync.Mutex
		claims []store.WebhookClaim
		wg     sync.WaitGroup
	)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := st.WebhookDeliveriesClaim(ctx, tn.ID, now, time.Minute, 10)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			claims = append(claims, c)
			mu.Unlock()
		}()
	}
	wg.Wait()
	seen := map[string]bool{}
	var all []store.WebhookDelivery
	for _, c := range claims {
		if c.TenantName != tn.Name || len(c.Targets[e.ID].Secrets) != 1 {
			t.Errorf("claim: tenant %q, targets %+v", c.TenantName, c.Targets)
		}
		for _, d := range c.Deliveries {
			if seen[d.Event.ID] {
				t.Errorf("event %s claimed twice", d.Event.ID)
			}
			seen[d.Event.ID] = true
			all = append(all, d)
		}
	}
	if len(seen) != turns {
		t.Errorf("%d deliveries claimed, want %d", len(seen), turns)
	}
	if again, err := st.WebhookDeliveriesClaim(ctx, tn.ID, now, time.Minute, 100); err != nil || len(again.Deliveries) != 0 {
		t.Errorf("claimed again before the claim ended: %d, %v", len(again.Deliveries), err)
	}
	due, err := st.WebhookDueTenants(ctx, now.Add(2*time.Minute), 1000)
	if err != nil || !slices.Contains(due, tn.ID) {
		t.Errorf("after its claim ended, the tenant is not due: %v, %v", due, err)
	}

	// Delivered, retried, failed; and one redelivered while claimed, whose
	// attempt is then not recorded.
	at := now.Add(time.Second)
	results := []store.WebhookAttemptResult{
		{Delivery: all[0], State: store.WebhookDelivered, Attempt: store.WebhookAttempt{At: at, StatusCode: 204, LatencyMS: 3}},
		{Delivery: all[1], State: store.WebhookPending, NextAttemptAt: at.Add(5 * time.Second), Attempt: store.WebhookAttempt{At: at, StatusCode: 500, Error: "HTTP 500"}},
		{Delivery: all[2], State: store.WebhookFailed, Attempt: store.WebhookAttempt{At: at, Error: "connection refused"}},
	}
	rec, err := st.WebhookAttemptsRecord(ctx, tn.ID, results)
	if err != nil || !rec.Recorded[0] || !rec.Recorded[1] || !rec.Recorded[2] {
		t.Errorf("record: %+v, %v", rec, err)
	}
	if rec, err := st.WebhookAttemptsRecord(ctx, tn.ID, results[:1]); err != nil || rec.Recorded[0] {
		t.Errorf("recorded twice under one claim: %+v, %v", rec, err)
	}
	if _, err := st.WebhookRedeliver(ctx, tn.ID, e.ID, all[3].Event.ID, now); err != nil {
		t.Fatal(err)
	}
	if rec, err := st.WebhookAttemptsRecord(ctx, tn.ID, []store.WebhookAttemptResult{{Delivery: all[3], State: store.WebhookFailed,
		Attempt: store.WebhookAttempt{At: at, StatusCode: 500}}}); err != nil || rec.Recorded[0] {
		t.Errorf("an attempt whose delivery was redelivered meanwhile was recorded: %+v, %v", rec, err)
	}
	byID := map[string]store.WebhookDelivery{}
	for _, d := range deliveries(t, st, e) {
		byID[d.Event.ID] = d
	}
	check := func(d store.WebhookDelivery, state string, attempts int) {
		t.Helper()
		got := byID[d.Event.ID]
		if got.State != state || got.Attempts != attempts || len(got.Log) != attempts {
			t.Errorf("event %s: state %s, %d attempts, log %+v; want %s and %d", d.Event.ID, got.State, got.Attempts, got.Log, state, attempts)
		}
	}
	check(all[0], store.WebhookDelivered, 1)
	check(all[1], store.WebhookPending, 1)
	check(all[2], store.WebhookFailed, 1)
	check(all[3], store.WebhookPending, 0)
	if l := byID[all[0].Event.ID].Log[0]; l.StatusCode != 204 || l.LatencyMS != 3 || !l.At.Equal(at) {
		t.Errorf("attempt log %+v", l)
	}
	if got := byID[all[1].Event.ID]; got.NextAttemptAt == nil || !got.NextAttemptAt.Equal(at.Add(5*time.Second).Truncate(time.Microsecond)) {
		t.Errorf("a retried delivery is due at %v, want %v", got.NextAttemptAt, at.Add(5*time.Second))
	}
	endpoint, err := st.WebhookEndpointGet(ctx, tn.ID, e.ID)
	if err != nil || endpoint.FailingSince == nil {
		t.Errorf("an endpoint whose attempt failed: failing since %v, %v", endpoint.FailingSince, err)
	}

	// A release gives a delivery back, due, without an attempt.
	c, err := st.WebhookDeliveriesClaim(ctx, tn.ID, now, time.Minute, 1)
	if err != nil || len(c.Deliveries) != 1 {
		t.Fatalf("claim: %+v, %v", c, err)
	}
	if err := st.WebhookDeliveryRelease(ctx, c.Deliveries[0], now); err != nil {
		t.Fatal(err)
	}
	if again, err := st.WebhookDeliveriesClaim(ctx, tn.ID, now, time.Minute, 100); err != nil || !slices.ContainsFunc(again.Deliveries,
		func(d store.WebhookDelivery) bool { return d.Event.ID == c.Deliveries[0].Event.ID }) {
		t.Errorf("a released delivery is not due: %v", err)
	}
}

// Disabling an endpoint fails its pending deliveries; the figures count it.
func TestWebhookDisablingFailsTheEndpointsPendingDeliveries(t *testing.T) {
	t.Parallel()
	st := storetest.OpenURL(t, storetest.NewDatabase(t)) // its prune is every tenant's
	url := st.ConnString()
	ctx := context.Background()
	tn := storetest.NewTenant(t, st)
	e := newEndpoint(t, st, tn.ID)
	for range 3 {
		storetest.FinishTurn(t, st, storetest.BeginTurn(t, st, tn.ID), store.TurnFinishParams{Status: store.TurnCompleted, StopReason: aap.StopEndTurn})
	}
	now := time.Now()
	before, err := st.WebhookStatsGet(ctx, now)
	if err != nil || before.OldestDue <= 0 {
		t.Fatalf("figures with due deliveries: %+v, %v", before, err)
	}
	c, err := st.WebhookDeliveriesClaim(ctx, tn.ID, now, time.Minute, 1)
	if err != nil || len(c.Deliveries) != 1 {
		t.Fatalf("claim: %+v, %v", c, err)
	}
	rec, err := st.WebhookAttemptsRecord(ctx, tn.ID, []store.WebhookAttemptResult{{Delivery: c.Deliveries[0], State: store.WebhookFailed,
		Attempt: store.WebhookAttempt{At: now, StatusCode: 410, Error: "HTTP 410"}, DisableEndpoint: "the endpoint answered 410 Gone"}})
	if !rec.Recorded[0] || rec.OthersFailed != 2 || err != nil {
		t.Errorf("record: %+v, %v; want recorded, 2 others failed", rec, err)
	}
	got, err := st.WebhookEndpointGet(ctx, tn.ID, e.ID)
	if err != nil || got.DisabledAt == nil || got.DisabledReason != "the endpoint answered 410 Gone" {
		t.Errorf("endpoint %+v, %v", got, err)
	}
	for _, d := range deliveries(t, st, e) {
		if d.State != store.WebhookFailed || d.FinishedAt == nil {
			t.Errorf("delivery %s: %s", d.Event.ID, d.State)
		}
	}
	// A delivery queued as the endpoint was being disabled (the outbox
	// reads the endpoint without locking it) is claimed with its endpoint
	// as it is, disabled: the deliverer fails it unsent.
	// Due at the test's now, not the database's: under load the test has
	// run for longer than the second the claim below looks ahead.
	storetest.Exec(t, url, `UPDATE webhook_deliveries SET state = 'pending', next_attempt_at = $4, finished_at = NULL
		WHERE tenant_id = $1 AND endpoint_id = $2 AND event_id = $3`, tn.ID, e.ID, c.Deliveries[0].Event.ID, now)
	late, err := st.WebhookDeliveriesClaim(ctx, tn.ID, now.Add(time.Second), time.Minute, 10)
	if err != nil || len(late.Deliveries) != 1 || late.Targets[e.ID].Endpoint.DisabledAt == nil {
		t.Errorf("claim of a disabled endpoint's delivery: %d claimed, target %+v, %v; want it, disabled", len(late.Deliveries), late.Targets[e.ID], err)
	}
	after, err := st.WebhookStatsGet(ctx, now)
	if err != nil || after.DisabledEndpoints < 1 {
		t.Errorf("figures %+v, %v", after, err)
	}
	// Ended deliveries are pruned once old enough.
	if n, err := st.WebhookDeliveriesPrune(ctx, now.Add(time.Hour)); err != nil || n != 2 {
		t.Errorf("pruned %d, %v; want the 2 that ended", n, err)
	}
	if left := deliveries(t, st, e); len(left) != 1 || left[0].State != store.WebhookPending {
		t.Errorf("%d deliveries left after the prune, want the pending one", len(left))
	}
}

// An endpoint's secret is sealed at rest; a rotation keeps the previous
// one signing until the overlap ends; pages of endpoints and deliveries
// are stable keysets; another tenant's endpoint is not found.
func TestWebhookEndpointsSecretsAndPages(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t)
	ctx := context.Background()
	tn, other := storetest.NewTenant(t, st), storetest.NewTenant(t, st)
	e := newEndpoint(t, st, tn.ID)
	var sealed []byte
	storetest.Scan(t, storetest.URL(t), `SELECT secret FROM webhook_endpoints WHERE tenant_id = $1 AND id = $2`, []any{tn.ID, e.ID}, &sealed)
	if len(sealed) == 0 || string(sealed) == "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw" {
		t.Errorf("secret stored as %q", sealed)
	}
	rotated, err := st.WebhookEndpointRotateSecret(ctx, tn.ID, e.ID, "whsec_bmV3", time.Hour)
	if err != nil || rotated.PreviousSecretUntil == nil {
		t.Fatalf("rotate: %+v, %v", rotated, err)
	}
	storetest.FinishTurn(t, st, storetest.BeginTurn(t, st, tn.ID), store.TurnFinishParams{Status: store.TurnCompleted, StopReason: aap.StopEndTurn})
	now := time.Now()
	c, err := st.WebhookDeliveriesClaim(ctx, tn.ID, now, time.Minute, 10)
	if got := c.Targets[e.ID].Secrets; err != nil || fmt.Sprint(got) != "[whsec_bmV3 whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw]" {
		t.Errorf("secrets during the overlap: %q, %v", got, err)
	}
	c, err = st.WebhookDeliveriesClaim(ctx, tn.ID, now.Add(2*time.Hour), time.Minute, 10)
	if got := c.Targets[e.ID].Secrets; err != nil || fmt.Sprint(got) != "[whsec_bmV3]" {
		t.Errorf("secrets after the overlap: %q, %v", got, err)
	}

	for range 4 {
		newEndpoint(t, st, tn.ID)
	}
	var ids []string
	for cursor := ""; ; {
		page, err := st.WebhookEndpointList(ctx, tn.ID, cursor, 2)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range page.Endpoints {
			ids = append(ids, p.ID)
		}
		if cursor = page.Next; cursor == "" {
			break
		}
	}
	if len(ids) != 5 || !slices.IsSorted(ids) || ids[0] != e.ID {
		t.Errorf("paged endpoints %v", ids)
	}
	if _, err := st.WebhookEndpointList(ctx, tn.ID, "bm9uc2Vuc2U", 2); !errors.Is(err, store.ErrBadCursor) {
		t.Errorf("a cursor not issued: %v", err)
	}
	if _, err := st.WebhookEndpointGet(ctx, other.ID, e.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("another tenant's endpoint: %v", err)
	}
	if err := st.WebhookEndpointDelete(ctx, other.ID, e.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("delete another tenant's endpoint: %v", err)
	}
	if _, err := st.WebhookRedeliver(ctx, other.ID, e.ID, c.Deliveries[0].Event.ID, now); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("redeliver another tenant's delivery: %v", err)
	}
	if _, err := st.WebhookEndpointCreate(ctx, store.WebhookEndpointCreateParams{TenantID: tn.ID, URL: "https://x.example",
		Events: store.WebhookEventTypes, Secret: "whsec_eA", Max: 5}); !errors.Is(err, store.ErrWebhookLimit) {
		t.Errorf("a sixth endpoint of at most five: %v", err)
	}
	if err := st.WebhookEndpointDelete(ctx, tn.ID, e.ID); err != nil {
		t.Fatal(err)
	}
	var left int
	storetest.Scan(t, storetest.URL(t), `SELECT count(*) FROM webhook_deliveries WHERE tenant_id = $1 AND endpoint_id = $2`, []any{tn.ID, e.ID}, &left)
	if left != 0 {
		t.Errorf("%d deliveries of a deleted endpoint left", left)
	}
}

// An endpoint whose secret was sealed with another key does not keep the
// tenant's other endpoints from their deliveries: its target says why it
// cannot be signed.
func TestWebhookSecretSealedWithAnotherKeyIsTheEndpointsAlone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	keyed := func(b byte) *store.Store {
		key := make([]byte, 32)
		key[0] = b
		st, err := store.Open(ctx, store.Config{DatabaseURL: storetest.URL(t), EncryptionKey: key})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(st.Close)
		return st
	}
	st, other := keyed(1), keyed(2)
	tn := storetest.NewTenant(t, st)
	good, bad := newEndpoint(t, st, tn.ID), newEndpoint(t, other, tn.ID)
	storetest.CompletedTurn(t, st, tn.ID)
	c, err := st.WebhookDeliveriesClaim(ctx, tn.ID, time.Now(), time.Minute, 10)
	if err != nil || len(c.Deliveries) != 2 {
		t.Fatalf("claim: %d deliveries, %v", len(c.Deliveries), err)
	}
	if g := c.Targets[good.ID]; len(g.Secrets) != 1 || g.SecretErr != nil {
		t.Errorf("the endpoint sealed with the store's key: %+v", g)
	}
	if b := c.Targets[bad.ID]; len(b.Secrets) != 0 || b.SecretErr == nil {
		t.Errorf("the endpoint sealed with another key: %+v", b)
	}
}

// Deleting a tenant deletes its endpoints and their deliveries, and
// nothing of another tenant's.
func TestWebhookRowsGoWithTheirTenant(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t)
	ctx := context.Background()
	tn, other := storetest.NewTenant(t, st), storetest.NewTenant(t, st)
	for _, id := range []string{tn.ID, other.ID} {
		newEndpoint(t, st, id)
		storetest.CompletedTurn(t, st, id)
	}
	if err := st.TenantDelete(ctx, tn.ID); err != nil {
		t.Fatal(err)
	}
	count := func(tenantID string) (endpoints, deliveries int) {
		storetest.Scan(t, storetest.URL(t), `SELECT (SELECT count(*) FROM webhook_endpoints WHERE tenant_id = $1),
			(SELECT count(*) FROM webhook_deliveries WHERE tenant_id = $1)`, []any{tenantID}, &endpoints, &deliveries)
		return endpoints, deliveries
	}
	if e, d := count(tn.ID); e != 0 || d != 0 {
		t.Errorf("a deleted tenant's webhooks: %d endpoints, %d deliveries left", e, d)
	}
	if e, d := count(other.ID); e != 1 || d != 1 {
		t.Errorf("another tenant's webhooks: %d endpoints, %d deliveries; want 1 and 1", e, d)
	}
}
