package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// TenantRetention is how long a tenant keeps its conversations, in days
// (docs/lifecycle.md, "Retention"). A zero field is "the server's default"
// (flags of aapd serve), which is itself zero — keep forever — unless an
// operator set one.
type TenantRetention struct {
	// IdleSessionDays: a session with no turn and no change for longer is
	// deleted.
	IdleSessionDays int
	// FullHistoryDays: full-history messages older than this that a
	// compaction has already summarised may be dropped.
	FullHistoryDays int
}

// Or is r with each zero field taken from def: the policy in force.
func (r TenantRetention) Or(def TenantRetention) TenantRetention {
	if r.IdleSessionDays == 0 {
		r.IdleSessionDays = def.IdleSessionDays
	}
	if r.FullHistoryDays == 0 {
		r.FullHistoryDays = def.FullHistoryDays
	}
	return r
}

// TenantSetRetention replaces a tenant's retention policy (a zero field
// restores the server's default).
func (s *Store) TenantSetRetention(ctx context.Context, id string, r TenantRetention) (Tenant, error) {
	t, err := scanTenant(s.pool.QueryRow(ctx, `
		UPDATE tenants SET retention_idle_session_days = nullif($2, 0), retention_full_history_days = nullif($3, 0)
		WHERE id = $1 RETURNING `+tenantColumns, id, r.IdleSessionDays, r.FullHistoryDays))
	if err != nil {
		return Tenant{}, fmt.Errorf("set the retention of tenant %s: %w", id, err)
	}
	return t, nil
}

// retentionLockKey is the key of the advisory lock the retention sweeper's
// leader holds for the length of a sweep ('AAPR'), so that replicas never
// sweep at once.
const retentionLockKey = 0x41415052

// ErrRetentionBusy: another process is sweeping.
var ErrRetentionBusy = errors.New("another process is sweeping")

// RetentionLead runs fn while holding the retention sweeper's lock, a
// session advisory lock on a connection of the pool taken for the length
// of fn (one of the few cross-tenant chores, DESIGN.md). Another process
// holding it is ErrRetentionBusy, at once: its sweep is this one's. A
// process that dies loses its connection and with it the lock.
func (s *Store) RetentionLead(ctx context.Context, fn func(ctx context.Context) error) error {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("take the retention lock: %w", interpretError(err))
	}
	defer conn.Release()
	var ok bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, int64(retentionLockKey)).Scan(&ok); err != nil {
		return fmt.Errorf("take the retention lock: %w", interpretError(err))
	}
	if !ok {
		return ErrRetentionBusy
	}
	defer func() {
		// A connection whose unlock failed is closed, which unlocks it.
		if _, err := conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, int64(retentionLockKey)); err != nil {
			_ = conn.Conn().Close(context.WithoutCancel(ctx))
		}
	}()
	return fn(ctx)
}

// SessionsIdle returns the ids of up to limit of a tenant's sessions that
// nothing changed since before (no turn, no update), oldest first. A
// session with a claim — a turn running, a background turn waiting for a
// worker, or a claim a dead process left until the next turn takes it
// over — is not idle.
func (s *Store) SessionsIdle(ctx context.Context, tenantID string, before time.Time, limit int) ([]string, error) {
	// sessions_idle indexes the UTC day of updated_at (00043), not the
	// instant, so that a turn's updates of its session stay HOT: the day
	// finds the candidates in the index, the instant decides.
	rows, err := s.tenant(tenantID).Query(ctx, `SELECT id FROM sessions
		WHERE tenant_id = $1 AND updated_day <= ($2::timestamptz AT TIME ZONE 'UTC')::date
		  AND updated_at < $2 AND active_turn_id IS NULL
		ORDER BY updated_day, updated_at LIMIT $3`, tenantID, before, limit)
	if err != nil {
		return nil, fmt.Errorf("find idle sessions: %w", interpretError(err))
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("find idle sessions: %w", interpretError(err))
	}
	return ids, nil
}

// SessionDeletedIdle is what SessionDeleteIdle deleted.
type SessionDeletedIdle struct {
	// Deleted is false when the session was no longer idle (or gone).
	Deleted bool
	// Messages are the full-history messages deleted with it (its own
	// rows; those forks read were given to them first).
	Messages int64
}

// SessionDeleteIdle deletes a session as SessionDelete does (every row of
// it, its forks given their copy first, its usage rolled up, the
// session.deleted webhook event queued) if it is still idle since before
// and unclaimed: the check and the deletion are one transaction, with the
// session locked, so a turn that claims it first keeps it, and one that
// comes after finds it gone. A turn waits on that lock for as long as the
// deletion of the session's rows takes.
func (s *Store) SessionDeleteIdle(ctx context.Context, tenantID, id string, before time.Time) (SessionDeletedIdle, error) {
	var out SessionDeletedIdle
	outbox, queued, err := webhookOutbox(tenantID, WebhookEvent{ID: NewWebhookEventID(), Type: WebhookSessionDeleted,
		OccurredAt: s.now(), Data: WebhookEventData{SessionID: id}}, "")
	if err != nil {
		return out, err
	}
	err = s.inTx(ctx, tenantID, func(tx pgx.Tx) error {
		b := &pgx.Batch{}
		b.Queue(`SELECT 1 FROM sessions WHERE tenant_id = $1 AND id = $2 AND updated_at < $3 AND active_turn_id IS NULL
			FOR UPDATE`, tenantID, id, before)
		b.Queue(`SELECT count(*) FROM messages WHERE tenant_id = $1 AND session_id = $2`, tenantID, id)
		br := tx.SendBatch(ctx, b)
		var one int
		err := br.QueryRow().Scan(&one)
		if errors.Is(err, pgx.ErrNoRows) {
			return br.Close()
		}
		if err != nil {
			br.Close()
			return interpretError(err)
		}
		if err := br.QueryRow().Scan(&out.Messages); err != nil {
			br.Close()
			return interpretError(err)
		}
		if err := br.Close(); err != nil {
			return interpretError(err)
		}
		if _, err := deleteSession(ctx, tx, tenantID, "", id, outbox); err != nil {
			return err
		}
		out.Deleted = true
		return nil
	})
	if err != nil {
		return SessionDeletedIdle{}, fmt.Errorf("delete idle session %s: %w", id, err)
	}
	if !out.Deleted {
		return SessionDeletedIdle{}, nil
	}
	if *queued {
		s.webhooksQueuedFor(tenantID)
	}
	return out, nil
}
