package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/aapd/aapd/aap"
)

// ErrCompactionConflict: another compaction rewrote the history since the
// snapshot this one was computed from; nothing was changed.
var ErrCompactionConflict = errors.New("the compacted history changed since it was read")

// CompactedSnapshot is the compacted history as a compaction reads it.
type CompactedSnapshot struct {
	Messages []StoredMessage
	// Version is the session's compaction version the messages belong to.
	Version int64
	// ReportedTokens is the input tokens the provider reported for the last
	// model call, which saw the messages up to ReportedUpTo (0 if unknown).
	ReportedTokens int64
	ReportedUpTo   int64
}

// CompactedSnapshotGet reads a session's compacted history with its
// compaction version, consistently.
func (s *Store) CompactedSnapshotGet(ctx context.Context, tenantID, sessionID string) (CompactedSnapshot, error) {
	var snap CompactedSnapshot
	err := s.readTx(ctx, tenantID, func(tx pgx.Tx) error {
		var reported, upTo *int64
		err := tx.QueryRow(ctx, `SELECT compaction_version, reported_tokens, reported_upto_seq FROM sessions
			WHERE tenant_id = $1 AND id = $2`, tenantID, sessionID).Scan(&snap.Version, &reported, &upTo)
		if err != nil {
			return interpretError(err)
		}
		if reported != nil && upTo != nil {
			snap.ReportedTokens, snap.ReportedUpTo = *reported, *upTo
		}
		snap.Messages, err = history(ctx, tx, HistoryParams{TenantID: tenantID, SessionID: sessionID, Type: aap.HistoryCompacted})
		return err
	})
	if err != nil {
		return CompactedSnapshot{}, fmt.Errorf("read compacted history of %s: %w", sessionID, interpretError(err))
	}
	return snap, nil
}

// CompactedItem is a message of a rewritten compacted history.
type CompactedItem struct {
	// SourceSeq is the full-history message it copies; 0 for a message the
	// compaction wrote (a summary, a placeholder).
	SourceSeq int64
	Message   aap.Message
	Extra     json.RawMessage
}

// Compaction is the record of one compaction.
type Compaction struct {
	ID        int64     `json:"id"`
	CreatedAt time.Time `json:"createdAt"`
	// Trigger is "auto" (after a turn, by the agent's policy) or "manual".
	Trigger  string `json:"trigger"`
	Strategy string `json:"strategy"`
	// FromSeq and ToSeq bound the full-history messages the compaction
	// dropped, pruned or summarized.
	FromSeq        int64 `json:"fromSeq"`
	ToSeq          int64 `json:"toSeq"`
	MessagesBefore int   `json:"messagesBefore"`
	MessagesAfter  int   `json:"messagesAfter"`
	TokensBefore   int64 `json:"tokensBefore"`
	TokensAfter    int64 `json:"tokensAfter"`
}

// CompactionApplyParams rewrites the start of a compacted history.
type CompactionApplyParams struct {
	TenantID  string
	SessionID string
	// BaseVersion is the snapshot's version: the rewrite applies only if no
	// other compaction ran since.
	BaseVersion int64
	// UpTo is the last seq of the snapshot: Items replace every compacted
	// message up to it, and what turns appended after it stays as it is.
	UpTo   int64
	Items  []CompactedItem
	Record Compaction
}

// CompactionApply replaces the compacted history up to p.UpTo with
// p.Items and records the compaction, in one transaction: a turn reading
// the history sees it whole before or whole after, never half-written. It
// fails with *TurnRunningError while a turn runs on the session, and with
// ErrCompactionConflict if another compaction ran since the snapshot.
func (s *Store) CompactionApply(ctx context.Context, p CompactionApplyParams) (Compaction, error) {
	rec := p.Record
	err := s.inTx(ctx, p.TenantID, func(tx pgx.Tx) error {
		var (
			version      int64
			running      string
			leaseExpires *time.Time
			leaseOwner   *int32
			background   bool
		)
		if err := tx.QueryRow(ctx, `
			SELECT compaction_version, coalesce(active_turn_id, ''), lease_expires_at, lease_owner, `+activeBackgroundSQL+`
			FROM sessions WHERE tenant_id = $1 AND id = $2 FOR UPDATE`,
			p.TenantID, p.SessionID).Scan(&version, &running, &leaseExpires, &leaseOwner, &background); err != nil {
			return interpretError(err)
		}
		// A background turn's claim holds until the turn ends: whoever
		// resumes it goes on from the history as it left it.
		if running != "" && !background {
			expired, dead, err := claimState(ctx, tx, leaseExpires, leaseOwner)
			if err != nil {
				return err
			}
			if expired || dead {
				running = ""
			}
		}
		// Compaction never interleaves with a turn: the turn's view of the
		// history and its token report stay true for as long as it runs.
		if running != "" {
			return &TurnRunningError{TurnID: running}
		}
		if version != p.BaseVersion {
			return ErrCompactionConflict
		}
		if err := tx.QueryRow(ctx, `
			INSERT INTO compactions (tenant_id, session_id, trigger, strategy, from_seq, to_seq,
				messages_before, messages_after, tokens_before, tokens_after)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING id, created_at`,
			p.TenantID, p.SessionID, rec.Trigger, rec.Strategy, rec.FromSeq, rec.ToSeq,
			rec.MessagesBefore, rec.MessagesAfter, rec.TokensBefore, rec.TokensAfter).Scan(&rec.ID, &rec.CreatedAt); err != nil {
			return interpretError(err)
		}
		// What the rewrite replaces is kept (compaction_replaced), so that
		// a fork at an earlier point finds the compacted history as it
		// stood there (fork.go): the rows compaction wrote whole, the
		// copies of full-history messages as runs (consecutive seqs
		// copying consecutive messages: the islands of seq - source_seq).
		// The source's own tenant_id column feeds each insert: on Citus it
		// stays on the tenant's shard.
		if _, err := tx.Exec(ctx, `
			INSERT INTO compaction_replaced (tenant_id, session_id, compaction_id, seq, last_seq, source_seq)
			SELECT tenant_id, session_id, $4, min(seq), max(seq), min(source_seq)
			FROM (SELECT tenant_id, session_id, seq, source_seq,
			             seq - row_number() OVER (PARTITION BY source_seq - seq ORDER BY seq) AS island
			      FROM compacted_messages
			      WHERE tenant_id = $1 AND session_id = $2 AND seq <= $3 AND source_seq IS NOT NULL) c
			GROUP BY tenant_id, session_id, source_seq - seq, island`,
			p.TenantID, p.SessionID, p.UpTo, rec.ID); err != nil {
			return interpretError(err)
		}
		if _, err := tx.Exec(ctx, `
			INSERT INTO compaction_replaced (tenant_id, session_id, compaction_id, seq, last_seq, message, extra)
			SELECT tenant_id, session_id, $4, seq, seq, message, extra
			FROM compacted_messages WHERE tenant_id = $1 AND session_id = $2 AND seq <= $3 AND source_seq IS NULL`,
			p.TenantID, p.SessionID, p.UpTo, rec.ID); err != nil {
			return interpretError(err)
		}
		if _, err := tx.Exec(ctx, `DELETE FROM compacted_messages WHERE tenant_id = $1 AND session_id = $2 AND seq <= $3`,
			p.TenantID, p.SessionID, p.UpTo); err != nil {
			return interpretError(err)
		}
		n := int64(len(p.Items))
		// Multi-row VALUES, in chunks: on Citus an INSERT … SELECT would be
		// pulled to the coordinator and commit in two phases (docs/citus.md).
		const chunk = 1000
		for from := int64(0); from < n; from += chunk {
			to := min(from+chunk, n)
			var q strings.Builder
			q.WriteString(`INSERT INTO compacted_messages (tenant_id, session_id, seq, source_seq, message, extra) VALUES `)
			args := []any{p.TenantID, p.SessionID}
			for i := from; i < to; i++ {
				it := p.Items[i]
				b, err := json.Marshal(it.Message)
				if err != nil {
					return fmt.Errorf("encode message: %w", err)
				}
				var source *int64
				if it.SourceSeq > 0 {
					src := it.SourceSeq
					source = &src
				}
				var extra *string
				if len(it.Extra) > 0 {
					e := string(it.Extra)
					extra = &e
				}
				if i > from {
					q.WriteString(", ")
				}
				k := len(args)
				fmt.Fprintf(&q, "($1, $2, $%d::bigint, $%d::bigint, $%d::text::json, $%d::text::json)", k+1, k+2, k+3, k+4)
				args = append(args, p.UpTo-n+1+i, source, string(b), extra)
			}
			if _, err := tx.Exec(ctx, q.String(), args...); err != nil {
				return interpretError(err)
			}
		}
		_, err := tx.Exec(ctx, `UPDATE sessions SET compaction_version = compaction_version + 1,
			reported_tokens = NULL, reported_upto_seq = NULL WHERE tenant_id = $1 AND id = $2`,
			p.TenantID, p.SessionID)
		return interpretError(err)
	})
	if err != nil {
		return Compaction{}, fmt.Errorf("apply compaction to %s: %w", p.SessionID, err)
	}
	return rec, nil
}

// CompactionList returns a session's compactions, newest first.
func (s *Store) CompactionList(ctx context.Context, tenantID, sessionID string, limit int) ([]Compaction, error) {
	rows, err := s.tenant(tenantID).Query(ctx, `
		SELECT id, created_at, trigger, strategy, from_seq, to_seq, messages_before, messages_after, tokens_before, tokens_after
		FROM compactions WHERE tenant_id = $1 AND session_id = $2 ORDER BY id DESC LIMIT $3`, tenantID, sessionID, limit)
	if err != nil {
		return nil, fmt.Errorf("list compactions of %s: %w", sessionID, interpretError(err))
	}
	defer rows.Close()
	out := []Compaction{}
	for rows.Next() {
		var c Compaction
		if err := rows.Scan(&c.ID, &c.CreatedAt, &c.Trigger, &c.Strategy, &c.FromSeq, &c.ToSeq,
			&c.MessagesBefore, &c.MessagesAfter, &c.TokensBefore, &c.TokensAfter); err != nil {
			return nil, fmt.Errorf("list compactions of %s: %w", sessionID, interpretError(err))
		}
		out = append(out, c)
	}
	return out, interpretError(rows.Err())
}
