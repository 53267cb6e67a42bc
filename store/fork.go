package store

import (
	"context"
	"fmt"
	"strings"

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

// SessionFork makes a new session of the same tenant from a session up to a
// point, in one transaction, and returns it.
//
// The fork has the source's full history up to the point and its compacted
// history as it stood there: the compactions whose ranges end at or before
// the point are carried (with their records), a later one is not, and the
// compacted history is the one it replaced (compaction_replaced). It has
// the source's agent, enabled server tools, options (secret values still
// sealed) and client tools as they are now, and the tool calls pending at
// the point: at the session's end, its pending calls, exactly; at an
// earlier point where a call is unanswered, no fork (*PointConflictError,
// PointToolCallsOpen). Its messages belong to no turn of its own: it has no
// turns and starts its own event log.
//
// A running turn is never copied: a point that takes anything it wrote (or
// will write) is a *PointConflictError (PointTurnRunning); a point before
// it is copied as it stood. A point that names nothing of the session is a
// *PointError.
//
// The full history is not copied: the fork reads it where it is
// (inherited.go), so a fork costs the same whatever the length of the
// history. The compacted history and the compaction records (bounded by
// the agent's policy) are copied by INSERT … SELECT fed by the source's own
// tenant_id column: on Citus every statement stays on the tenant's shard,
// and the transaction commits there in one phase.
func (s *Store) SessionFork(ctx context.Context, p SessionForkParams) (Session, error) {
	sess, err := s.sessionFork(ctx, p)
	if err != nil {
		return Session{}, fmt.Errorf("fork session %s: %w", p.SessionID, err)
	}
	return sess, nil
}

func (s *Store) sessionFork(ctx context.Context, p SessionForkParams) (sess Session, err error) {
	err = s.inTx(ctx, p.TenantID, func(tx pgx.Tx) error {
		src, err := s.readSource(ctx, tx, p.TenantID, p.Owner, p.SessionID, true)
		if err != nil {
			return err
		}
		seq, err := resolveFork(ctx, tx, src, p.Point)
		if err != nil {
			return err
		}
		c, err := cutAt(ctx, tx, src, seq)
		if err != nil {
			return err
		}
		sess = src.Session
		sess.ID, sess.Owner, sess.Pending = NewSessionID(), p.NewOwner, c.pending
		sess.ActiveTurnID, sess.TurnLive = "", false
		sess.ForkedFrom = &ForkOrigin{SessionID: src.ID, Messages: seq}
		b := queueFork(p.TenantID, src, sess, c)
		br := tx.SendBatch(ctx, b)
		defer br.Close()
		if _, err := br.Exec(); err != nil {
			return interpretError(err)
		}
		if err := br.QueryRow().Scan(&sess.CreatedAt, &sess.UpdatedAt); err != nil {
			return interpretError(err)
		}
		for i := 2; i < b.Len(); i++ {
			if _, err := br.Exec(); err != nil {
				return interpretError(err)
			}
		}
		return interpretError(br.Close())
	})
	return sess, err
}

// queueFork queues the writes of a fork: its session, the ranges of full
// history it inherits, its compacted history, and the carried compactions
// with what they replaced. The second statement reads the session's times.
func queueFork(tenantID string, src *sourceRow, fork Session, c cut) *pgx.Batch {
	seq := c.seq
	b := &pgx.Batch{}
	b.Queue(`
		INSERT INTO sessions (tenant_id, id, agent_name, agent_tools, options, secret_options, client_tools,
			pending_tool_calls, last_seq, owner, forked_from, forked_at, labels, history_trimmed_through)
		SELECT tenant_id, $3, agent_name, agent_tools, options, secret_options, client_tools,
			$5, $4, nullif($6, ''), id, $4, labels, history_trimmed_through
		FROM sessions WHERE tenant_id = $1 AND id = $2`, tenantID, src.ID, fork.ID, seq, jsonList(c.pending), fork.Owner)
	// (Not RETURNING: Citus cannot plan it on an INSERT … SELECT.)
	b.Queue(`SELECT created_at, updated_at FROM sessions WHERE tenant_id = $1 AND id = $2`, tenantID, fork.ID)

	pieces := src.pieces(seq)
	if ranges := forkRanges(pieces); len(ranges) > 0 {
		var q strings.Builder
		q.WriteString(`INSERT INTO inherited_messages (tenant_id, session_id, first_seq, last_seq, source_session_id) VALUES `)
		args := []any{tenantID, fork.ID}
		for i, r := range ranges {
			if i > 0 {
				q.WriteString(", ")
			}
			n := len(args)
			fmt.Fprintf(&q, "($1, $2, $%d::bigint, $%d::bigint, $%d::text)", n+1, n+2, n+3)
			args = append(args, r.first, r.last, r.source)
		}
		b.Queue(q.String(), args...)
	}

	if c.next == 0 {
		// Every compaction is carried: the compacted history is the
		// source's, but for what follows the point.
		b.Queue(`
			INSERT INTO compacted_messages (tenant_id, session_id, seq, source_seq, message, extra)
			SELECT tenant_id, $3, seq, source_seq, message, extra
			FROM compacted_messages
			WHERE tenant_id = $1 AND session_id = $2 AND seq <= $4 AND (source_seq IS NULL OR source_seq <= $4)`,
			tenantID, src.ID, fork.ID, seq)
	} else {
		// The first compaction not carried kept the compacted history it
		// replaced: as it stood at the point, and what turns appended
		// after it until that compaction ran. Its runs of copies are read
		// from the full history, through the pieces that hold it.
		sessions, firsts, lasts := piecesArgs(pieces)
		b.Queue(`
			INSERT INTO compacted_messages (tenant_id, session_id, seq, source_seq, message, extra)
			SELECT r.tenant_id, $3, r.seq + (m.seq - r.source_seq), m.seq, m.message, m.extra
			FROM compaction_replaced r
			JOIN unnest($6::text[], $7::bigint[], $8::bigint[]) AS p(session_id, first_seq, last_seq)
			  ON p.first_seq <= r.source_seq + (r.last_seq - r.seq) AND p.last_seq >= r.source_seq
			JOIN messages m ON m.tenant_id = r.tenant_id AND m.session_id = p.session_id
			 AND m.seq BETWEEN greatest(p.first_seq, r.source_seq) AND least(p.last_seq, r.source_seq + (r.last_seq - r.seq))
			WHERE r.tenant_id = $1 AND r.session_id = $2 AND r.compaction_id = $5 AND r.source_seq IS NOT NULL
			  AND m.seq <= $4 AND r.seq + (m.seq - r.source_seq) <= $4`,
			tenantID, src.ID, fork.ID, seq, c.next, sessions, firsts, lasts)
		b.Queue(`
			INSERT INTO compacted_messages (tenant_id, session_id, seq, source_seq, message, extra)
			SELECT tenant_id, $3, seq, NULL, message, extra
			FROM compaction_replaced
			WHERE tenant_id = $1 AND session_id = $2 AND compaction_id = $5 AND source_seq IS NULL AND seq <= $4`,
			tenantID, src.ID, fork.ID, seq, c.next)
	}
	if c.carried != 0 {
		// The carried compactions keep their ids (unique per session), so
		// that what each replaced still names it, and a fork of the fork
		// finds it; a run of copies is cut at the point.
		b.Queue(`
			INSERT INTO compactions (tenant_id, session_id, id, created_at, trigger, strategy, from_seq, to_seq,
				messages_before, messages_after, tokens_before, tokens_after)
			OVERRIDING SYSTEM VALUE
			SELECT tenant_id, $3, id, created_at, trigger, strategy, from_seq, to_seq,
				messages_before, messages_after, tokens_before, tokens_after
			FROM compactions WHERE tenant_id = $1 AND session_id = $2 AND id <= $4`, tenantID, src.ID, fork.ID, c.carried)
		b.Queue(`
			INSERT INTO compaction_replaced (tenant_id, session_id, compaction_id, seq, last_seq, source_seq, message, extra)
			SELECT tenant_id, $3, compaction_id, seq,
				CASE WHEN source_seq IS NULL THEN last_seq ELSE least(last_seq, $4, seq + ($4 - source_seq)) END,
				source_seq, message, extra
			FROM compaction_replaced
			WHERE tenant_id = $1 AND session_id = $2 AND compaction_id <= $5
			  AND seq <= $4 AND (source_seq IS NULL OR source_seq <= $4)`, tenantID, src.ID, fork.ID, seq, c.carried)
	}
	return b
}
