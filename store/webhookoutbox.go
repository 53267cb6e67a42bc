package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/aapd/aapd/aap"
)

// The outbox of webhooks: what must be sent because a turn ended or a
// session was deleted is written in the transaction that did it, as a
// statement of the batch that transaction already sends (no round trip
// more), so nothing is sent that did not commit and nothing that committed
// is forgotten. The deliverer (package webhooks) sends it after the commit.

// Webhook event types.
const (
	// WebhookTurnCompleted: a turn ended without an error and waits on
	// nothing (status completed or cancelled).
	WebhookTurnCompleted = "turn.completed"
	// WebhookTurnFailed: a turn ended with an error (status failed or
	// interrupted).
	WebhookTurnFailed = "turn.failed"
	// WebhookTurnRequiresAction: a turn stopped for client tool calls or a
	// permission (stop reason tool_use): the client must answer.
	WebhookTurnRequiresAction = "turn.requires_action"
	// WebhookSessionDeleted: a session was deleted.
	WebhookSessionDeleted = "session.deleted"
)

// WebhookEventTypes are the event types an endpoint may listen for.
var WebhookEventTypes = []string{WebhookTurnCompleted, WebhookTurnFailed, WebhookTurnRequiresAction, WebhookSessionDeleted}

// WebhookEvent is what a tenant's endpoints are told: the same on every
// attempt and every redelivery.
type WebhookEvent struct {
	// ID is the event's id (webhook-id), one per event, whatever the
	// number of endpoints and attempts.
	ID         string
	Type       string
	OccurredAt time.Time
	Data       WebhookEventData
}

// WebhookEventData is what an event says: which session and turn, and how
// the turn ended. It holds no message content: receivers read the turn.
type WebhookEventData struct {
	// Tenant is the tenant's name; it is filled when the event is read.
	Tenant     string         `json:"tenant,omitempty"`
	SessionID  string         `json:"sessionId"`
	TurnID     string         `json:"turnId,omitempty"`
	Status     TurnStatus     `json:"status,omitempty"`
	StopReason aap.StopReason `json:"stopReason,omitempty"`
	// Usage is absent for a turn interrupted by its process's end.
	Usage *WebhookUsage  `json:"usage,omitempty"`
	Error *aap.TurnError `json:"error,omitempty"`
}

// WebhookUsage is a turn's token usage.
type WebhookUsage struct {
	InputTokens  int64 `json:"inputTokens"`
	OutputTokens int64 `json:"outputTokens"`
}

// NewWebhookEventID returns an opaque, time-ordered event id.
func NewWebhookEventID() string { return "evt_" + mustV7() }

// turnEndEvent is the event of a turn's end.
func turnEndEvent(ref TurnRef, at time.Time, status TurnStatus, stop aap.StopReason, usage *WebhookUsage, turnErr *aap.TurnError) WebhookEvent {
	typ := WebhookTurnCompleted
	switch {
	case status == TurnFailed || status == TurnInterrupted || stop == aap.StopError:
		typ = WebhookTurnFailed
	case stop == aap.StopToolUse:
		typ = WebhookTurnRequiresAction
	}
	return WebhookEvent{ID: NewWebhookEventID(), Type: typ, OccurredAt: at, Data: WebhookEventData{
		SessionID: ref.SessionID, TurnID: ref.TurnID, Status: status, StopReason: stop, Usage: usage, Error: turnErr,
	}}
}

// webhookOutboxSQL queues an event for every enabled endpoint of the
// tenant that listens for its type, and returns a row for each: $1
// tenant, $2 event id, $3 type, $4 time, $5 data. Both tables are
// distributed by tenant and colocated (docs/citus.md): the statement runs
// on the tenant's shard, in the transaction's one phase. A tenant without
// endpoints pays an index probe of webhook_endpoints.
const webhookOutboxSQL = `INSERT INTO webhook_deliveries (tenant_id, endpoint_id, event_id, event_type, occurred_at, data, next_attempt_at)
	SELECT tenant_id, id, $2::text, $3::text, $4::timestamptz, $5::jsonb, $4::timestamptz FROM webhook_endpoints
	WHERE tenant_id = $1 AND disabled_at IS NULL AND $3::text = ANY(events)`

// batchStmt is a statement queued in a write's batch; scan, when set,
// reads its first row.
type batchStmt struct {
	sql  string
	args []any
	scan func(pgx.Row) error
}

// webhookOutbox is the statement that queues ev for the tenant's endpoints,
// if cond (SQL over the same arguments, "" for none) holds; *queued
// reports, once the statement ran, whether it queued any delivery.
func webhookOutbox(tenantID string, ev WebhookEvent, cond string, condArgs ...any) (stmt batchStmt, queued *bool, err error) {
	data, err := json.Marshal(ev.Data)
	if err != nil {
		return batchStmt{}, nil, fmt.Errorf("encode webhook event: %w", err)
	}
	q := webhookOutboxSQL
	if cond != "" {
		q += " AND " + cond
	}
	queued = new(bool)
	stmt = batchStmt{sql: q + " RETURNING 1", args: append([]any{tenantID, ev.ID, ev.Type, ev.OccurredAt, data}, condArgs...),
		scan: func(row pgx.Row) error {
			var one int
			err := row.Scan(&one)
			if errors.Is(err, pgx.ErrNoRows) {
				return nil
			}
			*queued = err == nil
			return err
		}}
	return stmt, queued, nil
}

// queueStmt queues st in b and, if it reads a row, registers its scan.
func queueStmt(b *pgx.Batch, scans map[int]func(pgx.Row) error, st batchStmt) {
	if st.scan != nil {
		scans[b.Len()] = st.scan
	}
	b.Queue(st.sql, st.args...)
}

// WebhooksQueued tells which tenants had deliveries queued by this
// process's writes, at once after their commit, so that its deliverer can
// send them without waiting for its next scan. A tenant told of while the
// channel is full is found by that scan.
func (s *Store) WebhooksQueued() <-chan string { return s.webhooksQueued }

// webhooksQueuedFor tells WebhooksQueued's reader of a tenant's new
// deliveries, without ever waiting.
func (s *Store) webhooksQueuedFor(tenantID string) {
	select {
	case s.webhooksQueued <- tenantID:
	default:
	}
}

// turnEndOutbox is the statement of TurnFinish that queues the turn's end
// for the tenant's webhooks.
func (s *Store) turnEndOutbox(p TurnFinishParams) (batchStmt, *bool, error) {
	var turnErr *aap.TurnError
	if p.ErrorType != "" {
		turnErr = &aap.TurnError{Type: p.ErrorType, Message: PgText(p.Error)}
	}
	ev := turnEndEvent(p.Ref, s.now(), p.Status, p.StopReason,
		&WebhookUsage{InputTokens: p.InputTokens, OutputTokens: p.OutputTokens}, turnErr)
	return webhookOutbox(p.Ref.TenantID, ev, "")
}

// unownedEndOutbox is the statement of queueEnd that queues the end of a
// turn no worker ended (interrupted, cancelled while queued, out of
// attempts) for the tenant's webhooks. It runs with the turn's row locked
// and before the turn's end is recorded, so it queues only while the turn
// still runs: exactly when its end is recorded.
func unownedEndOutbox(ref TurnRef, status TurnStatus, stop aap.Event) (batchStmt, error) {
	ev := turnEndEvent(ref, time.Now(), status, stop.StopReason, nil, stop.Error)
	st, _, err := webhookOutbox(ref.TenantID, ev,
		`EXISTS (SELECT 1 FROM turns WHERE tenant_id = $1 AND session_id = $6 AND id = $7 AND status = 'running')`,
		ref.SessionID, ref.TurnID)
	st.scan = nil // the callers read no row of it
	return st, err
}
