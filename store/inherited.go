package store

import (
	"context"
	"math"

	"github.com/jackc/pgx/v5"
)

// A fork's full history up to its point is read where it is stored, not
// copied (inherited_messages, migration 00010): a fork of 100,000 messages
// costs a few rows, not 100,000. Each inherited range names the session
// whose own rows hold those seqs; every seq no range covers is the
// session's own. A source session is never itself inherited from: a fork of
// a fork names the original rows.
//
// Whoever deletes a session calls inheritedMaterialize first (in the same
// transaction, with the session locked), which copies the ranges forks still
// read into them, so that no range ever names a session that is gone.

// inheritedRange is a range of a session's full history held by another
// session's own rows.
type inheritedRange struct {
	first, last int64
	source      string
}

// piece is a run of a session's full history held by one session's own
// rows: the session's own, or inherited from its source.
type piece struct {
	session   string
	first     int64
	last      int64
	inherited bool
}

// noLastSeq bounds a piece that runs to the end of a history.
const noLastSeq = math.MaxInt64

// inheritedRanges reads the ranges a session inherits, in order.
func inheritedRanges(ctx context.Context, db dbtx, tenantID, sessionID string) ([]inheritedRange, error) {
	rows, err := db.Query(ctx, `SELECT first_seq, last_seq, source_session_id FROM inherited_messages
		WHERE tenant_id = $1 AND session_id = $2 ORDER BY first_seq`, tenantID, sessionID)
	if err != nil {
		return nil, interpretError(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ir inheritedRange, err error) {
		err = r.Scan(&ir.first, &ir.last, &ir.source)
		return ir, err
	})
	return out, interpretError(err)
}

// historyPieces cuts a session's full history from after its trimmed
// prefix (historytrim.go; 0 for none) to last into the pieces that hold it,
// in order: the inherited ranges, and the session's own rows in between and
// after.
func historyPieces(sessionID string, trimmed int64, ranges []inheritedRange, last int64) []piece {
	var out []piece
	next := trimmed + 1
	own := func(upTo int64) {
		if upTo >= next {
			out = append(out, piece{session: sessionID, first: next, last: upTo})
		}
	}
	for _, r := range ranges {
		if r.first > last {
			break
		}
		if r.last < next {
			continue // trimmed
		}
		own(r.first - 1)
		out = append(out, piece{session: r.source, first: max(r.first, next), last: min(r.last, last), inherited: true})
		next = r.last + 1
	}
	own(last)
	return out
}

// forkRanges are the ranges a fork of a session at seq inherits: every
// piece of the session up to seq, each naming the session whose own rows
// hold it, adjacent pieces of one session merged.
func forkRanges(pieces []piece) []inheritedRange {
	var out []inheritedRange
	for _, p := range pieces {
		if n := len(out); n > 0 && out[n-1].source == p.session && out[n-1].last+1 == p.first {
			out[n-1].last = p.last
			continue
		}
		out = append(out, inheritedRange{first: p.first, last: p.last, source: p.session})
	}
	return out
}

// piecesArgs are pieces as the arrays a statement unnests: sessions, first
// and last seqs.
func piecesArgs(pieces []piece) (sessions []string, firsts, lasts []int64) {
	for _, p := range pieces {
		sessions, firsts, lasts = append(sessions, p.session), append(firsts, p.first), append(lasts, p.last)
	}
	return sessions, firsts, lasts
}

// queueInheritedMaterialize queues the statements that copy into each fork
// reading from a session the range it reads, as the fork's own rows (of no
// turn: the turns that wrote them were the source's), and drop the fork's
// range. Every deletion of a session queues them before its DELETE, in the
// same transaction, after locking the session (FOR UPDATE): a fork being
// made holds the session (FOR KEY SHARE) until it has committed, so the
// deletion sees it; a fork made after finds the session gone. owner
// confines them to a session of that end user ("" for any), as the
// deletion is.
func queueInheritedMaterialize(b *pgx.Batch, tenantID, sessionID, owner string) {
	const exists = `EXISTS (SELECT 1 FROM sessions WHERE tenant_id = $1 AND id = $2 AND ($3 = '' OR owner = $3))`
	// The forks are held first: one being deleted meanwhile is waited for
	// and then skipped (it is gone, and so are its ranges), and none is
	// deleted before its copy is written.
	b.Queue(`SELECT 1 FROM sessions WHERE tenant_id = $1 AND id IN (
			SELECT session_id FROM inherited_messages WHERE tenant_id = $1 AND source_session_id = $2)
		AND `+exists+` FOR KEY SHARE`, tenantID, sessionID, owner)
	b.Queue(`
		INSERT INTO messages (tenant_id, session_id, seq, turn_id, origin, message, extra, created_at)
		SELECT m.tenant_id, i.session_id, m.seq, NULL, m.origin, m.message, m.extra, m.created_at
		FROM inherited_messages i
		JOIN messages m ON m.tenant_id = i.tenant_id AND m.session_id = i.source_session_id
		               AND m.seq BETWEEN i.first_seq AND i.last_seq
		WHERE i.tenant_id = $1 AND i.source_session_id = $2 AND `+exists, tenantID, sessionID, owner)
	b.Queue(`DELETE FROM inherited_messages WHERE tenant_id = $1 AND source_session_id = $2 AND `+exists,
		tenantID, sessionID, owner)
}

// fullHistoryPieces runs query (its $1 the tenant, $2 a session, $3 and
// $4 the first and last seq of a piece) on each piece of a session's full
// history in order, calling fn with each row. db must show one state of
// the session: a REPEATABLE READ transaction when it inherits (a deletion
// of its source moves the rows meanwhile).
func fullHistoryPieces(ctx context.Context, db dbtx, tenantID string, pieces []piece, query string, fn func(p piece, rows pgx.Rows) error) error {
	for _, p := range pieces {
		rows, err := db.Query(ctx, query, tenantID, p.session, p.first, p.last)
		if err != nil {
			return interpretError(err)
		}
		for rows.Next() {
			if err := fn(p, rows); err != nil {
				rows.Close()
				return err
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return interpretError(err)
		}
	}
	return nil
}

// fullHistory calls fn with each message of a session's whole full
// history, after its trimmed prefix, and returns that prefix as the
// messages were read: the trim point and the messages come from one
// snapshot (read from the session's record before, a trim committed in
// between would say a lower trim point than the messages start after). A
// session that inherits nothing (most: one that is not a fork never
// becomes one) is read in one statement (ownHistorySQL) after the one that
// finds it inherits nothing, one round trip more than reading its rows; a
// fork in a REPEATABLE READ transaction.
func (s *Store) fullHistory(ctx context.Context, tenantID, sessionID string, fn func(seq int64, body []byte, extra *string) error) (int64, error) {
	_, ranges, err := historyStart(ctx, s.tenant(tenantID), tenantID, sessionID)
	if err != nil {
		return 0, err
	}
	if len(ranges) == 0 {
		return ownHistory(ctx, s.tenant(tenantID), tenantID, sessionID, fn)
	}
	var trimmed int64
	err = s.readTx(ctx, tenantID, func(tx pgx.Tx) error {
		var ranges []inheritedRange
		var err error
		trimmed, ranges, err = historyStart(ctx, tx, tenantID, sessionID)
		if err != nil {
			return err
		}
		return fullHistoryPieces(ctx, tx, tenantID, historyPieces(sessionID, trimmed, ranges, noLastSeq), fullHistorySQL,
			func(_ piece, rows pgx.Rows) error {
				var (
					seq   int64
					body  []byte
					extra *string
				)
				if err := rows.Scan(&seq, &body, &extra); err != nil {
					return interpretError(err)
				}
				return fn(seq, body, extra)
			})
	})
	if err != nil {
		return 0, err
	}
	return trimmed, nil
}

// ownHistorySQL reads a session's own full history after its trimmed
// prefix, and the prefix's end on every row: one statement, one snapshot,
// an index scan in seq order (a UNION ALL with the session's row would
// sort the whole history before its first row).
const ownHistorySQL = `SELECT seq, message::text, extra::text, ` + trimmedThroughSQL + ` FROM messages
	WHERE tenant_id = $1 AND session_id = $2 AND seq > ` + trimmedThroughSQL + ` ORDER BY seq`

// ownHistory runs ownHistorySQL, calling fn with each message, and returns
// the trimmed prefix it read. With no message after the prefix it reads
// the prefix's end on its own: at least the one the empty read had (a trim
// only grows), so the rows shown, none, still start after it.
func ownHistory(ctx context.Context, db dbtx, tenantID, sessionID string, fn func(seq int64, body []byte, extra *string) error) (int64, error) {
	rows, err := db.Query(ctx, ownHistorySQL, tenantID, sessionID)
	if err != nil {
		return 0, interpretError(err)
	}
	defer rows.Close()
	var (
		trimmed *int64
		seq     int64
		body    []byte
		extra   *string
	)
	for rows.Next() {
		if err := rows.Scan(&seq, &body, &extra, &trimmed); err != nil {
			return 0, interpretError(err)
		}
		if err := fn(seq, body, extra); err != nil {
			return 0, err
		}
	}
	if err := rows.Err(); err != nil {
		return 0, interpretError(err)
	}
	rows.Close()
	if trimmed == nil {
		// No row: 0 for a session that is gone.
		if err := db.QueryRow(ctx, `SELECT coalesce(`+trimmedThroughSQL+`, 0)`, tenantID, sessionID).Scan(&trimmed); err != nil {
			return 0, interpretError(err)
		}
	}
	return *trimmed, nil
}

// historyStart reads, in one statement, a session's trimmed prefix (0 for
// none, or no such session) and the ranges it inherits, in order.
func historyStart(ctx context.Context, db dbtx, tenantID, sessionID string) (int64, []inheritedRange, error) {
	rows, err := db.Query(ctx, `SELECT s.history_trimmed_through, i.first_seq, i.last_seq, i.source_session_id
		FROM sessions s LEFT JOIN inherited_messages i ON i.tenant_id = s.tenant_id AND i.session_id = s.id
		WHERE s.tenant_id = $1 AND s.id = $2 ORDER BY i.first_seq`, tenantID, sessionID)
	if err != nil {
		return 0, nil, interpretError(err)
	}
	defer rows.Close()
	var (
		trimmed int64
		out     []inheritedRange
	)
	for rows.Next() {
		var (
			first, last *int64
			source      *string
		)
		if err := rows.Scan(&trimmed, &first, &last, &source); err != nil {
			return 0, nil, interpretError(err)
		}
		if first != nil {
			out = append(out, inheritedRange{first: *first, last: *last, source: *source})
		}
	}
	return trimmed, out, interpretError(rows.Err())
}
