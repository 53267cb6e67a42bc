package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Trimming a full history (docs/lifecycle.md, "Retention",
// fullHistoryDays) drops its oldest messages, a prefix: sessions.
// history_trimmed_through says that the full history's seqs 1 to it are
// gone, and every read starts after it. A trim only goes as far as a
// compaction has summarised (the compacted history holds its own copy of
// everything the model sees, so it stays whole), and only over messages
// older than the policy.
//
// What still reads the dropped messages is settled in the same
// transaction:
//   - a fork reads its source's rows in place (inherited.go): a source keeps
//     every row a fork's inherited range still covers, and drops it once the
//     fork has trimmed past it (its range shrinks) or is deleted; the source
//     reads as trimmed all the same;
//   - what a compaction replaced (compaction_replaced) serves forks at
//     points before that compaction: once the trim reaches past a point
//     such a fork could take, or a run of copies names a dropped message,
//     it is deleted, and a fork there is refused (PointCompactedHistoryGone)
//     as for a compaction made before aapd kept it;
//   - a fork is never cut inside the trimmed prefix (PointHistoryTrimmed),
//     and a fork of a trimmed session starts trimmed as far;
//   - the event log of every ended turn whose messages all lie inside the
//     prefix (it repeats their text) is replaced by trimmedLog: it reads
//     as turn_start and its turn_stop (TurnLog.Trimmed), a resumed stream
//     of it is ErrTurnTrimmed, and the session's event log skips it.
//     A turn's messages run from its first_seq to the next turn's first
//     seq, so a turn is inside the prefix once the next turn's first_seq
//     is at most one past it (conservative: messages written between
//     turns, outside any, keep the turn before them until the next trim).
//     Migration 00041 applied this rule once to the sessions trimmed
//     before trims did.

// trimmedLog is the stored log (turns.events) of a turn trimmed with the
// full history: an object, where a log is always an array.
const trimmedLog = `{"trimmed":true}`

// ErrTurnTrimmed: the turn's events were dropped with the trimmed prefix
// of its session's full history (docs/lifecycle.md, "Trimming full
// histories").
var ErrTurnTrimmed = errors.New("the turn's events were trimmed with its session's full history")

// isTrimmedLog reports whether a turn's stored log is trimmedLog.
func isTrimmedLog(folded []byte) bool {
	return string(folded) == trimmedLog
}

// SessionsToTrim returns up to limit ids of a tenant's sessions, after the
// id after ("" for the first) in id order, that a full-history trim may
// touch: unclaimed (no turn running or waiting), with a compaction past
// their trimmed prefix or rows of it still held. (Not by their age: a
// fork made today holds the messages of its source's past.)
// A session found here may have nothing old enough to drop: the trim
// decides, with the session locked.
func (s *Store) SessionsToTrim(ctx context.Context, tenantID, after string, limit int) ([]string, error) {
	rows, err := s.tenant(tenantID).Query(ctx, `SELECT s.id FROM sessions s
		WHERE s.tenant_id = $1 AND s.id > $2 AND s.active_turn_id IS NULL
		  AND (EXISTS (SELECT 1 FROM compactions c WHERE c.tenant_id = s.tenant_id AND c.session_id = s.id
		               AND c.to_seq > s.history_trimmed_through)
		    OR EXISTS (SELECT 1 FROM messages m WHERE m.tenant_id = s.tenant_id AND m.session_id = s.id
		               AND m.seq <= s.history_trimmed_through))
		ORDER BY s.id LIMIT $3`, tenantID, after, limit)
	if err != nil {
		return nil, fmt.Errorf("find sessions to trim: %w", interpretError(err))
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("find sessions to trim: %w", interpretError(err))
	}
	return ids, nil
}

// HistoryTrimmed is what one SessionTrimHistory did.
type HistoryTrimmed struct {
	// Through is the session's trimmed prefix after the trim: its full
	// history's seqs 1 to Through are gone (0: none).
	Through int64
	// Messages is how many rows of messages it deleted: the session's
	// own (rows its forks still read are kept until they no longer do).
	Messages int64
	// Turns is how many turns' event logs it dropped (trimmedLog).
	Turns int64
	// More is true when the trim stopped at its batch size and more is
	// old enough and compacted: call it again.
	More bool
}

// SessionTrimHistory drops, in one transaction, up to batch more messages of
// the start of a session's full history: those written before before and
// summarised by a compaction (at or before the end of its latest). A
// session whose turn is running or waiting is left alone (the zero
// HistoryTrimmed), and so is one that is gone. The session is locked (FOR
// UPDATE) for the length of the transaction: a turn claiming it meanwhile
// waits for one batch, a few milliseconds.
func (s *Store) SessionTrimHistory(ctx context.Context, tenantID, id string, before time.Time, batch int) (HistoryTrimmed, error) {
	var out HistoryTrimmed
	err := s.inTx(ctx, tenantID, func(tx pgx.Tx) error {
		var through, compacted int64
		// The subquery names the tenant ($1), not s.tenant_id: Citus
		// routes a FOR UPDATE to one shard only when every table of it is
		// filtered by the distribution column's value ("could not run
		// distributed query with FOR UPDATE/SHARE commands" otherwise).
		err := tx.QueryRow(ctx, `SELECT history_trimmed_through,
				(SELECT coalesce(max(to_seq), 0) FROM compactions c WHERE c.tenant_id = $1 AND c.session_id = s.id)
			FROM sessions s WHERE tenant_id = $1 AND id = $2 AND active_turn_id IS NULL FOR UPDATE`,
			tenantID, id).Scan(&through, &compacted)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return interpretError(err)
		}
		out.Through = through
		limit := min(compacted, through+int64(batch))
		to := through
		if limit > through {
			// The first message not old enough, among the batch's: the
			// session's own rows and those it inherits.
			var young *int64
			if err := tx.QueryRow(ctx, `SELECT least(
				(SELECT min(seq) FROM messages WHERE tenant_id = $1 AND session_id = $2
				   AND seq > $3 AND seq <= $4 AND created_at >= $5),
				(SELECT min(m.seq) FROM inherited_messages i
				 JOIN messages m ON m.tenant_id = i.tenant_id AND m.session_id = i.source_session_id
				  AND m.seq BETWEEN greatest(i.first_seq, $3 + 1) AND least(i.last_seq, $4)
				 WHERE i.tenant_id = $1 AND i.session_id = $2 AND i.first_seq <= $4 AND i.last_seq > $3
				   AND m.created_at >= $5))`,
				tenantID, id, through, limit, before).Scan(&young); err != nil {
				return interpretError(err)
			}
			to = limit
			if young != nil {
				to = *young - 1
			}
			out.More = young == nil && limit == through+int64(batch) && limit < compacted
		}
		b := &pgx.Batch{}
		// The session's own rows of the prefix that no fork reads (rows a
		// fork still read at the last trim are dropped now if it no
		// longer does).
		b.Queue(`DELETE FROM messages m WHERE m.tenant_id = $1 AND m.session_id = $2 AND m.seq <= $3
			AND NOT EXISTS (SELECT 1 FROM inherited_messages i WHERE i.tenant_id = $1 AND i.source_session_id = $2
			                AND m.seq BETWEEN i.first_seq AND i.last_seq)`, tenantID, id, to)
		if to > through {
			// The ranges it inherits no longer cover the prefix: their
			// sources may drop those rows.
			b.Queue(`DELETE FROM inherited_messages WHERE tenant_id = $1 AND session_id = $2 AND last_seq <= $3`, tenantID, id, to)
			b.Queue(`UPDATE inherited_messages SET first_seq = $3 + 1 WHERE tenant_id = $1 AND session_id = $2 AND first_seq <= $3`,
				tenantID, id, to)
			// What a compaction replaced that only served forks inside the
			// prefix, or copies messages of it.
			b.Queue(`DELETE FROM compaction_replaced r WHERE r.tenant_id = $1 AND r.session_id = $2 AND r.compaction_id IN (
				SELECT c.id FROM compactions c WHERE c.tenant_id = $1 AND c.session_id = $2 AND (c.to_seq <= $3 + 1
				  OR EXISTS (SELECT 1 FROM compaction_replaced x WHERE x.tenant_id = $1 AND x.session_id = $2
				             AND x.compaction_id = c.id AND x.source_seq <= $3)))`, tenantID, id, to)
			b.Queue(`UPDATE sessions SET history_trimmed_through = $3 WHERE tenant_id = $1 AND id = $2`, tenantID, id, to)
			// The event logs of the ended turns the prefix now covers
			// whole: the next turn starts in (through+1, to+1]. (Those
			// it covered before were dropped by the trims that covered
			// them.) Last in the batch: its count is out.Turns.
			b.Queue(`UPDATE turns t SET events = '`+trimmedLog+`'::json
				FROM (SELECT id, lead(first_seq) OVER (ORDER BY first_seq, created_at, id) AS next_seq
				      FROM turns WHERE tenant_id = $1 AND session_id = $2 AND first_seq IS NOT NULL AND first_seq <= $3::bigint + 1) x
				WHERE t.tenant_id = $1 AND t.session_id = $2 AND t.id = x.id
				  AND x.next_seq > $4::bigint + 1 AND x.next_seq <= $3::bigint + 1
				  AND t.status IN ('completed', 'failed', 'interrupted', 'cancelled')`, tenantID, id, to, through)
		}
		br := tx.SendBatch(ctx, b)
		tag, err := br.Exec()
		if err != nil {
			br.Close()
			return interpretError(err)
		}
		out.Messages = tag.RowsAffected()
		for i := 1; i < b.Len(); i++ {
			tag, err := br.Exec()
			if err != nil {
				br.Close()
				return interpretError(err)
			}
			if i == b.Len()-1 && to > through {
				out.Turns = tag.RowsAffected()
			}
		}
		if err := br.Close(); err != nil {
			return interpretError(err)
		}
		out.Through = max(to, through)
		return nil
	})
	if err != nil {
		return HistoryTrimmed{}, fmt.Errorf("trim the full history of session %s: %w", id, err)
	}
	return out, nil
}
