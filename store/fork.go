package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// SessionForkParams forks a session.
type SessionForkParams struct {
	TenantID string
	// Owner confines the fork to a session of this end user ("" for any):
	// another's session is ErrNotFound.
	Owner     string
	SessionID string
	Point     ForkPoint
	// NewOwner is the end user the fork belongs to ("" for none: a session
	// of the tenant's API keys).
	NewOwner string
}

// SessionFork copies a session up to a point into a new session of the same
// tenant, in one transaction, and returns the new session.
//
// The fork takes the source's full history up to the point and its
// compacted history as it stood there: the compactions whose ranges end at
// or before the point are carried (with their records), a later one is
// not, and the compacted history is the one it replaced
// (compaction_replaced). It takes the source's agent, enabled server tools,
// options (secret values still sealed) and client tools as they are now, and
// the tool calls pending at the point: at the session's end, its pending
// calls, exactly; at an earlier point where a call is unanswered, nothing
// (*PointConflictError, PointToolCallsOpen). Its messages belong to no turn
// of its own: it has no turns and starts its own event log.
//
// A running turn is never copied: a point that takes anything it wrote (or
// will write) is a *PointConflictError (PointTurnRunning); a point before
// it is copied as it stood. A point that names nothing of the session is a
// *PointError.
//
// Every row is copied by INSERT … SELECT inside the database, fed by the
// source's own tenant_id column: on Citus each statement stays on the
// tenant's shard, and the transaction commits there in one phase.
func (s *Store) SessionFork(ctx context.Context, p SessionForkParams) (Session, error) {
	sess, err := s.sessionFork(ctx, p)
	if err != nil {
		return Session{}, fmt.Errorf("fork session %s: %w", p.SessionID, err)
	}
	return sess, nil
}

func (s *Store) sessionFork(ctx context.Context, p SessionForkParams) (sess Session, err error) {
	tx, err := s.beginPointRead(ctx)
	if err != nil {
		return Session{}, err
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback(context.WithoutCancel(ctx))
		}
	}()
	src, err := s.readSource(ctx, tx, p.TenantID, p.Owner, p.SessionID)
	if err != nil {
		return Session{}, err
	}
	seq, err := resolveFork(ctx, tx, src, p.Point)
	if err != nil {
		return Session{}, err
	}
	c, err := cutAt(ctx, tx, src, seq)
	if err != nil {
		return Session{}, err
	}
	sess = src.Session
	sess.ID, sess.Owner, sess.Pending = NewSessionID(), p.NewOwner, c.pending
	sess.ActiveTurnID, sess.TurnLive = "", false
	sess.ForkedFrom = &ForkOrigin{SessionID: src.ID, Messages: seq}

	b := &pgx.Batch{}
	args := []any{p.TenantID, src.ID, sess.ID, seq}
	b.Queue(`
		INSERT INTO sessions (tenant_id, id, agent_name, agent_tools, options, secret_options, client_tools,
			pending_tool_calls, last_seq, owner, forked_from, forked_at)
		SELECT tenant_id, $3, agent_name, agent_tools, options, secret_options, client_tools,
			$5, $4, nullif($6, ''), id, $4
		FROM sessions WHERE tenant_id = $1 AND id = $2`, p.TenantID, src.ID, sess.ID, seq, jsonList(c.pending), p.NewOwner)
	// (Not RETURNING: Citus cannot plan it on an INSERT … SELECT.)
	b.Queue(`SELECT created_at, updated_at FROM sessions WHERE tenant_id = $1 AND id = $2`, p.TenantID, sess.ID)
	b.Queue(`
		INSERT INTO messages (tenant_id, session_id, seq, turn_id, origin, message, extra, created_at)
		SELECT tenant_id, $3, seq, NULL, origin, message, extra, created_at
		FROM messages WHERE tenant_id = $1 AND session_id = $2 AND seq <= $4`, args...)
	if c.next == 0 {
		// Every compaction is carried: the compacted history is the
		// source's, but for what follows the point.
		b.Queue(`
			INSERT INTO compacted_messages (tenant_id, session_id, seq, source_seq, message, extra)
			SELECT tenant_id, $3, seq, source_seq, message, extra
			FROM compacted_messages
			WHERE tenant_id = $1 AND session_id = $2 AND seq <= $4 AND (source_seq IS NULL OR source_seq <= $4)`, args...)
	} else {
		// The first compaction not carried kept the history it replaced:
		// the compacted history as it stood at the point, and what turns
		// appended after it until that compaction ran.
		b.Queue(`
			INSERT INTO compacted_messages (tenant_id, session_id, seq, source_seq, message, extra)
			SELECT r.tenant_id, $3, r.seq, r.source_seq, coalesce(r.message, m.message),
				CASE WHEN r.source_seq IS NULL THEN r.extra ELSE m.extra END
			FROM compaction_replaced r
			LEFT JOIN messages m ON m.tenant_id = r.tenant_id AND m.session_id = r.session_id AND m.seq = r.source_seq
			WHERE r.tenant_id = $1 AND r.session_id = $2 AND r.compaction_id = $5
			  AND r.seq <= $4 AND (r.source_seq IS NULL OR r.source_seq <= $4)`, p.TenantID, src.ID, sess.ID, seq, c.next)
	}
	if c.carried != 0 {
		// The carried compactions keep their ids (unique per session), so
		// that what each replaced still names it, and a fork of the fork
		// finds it.
		b.Queue(`
			INSERT INTO compactions (tenant_id, session_id, id, created_at, trigger, strategy, from_seq, to_seq,
				messages_before, messages_after, tokens_before, tokens_after)
			OVERRIDING SYSTEM VALUE
			SELECT tenant_id, $3, id, created_at, trigger, strategy, from_seq, to_seq,
				messages_before, messages_after, tokens_before, tokens_after
			FROM compactions WHERE tenant_id = $1 AND session_id = $2 AND id <= $4`, p.TenantID, src.ID, sess.ID, c.carried)
		b.Queue(`
			INSERT INTO compaction_replaced (tenant_id, session_id, compaction_id, seq, source_seq, message, extra)
			SELECT tenant_id, $3, compaction_id, seq, source_seq, message, extra
			FROM compaction_replaced
			WHERE tenant_id = $1 AND session_id = $2 AND compaction_id <= $5
			  AND seq <= $4 AND (source_seq IS NULL OR source_seq <= $4)`, p.TenantID, src.ID, sess.ID, seq, c.carried)
	}
	br := tx.SendBatch(ctx, b)
	_, err = br.Exec()
	if err == nil {
		err = br.QueryRow().Scan(&sess.CreatedAt, &sess.UpdatedAt)
	}
	for i := 2; err == nil && i < b.Len(); i++ {
		_, err = br.Exec()
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return Session{}, interpretError(err)
	}
	if err := tx.Commit(ctx); err != nil {
		return Session{}, interpretError(err)
	}
	return sess, nil
}
