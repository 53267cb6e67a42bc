package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Webhook deliveries: one event to one endpoint, sent by the deliverer of
// any replica (package webhooks). A claim takes a tenant's due deliveries
// with FOR UPDATE SKIP LOCKED and moves their next attempt to the end of a
// lease, so no other replica takes them while they are sent, and a replica
// that dies leaves them due again at the lease's end; recording an attempt
// is fenced on that claim.
//
// Claims and records commit without waiting for their WAL to reach disk
// (asyncCommitSQL): a Postgres crash may forget the last of them, and then
// a delivery is sent again, with the same event id, which receivers
// deduplicate by. The outbox row itself is written in the turn's own,
// synchronous, commit: it is never lost.

// asyncCommitSQL makes a transaction's commit return before its WAL is on
// disk.
const asyncCommitSQL = "SET LOCAL synchronous_commit TO off"

// Webhook delivery states.
const (
	WebhookPending   = "pending"
	WebhookDelivered = "delivered"
	WebhookFailed    = "failed"
)

// WebhookDelivery is one event to one endpoint, named by the two.
type WebhookDelivery struct {
	TenantID   string
	EndpointID string
	Event      WebhookEvent
	// State is WebhookPending, WebhookDelivered or WebhookFailed.
	State string
	// Attempts counts the attempts of the current schedule (a redelivery
	// starts a new one); Log holds every attempt, the newest last.
	Attempts      int
	NextAttemptAt *time.Time
	Log           []WebhookAttempt
	CreatedAt     time.Time
	FinishedAt    *time.Time
	// Claim is, for a claimed delivery, the end of its claim: the token
	// that fences the recording of its attempt.
	Claim time.Time
}

// WebhookAttempt is one attempt to send a delivery.
type WebhookAttempt struct {
	At time.Time `json:"at"`
	// StatusCode is the receiver's answer; 0 when there was none.
	StatusCode int   `json:"statusCode,omitempty"`
	LatencyMS  int64 `json:"latencyMs"`
	// Error says why the attempt failed; "" when it succeeded.
	Error string `json:"error,omitempty"`
}

// maxAttemptLog bounds the attempts a delivery keeps (redeliveries add to
// them): the oldest go first.
const maxAttemptLog = 100

const webhookDeliveryColumns = `tenant_id::text, endpoint_id, event_id, event_type, occurred_at, data::text, state,
	attempts, next_attempt_at, attempt_log::text, created_at, finished_at`

func scanWebhookDelivery(row interface{ Scan(...any) error }) (WebhookDelivery, error) {
	var (
		d         WebhookDelivery
		data, log []byte
	)
	err := row.Scan(&d.TenantID, &d.EndpointID, &d.Event.ID, &d.Event.Type, &d.Event.OccurredAt, &data, &d.State,
		&d.Attempts, &d.NextAttemptAt, &log, &d.CreatedAt, &d.FinishedAt)
	if err != nil {
		return d, interpretError(err)
	}
	if err := unmarshalAll(field{"event data", data, &d.Event.Data}, field{"attempt log", log, &d.Log}); err != nil {
		return d, err
	}
	return d, nil
}

// WebhookTarget is an endpoint as its deliveries are sent: with the
// secrets that sign them now (the current one, and after a rotation the
// previous one for a while). An endpoint disabled as its deliveries were
// claimed is one too (Endpoint.DisabledAt): they are not sent.
type WebhookTarget struct {
	Endpoint WebhookEndpoint
	Secrets  []string
	// SecretErr says why the secrets could not be read (sealed with
	// another encryption key): its deliveries cannot be signed.
	SecretErr error
}

// WebhookClaim is a tenant's due deliveries, claimed until Until, with
// their endpoints.
type WebhookClaim struct {
	TenantName string
	Targets    map[string]WebhookTarget
	Deliveries []WebhookDelivery
	Until      time.Time
}

// WebhookDueTenants lists tenants with deliveries due at now, those due
// longest first, limit deliveries looked at. It is one of the few queries
// across tenants (the deliverer's scan); each tenant's claim is then a
// query of its own.
func (s *Store) WebhookDueTenants(ctx context.Context, now time.Time, limit int) ([]string, error) {
	rows, err := s.chores.Query(ctx, `SELECT tenant_id::text FROM webhook_deliveries
		WHERE state = 'pending' AND next_attempt_at <= $1 ORDER BY next_attempt_at LIMIT $2`, now, limit)
	if err != nil {
		return nil, fmt.Errorf("find due webhook deliveries: %w", interpretError(err))
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("find due webhook deliveries: %w", interpretError(err))
	}
	seen := map[string]bool{}
	var out []string
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out, nil
}

// WebhookDeliveriesClaim claims up to limit of a tenant's deliveries due at
// now, oldest due first, until now + lease, skipping those another claim
// holds; it reads their endpoints and secrets in the same round trip. (A
// delivery of a disabled endpoint may be among them: the outbox does not
// lock an endpoint to read it, so a turn's end may queue one while the
// endpoint is being disabled.)
func (s *Store) WebhookDeliveriesClaim(ctx context.Context, tenantID string, now time.Time, lease time.Duration, limit int) (WebhookClaim, error) {
	claim := WebhookClaim{Until: now.Add(lease).Truncate(time.Microsecond), Targets: map[string]WebhookTarget{}}
	b := &pgx.Batch{}
	queueBegin(b, tenantID)
	b.Queue(asyncCommitSQL)
	b.Queue(`UPDATE webhook_deliveries d SET next_attempt_at = $3
		FROM (SELECT endpoint_id AS due_endpoint, event_id AS due_event FROM webhook_deliveries
		      WHERE tenant_id = $1 AND state = 'pending' AND next_attempt_at <= $2
		      ORDER BY next_attempt_at LIMIT $4 FOR UPDATE SKIP LOCKED) due
		WHERE d.tenant_id = $1 AND d.endpoint_id = due.due_endpoint AND d.event_id = due.due_event
		RETURNING `+webhookDeliveryColumns, tenantID, now, claim.Until, limit)
	b.Queue(`SELECT name FROM tenants WHERE id = $1`, tenantID)
	b.Queue(`SELECT `+webhookEndpointColumns+`, secret, CASE WHEN previous_secret_until > $2 THEN previous_secret END
		FROM webhook_endpoints WHERE tenant_id = $1`, tenantID, now)
	b.Queue("COMMIT")
	err := s.inBatch(ctx, s.pool, b, func(br pgx.BatchResults) error {
		for range beginLen + 1 { // BEGIN, the declaration, SET
			if _, err := br.Exec(); err != nil {
				return err
			}
		}
		rows, err := br.Query()
		if err != nil {
			return err
		}
		if claim.Deliveries, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (WebhookDelivery, error) {
			d, err := scanWebhookDelivery(row)
			d.Claim = claim.Until
			return d, err
		}); err != nil {
			return err
		}
		if err := br.QueryRow().Scan(&claim.TenantName); err != nil {
			return err
		}
		if rows, err = br.Query(); err != nil {
			return err
		}
		for rows.Next() {
			var cur, prev []byte
			e, err := scanWebhookEndpoint(rows, &cur, &prev)
			if err != nil {
				rows.Close()
				return err
			}
			t := WebhookTarget{Endpoint: e}
			for _, sealed := range [][]byte{cur, prev} {
				if len(sealed) == 0 {
					continue
				}
				secret, err := s.sealer.open(sealed)
				if err != nil {
					t.Secrets, t.SecretErr = nil, fmt.Errorf("the webhook's secret: %w", err)
					break
				}
				t.Secrets = append(t.Secrets, string(secret))
			}
			claim.Targets[e.ID] = t
		}
		if err := rows.Err(); err != nil {
			return err
		}
		_, err = br.Exec()
		return err
	})
	if err != nil {
		return WebhookClaim{}, fmt.Errorf("claim webhook deliveries of tenant %s: %w", tenantID, err)
	}
	return claim, nil
}

// inBatch sends b, whose statements read reads in order, on a connection
// of pool (s.pool, or s.chores for work across tenants: wall.go); a failed batch's transaction is rolled back with the
// connection's end of the batch.
func (s *Store) inBatch(ctx context.Context, pool *pgxpool.Pool, b *pgx.Batch, read func(pgx.BatchResults) error) error {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return interpretError(err)
	}
	defer conn.Release()
	br := conn.SendBatch(ctx, b)
	err = read(br)
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_, _ = conn.Exec(context.WithoutCancel(ctx), "ROLLBACK")
		return interpretError(err)
	}
	return nil
}

// WebhookAttemptResult is the outcome of an attempt, as the deliverer
// decided it.
type WebhookAttemptResult struct {
	Delivery WebhookDelivery // as claimed
	Attempt  WebhookAttempt
	// State is the delivery's state after the attempt: WebhookDelivered,
	// WebhookPending (retried at NextAttemptAt) or WebhookFailed.
	State         string
	NextAttemptAt time.Time
	// DisableEndpoint, when set, disables the endpoint for this reason and
	// fails its other pending deliveries.
	DisableEndpoint string
}

// WebhookRecorded is what WebhookAttemptsRecord wrote.
type WebhookRecorded struct {
	// Recorded holds the results whose claim still held, by their index:
	// the others' deliveries were redelivered, or failed with their
	// endpoint's disabling, meanwhile.
	Recorded map[int]bool
	// OthersFailed counts the pending deliveries the disablings failed.
	OthersFailed int64
}

// WebhookAttemptsRecord records attempts of one tenant's deliveries, in one
// transaction and one round trip, each only if its claim still holds; and
// keeps their endpoints' failure records: an endpoint's last result clears
// it (a success) or starts it (a failure), whether or not its delivery's
// claim still held — the receiver answered all the same.
func (s *Store) WebhookAttemptsRecord(ctx context.Context, tenantID string, results []WebhookAttemptResult) (WebhookRecorded, error) {
	out := WebhookRecorded{Recorded: map[int]bool{}}
	b := &pgx.Batch{}
	queueBegin(b, tenantID)
	b.Queue(asyncCommitSQL)
	// A statement per delivery, each found by its primary key: one over
	// an array of them would be planned from statistics, which a sudden
	// backlog leaves stale, and could scan the tenant's every pending
	// delivery for each one recorded.
	last := map[string]WebhookAttemptResult{} // the last result of each endpoint
	disable := map[string]string{}
	for _, r := range results {
		entry, err := json.Marshal(r.Attempt)
		if err != nil {
			return out, fmt.Errorf("encode webhook attempt: %w", err)
		}
		var next *time.Time
		if r.State == WebhookPending {
			next = &r.NextAttemptAt
		}
		b.Queue(webhookRecordSQL, tenantID, r.Delivery.EndpointID, r.Delivery.Event.ID, r.Delivery.Claim,
			r.State, next, r.Attempt.At, "["+string(entry)+"]", maxAttemptLog)
		last[r.Delivery.EndpointID] = r
		if r.DisableEndpoint != "" {
			disable[r.Delivery.EndpointID] = r.DisableEndpoint
		}
	}
	var cleared, failing []string
	var failingAt time.Time
	for id, r := range last {
		if r.State == WebhookDelivered {
			cleared = append(cleared, id)
		} else {
			failing, failingAt = append(failing, id), r.Attempt.At
		}
	}
	b.Queue(`UPDATE webhook_endpoints SET failing_since = NULL
		WHERE tenant_id = $1 AND id = ANY($2) AND failing_since IS NOT NULL`, tenantID, cleared)
	b.Queue(`UPDATE webhook_endpoints SET failing_since = $3
		WHERE tenant_id = $1 AND id = ANY($2) AND failing_since IS NULL`, tenantID, failing, failingAt)
	othersFailed := -1 // the index of the statement that fails the disabled endpoints' deliveries
	for id, why := range disable {
		b.Queue(`UPDATE webhook_endpoints SET disabled_at = $3, disabled_reason = $4
			WHERE tenant_id = $1 AND id = $2 AND disabled_at IS NULL`, tenantID, id, failingAt, why)
	}
	if len(disable) > 0 {
		ids := make([]string, 0, len(disable))
		for id := range disable {
			ids = append(ids, id)
		}
		othersFailed = b.Len()
		b.Queue(`UPDATE webhook_deliveries SET state = 'failed', next_attempt_at = NULL, finished_at = $3
			WHERE tenant_id = $1 AND endpoint_id = ANY($2) AND state = 'pending'`, tenantID, ids, failingAt)
	}
	b.Queue("COMMIT")
	err := s.inBatch(ctx, s.pool, b, func(br pgx.BatchResults) error {
		for i := range b.Len() {
			tag, err := br.Exec()
			if err != nil {
				return err
			}
			switch {
			case i >= beginLen+1 && i < beginLen+1+len(results):
				out.Recorded[i-beginLen-1] = tag.RowsAffected() == 1
			case i == othersFailed:
				out.OthersFailed = tag.RowsAffected()
			}
		}
		return nil
	})
	if err != nil {
		return WebhookRecorded{}, fmt.Errorf("record %d webhook attempts: %w", len(results), err)
	}
	return out, nil
}

// webhookRecordSQL records an attempt of a delivery if its claim still
// holds: $1 tenant, $2 endpoint, $3 event, $4 the claim, $5 the state
// after it, $6 the next attempt (pending), $7 its time, $8 its record (a
// JSON array of one), $9 maxAttemptLog.
const webhookRecordSQL = `UPDATE webhook_deliveries SET state = $5, attempts = attempts + 1, next_attempt_at = $6,
		finished_at = CASE WHEN $5 <> 'pending' THEN $7::timestamptz END,
		attempt_log = (CASE WHEN jsonb_array_length(attempt_log) >= $9 THEN attempt_log - 0 ELSE attempt_log END) || $8::jsonb
	WHERE tenant_id = $1 AND endpoint_id = $2 AND event_id = $3 AND state = 'pending' AND next_attempt_at = $4`

// WebhookDeliveryRelease gives back a claimed delivery that was not
// attempted (its deliverer stopped), due at now, without counting an
// attempt.
func (s *Store) WebhookDeliveryRelease(ctx context.Context, d WebhookDelivery, now time.Time) error {
	_, err := s.tenant(d.TenantID).Exec(ctx, `UPDATE webhook_deliveries SET next_attempt_at = $5
		WHERE tenant_id = $1 AND endpoint_id = $2 AND event_id = $3 AND state = 'pending' AND next_attempt_at = $4`,
		d.TenantID, d.EndpointID, d.Event.ID, d.Claim, now)
	if err != nil {
		return fmt.Errorf("release webhook delivery of event %s: %w", d.Event.ID, interpretError(err))
	}
	return nil
}

// WebhookDeliveryPage is a page of an endpoint's deliveries, newest first.
type WebhookDeliveryPage struct {
	Deliveries []WebhookDelivery
	// Next is the cursor of the next page; empty on the last page.
	Next string
}

// noEventCursor sorts after every event id: the first page's bound.
const noEventCursor = "evt_~"

// WebhookDeliveryList pages through an endpoint's deliveries, newest event
// first (event ids are time-ordered): after is the Next of the previous
// page ("" for the first); ErrBadCursor if it is not one this store issued.
func (s *Store) WebhookDeliveryList(ctx context.Context, tenantID, endpointID, after string, limit int) (WebhookDeliveryPage, error) {
	id, err := idCursor(after, "evt_")
	if err != nil {
		return WebhookDeliveryPage{}, err
	}
	if id == "" {
		id = noEventCursor
	}
	rows, err := s.tenant(tenantID).Query(ctx, `SELECT `+webhookDeliveryColumns+` FROM webhook_deliveries
		WHERE tenant_id = $1 AND endpoint_id = $2 AND event_id < $3 ORDER BY event_id DESC LIMIT $4`,
		tenantID, endpointID, id, limit+1)
	if err != nil {
		return WebhookDeliveryPage{}, fmt.Errorf("list webhook deliveries: %w", interpretError(err))
	}
	list, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (WebhookDelivery, error) { return scanWebhookDelivery(row) })
	if err != nil {
		return WebhookDeliveryPage{}, fmt.Errorf("list webhook deliveries: %w", err)
	}
	page := WebhookDeliveryPage{Deliveries: list}
	if len(list) > limit {
		page.Deliveries = list[:limit]
		page.Next = encodeCursor(list[limit-1].Event.ID)
	}
	return page, nil
}

// WebhookRedeliver sends a delivery again, due at now, with the same event
// (its id, time and body) and a new schedule of attempts; ErrNotFound if
// the endpoint has no delivery of that event.
func (s *Store) WebhookRedeliver(ctx context.Context, tenantID, endpointID, eventID string, now time.Time) (WebhookDelivery, error) {
	d, err := scanWebhookDelivery(s.tenant(tenantID).QueryRow(ctx, `UPDATE webhook_deliveries
		SET state = 'pending', attempts = 0, next_attempt_at = $4, finished_at = NULL
		WHERE tenant_id = $1 AND endpoint_id = $2 AND event_id = $3
		RETURNING `+webhookDeliveryColumns, tenantID, endpointID, eventID, now))
	if err != nil {
		return WebhookDelivery{}, fmt.Errorf("redeliver event %s to %s: %w", eventID, endpointID, err)
	}
	s.webhooksQueuedFor(tenantID)
	return d, nil
}

// WebhookStats are the figures of every tenant's webhooks, for /metrics.
type WebhookStats struct {
	// OldestDue is how long the delivery due longest has been due (0 when
	// none is).
	OldestDue         time.Duration
	DisabledEndpoints int64
}

// WebhookStatsGet reads the webhooks' figures at now, across tenants.
func (s *Store) WebhookStatsGet(ctx context.Context, now time.Time) (WebhookStats, error) {
	var (
		st     WebhookStats
		oldest *time.Time
	)
	b := &pgx.Batch{}
	b.Queue(`SELECT min(next_attempt_at) FROM webhook_deliveries WHERE state = 'pending' AND next_attempt_at <= $1`, now)
	b.Queue(`SELECT count(*) FROM webhook_endpoints WHERE disabled_at IS NOT NULL`)
	err := s.inBatch(ctx, s.chores, b, func(br pgx.BatchResults) error {
		if err := br.QueryRow().Scan(&oldest); err != nil {
			return err
		}
		return br.QueryRow().Scan(&st.DisabledEndpoints)
	})
	if err != nil {
		return WebhookStats{}, fmt.Errorf("read webhook figures: %w", err)
	}
	if oldest != nil {
		st.OldestDue = max(now.Sub(*oldest), 0)
	}
	return st, nil
}

// WebhookDeliveriesPrune deletes the deliveries that ended before before,
// across tenants, and reports how many.
func (s *Store) WebhookDeliveriesPrune(ctx context.Context, before time.Time) (int64, error) {
	tag, err := s.chores.Exec(ctx, `DELETE FROM webhook_deliveries WHERE finished_at < $1`, before)
	if err != nil {
		return 0, fmt.Errorf("prune webhook deliveries: %w", interpretError(err))
	}
	return tag.RowsAffected(), nil
}
