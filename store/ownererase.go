package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Erasing one end user (docs/lifecycle.md): every session they own goes, in
// one transaction, with every row that names it; nothing of theirs stays.
//
// What stays: the usage of their turns, in usage_daily (it names no
// one), and the history other owners' forks read from their sessions. A
// fork belongs to its owner: an API key may fork an end user's session for
// another (?owner=), and that other end user's conversation must go on
// reading as it did. So, as a session's deletion does (inherited.go), the
// ranges those forks read are copied into them first; and their forkedFrom
// is cleared, so that no row names a session of the erased user.
//
// The session.deleted webhook events of the erased sessions are the only
// rows written that name them: the application needs them to erase its own
// copies. Every earlier delivery about those sessions is deleted.

// OwnerErasure is what an erasure deleted.
type OwnerErasure struct {
	Sessions          int64
	Messages          int64 // full-history messages (their own rows)
	CompactedMessages int64
	Compactions       int64
	Turns             int64
	IdempotencyKeys   int64
	WebhookDeliveries int64 // deliveries about the sessions, queued or sent
	// ForksKept are other owners' forks of the sessions, given their own
	// copy of the history they read from them.
	ForksKept int64
	// RunningTurns are the turns that held the sessions' claims: the
	// caller stops them (CancelChannel).
	RunningTurns []string
}

// OwnerErase deletes every session of an end user of the tenant, with
// their histories, turns, events, compactions and idempotency keys (of
// session creation: a turn's lives on its turn), and the webhook deliveries
// about them; it queues a session.deleted event for each session. It is
// one transaction: all of it or nothing. A user with no sessions is no
// error: there is nothing to delete (their leftover creation keys are
// deleted all the same).
func (s *Store) OwnerErase(ctx context.Context, tenantID, owner string) (OwnerErasure, error) {
	if owner == "" {
		return OwnerErasure{}, errors.New("erase owner: no owner given")
	}
	var (
		out OwnerErasure
		err error
	)
	// A turn of the user's ending at the same moment may deadlock with
	// the deletion's cascade; the deletion is then tried again.
	for attempt := 0; attempt < 3; attempt++ {
		out, err = s.ownerErase(ctx, tenantID, owner)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || (pgErr.Code != "40P01" && pgErr.Code != "40001") {
			break
		}
	}
	if err != nil {
		return OwnerErasure{}, fmt.Errorf("erase owner: %w", err)
	}
	if out.Sessions > 0 {
		s.webhooksQueuedFor(tenantID)
	}
	return out, nil
}

func (s *Store) ownerErase(ctx context.Context, tenantID, owner string) (out OwnerErasure, err error) {
	err = s.inTx(ctx, tenantID, func(tx pgx.Tx) error {
		// The user's sessions, locked: a turn's write waits, then finds
		// its session gone; a fork being made of one is waited for.
		rows, err := tx.Query(ctx, `SELECT id, coalesce(active_turn_id, '') FROM sessions
			WHERE tenant_id = $1 AND owner = $2 ORDER BY id FOR UPDATE`, tenantID, owner)
		if err != nil {
			return interpretError(err)
		}
		ids := []string{}
		for rows.Next() {
			var id, turn string
			if err := rows.Scan(&id, &turn); err != nil {
				rows.Close()
				return interpretError(err)
			}
			ids = append(ids, id)
			if turn != "" {
				out.RunningTurns = append(out.RunningTurns, turn)
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return interpretError(err)
		}
		out.Sessions = int64(len(ids))

		b := &pgx.Batch{}
		// What is about to go, counted while it is there.
		b.Queue(`SELECT
			(SELECT count(*) FROM messages WHERE tenant_id = $1 AND session_id = ANY($2)),
			(SELECT count(*) FROM compacted_messages WHERE tenant_id = $1 AND session_id = ANY($2)),
			(SELECT count(*) FROM compactions WHERE tenant_id = $1 AND session_id = ANY($2)),
			(SELECT count(*) FROM turns WHERE tenant_id = $1 AND session_id = ANY($2))`, tenantID, ids).
			QueryRow(func(row pgx.Row) error {
				return row.Scan(&out.Messages, &out.CompactedMessages, &out.Compactions, &out.Turns)
			})
		// Other owners' forks reading the sessions' rows: held, given
		// their copy, and no longer naming their origin.
		b.Queue(`SELECT count(*) FROM (SELECT 1 FROM sessions WHERE tenant_id = $1 AND NOT id = ANY($2) AND id IN (
				SELECT session_id FROM inherited_messages WHERE tenant_id = $1 AND source_session_id = ANY($2))
			FOR KEY SHARE) f`, tenantID, ids).
			QueryRow(func(row pgx.Row) error { return row.Scan(&out.ForksKept) })
		b.Queue(`
			INSERT INTO messages (tenant_id, session_id, seq, turn_id, origin, message, extra, created_at)
			SELECT m.tenant_id, i.session_id, m.seq, NULL, m.origin, m.message, m.extra, m.created_at
			FROM inherited_messages i
			JOIN messages m ON m.tenant_id = i.tenant_id AND m.session_id = i.source_session_id
			               AND m.seq BETWEEN i.first_seq AND i.last_seq
			WHERE i.tenant_id = $1 AND i.source_session_id = ANY($2) AND NOT i.session_id = ANY($2)`, tenantID, ids)
		b.Queue(`DELETE FROM inherited_messages WHERE tenant_id = $1 AND source_session_id = ANY($2) AND NOT session_id = ANY($2)`,
			tenantID, ids)
		b.Queue(`UPDATE sessions SET forked_from = NULL, forked_at = NULL
			WHERE tenant_id = $1 AND forked_from = ANY($2) AND NOT id = ANY($2)`, tenantID, ids)
		// The usage stays, in aggregate (as SessionDeleteOwned keeps it):
		// ended turns are in it already; their turns still running, which
		// will not end, are added now.
		for _, id := range ids {
			b.Queue(usageRunningSQL, tenantID, id)
		}
		// The sessions, and with them (ON DELETE CASCADE) their messages,
		// compacted history, compactions and what they replaced, turns,
		// events, queued background turns, client message ids and
		// inherited ranges.
		b.Queue(`DELETE FROM sessions WHERE tenant_id = $1 AND id = ANY($2)`, tenantID, ids)
		// Creation keys: those the user's tokens sent (stored under the
		// owner: \x1f owner \x1f key, ownedIdempotencyKey), and an API key's that made one of
		// the sessions.
		b.Queue(`DELETE FROM idempotency_keys WHERE tenant_id = $1 AND (session_id = ANY($2) OR starts_with(key, $3))`,
			tenantID, ids, "\x1f"+owner+"\x1f").
			Exec(func(tag pgconn.CommandTag) error { out.IdempotencyKeys = tag.RowsAffected(); return nil })
		b.Queue(`DELETE FROM webhook_deliveries WHERE tenant_id = $1 AND data->>'sessionId' = ANY($2)`, tenantID, ids).
			Exec(func(tag pgconn.CommandTag) error { out.WebhookDeliveries = tag.RowsAffected(); return nil })
		// Then each session's session.deleted event, as a deletion queues
		// it (webhookOutboxSQL), for every endpoint that listens.
		if len(ids) > 0 {
			events := make([]string, len(ids))
			for i := range ids {
				events[i] = NewWebhookEventID()
			}
			b.Queue(`INSERT INTO webhook_deliveries (tenant_id, endpoint_id, event_id, event_type, occurred_at, data, next_attempt_at)
				SELECT e.tenant_id, e.id, ev.event_id, $4::text, $5::timestamptz, jsonb_build_object('sessionId', ev.session_id), $5::timestamptz
				FROM webhook_endpoints e, unnest($2::text[], $3::text[]) AS ev(session_id, event_id)
				WHERE e.tenant_id = $1 AND e.disabled_at IS NULL AND $4::text = ANY(e.events)`,
				tenantID, ids, events, WebhookSessionDeleted, s.now())
		}
		return interpretError(tx.SendBatch(ctx, b).Close())
	})
	return out, err
}
