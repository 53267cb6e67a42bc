package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/aapd/aapd/aap"
)

// A point cuts a session's history: its first P full-history messages, and
// everything of the session as it stood once the P-th was written. A fork
// copies a session up to a point; an export writes one (the session's end,
// or the end before a running turn). Each reads its source as one state:
// a fork with the source locked against compactions and deletions (FOR KEY
// SHARE, which turns do not wait on), an export in a REPEATABLE READ
// transaction.

// ForkPoint says where a fork cuts its source. The zero value is the whole
// session.
type ForkPoint struct {
	// TurnID, when set, is the end of that turn: the session as it stood
	// when the turn ended, before the next one began.
	TurnID string
	// Messages, when AtMessages, is how many full-history messages the
	// fork takes, from the first.
	Messages   int64
	AtMessages bool
}

// ForkOrigin names the session a fork was copied from.
type ForkOrigin struct {
	SessionID string
	// Messages is how many of the origin's full-history messages the fork
	// took: its point, whichever way it was named.
	Messages int64
}

// PointError is a point that names nothing of the session: a turn it does
// not have, more messages than it holds. The caller's mistake (400).
type PointError struct {
	// Field is the JSON path of the offending value ("at.turn", "at.message").
	Field string
	Msg   string
}

func (e *PointError) Error() string { return e.Field + ": " + e.Msg }

// Reasons a point cannot be taken (PointConflictError.Reason).
const (
	// PointTurnRunning: the point takes something a running turn wrote, or
	// is the running turn's end.
	PointTurnRunning = "turn-running"
	// PointToolCallsOpen: tool calls are unanswered at the point, which is
	// not the session's end (where its pending calls are known exactly and
	// carried).
	PointToolCallsOpen = "tool-calls-open"
	// PointCompactedHistoryGone: the compacted history as it stood at the
	// point was rewritten by a compaction whose replaced history is not
	// kept: made before aapd kept what compactions replace (migration
	// 00010), or dropped by a full-history trim (historytrim.go).
	PointCompactedHistoryGone = "compacted-history-gone"
	// PointHistoryTrimmed: the point is inside the full history's trimmed
	// prefix (retention, historytrim.go).
	PointHistoryTrimmed = "history-trimmed"
)

// PointConflictError is a point the session cannot be cut at as it is now
// (409): Reason says why, Msg says it to a person.
type PointConflictError struct {
	Reason string
	// TurnID is the running turn (PointTurnRunning) or the turn whose
	// calls are open (PointToolCallsOpen), if known.
	TurnID string
	Msg    string
}

func (e *PointConflictError) Error() string { return e.Msg }

// sourceRow is the session a point cuts, as the transaction reads it.
type sourceRow struct {
	Session
	lastSeq int64
	// running is the live turn holding the session ("" for none; a dead
	// turn's claim is no running turn), runningFirst the seq of its first
	// message.
	running      string
	runningFirst int64
	// compactions are the session's compactions, oldest first.
	compactions []compactionBound
	// ranges are the parts of its full history it inherits (inherited.go).
	ranges []inheritedRange
}

// pieces returns the pieces of the source's full history up to seq.
func (src *sourceRow) pieces(seq int64) []piece {
	return historyPieces(src.ID, src.HistoryTrimmedThrough, src.ranges, seq)
}

// compactionBound is a compaction's id and the end of the range it
// rewrote.
type compactionBound struct{ id, toSeq int64 }

// cut is a resolved point.
type cut struct {
	seq int64 // the point: the last full-history message taken
	// pending are the tool calls the session waits on at the point.
	pending []aap.PendingToolCall
	// carried is the last compaction the point carries (0: none), next the
	// first it does not (0: none): see compactedAt.
	carried, next int64
}

// readSource reads the session a point cuts, its compactions and inherited
// ranges, and whether a live turn runs on it, inside tx. ErrNotFound for
// no such session of the tenant (and owner, when owner is set).
//
// With lock, the session and the sessions it inherits from are locked FOR
// KEY SHARE until tx ends: no compaction rewrites its compacted history and
// no deletion moves the rows it reads meanwhile, while its turns go on.
// Without, tx must be REPEATABLE READ.
func (s *Store) readSource(ctx context.Context, tx pgx.Tx, tenantID, owner, id string, lock bool) (*sourceRow, error) {
	forShare := ""
	if lock {
		forShare = " FOR KEY SHARE"
	}
	b := &pgx.Batch{}
	b.Queue(`SELECT `+sessionReadColumns+`, last_seq, `+activeBackgroundSQL+` FROM sessions
		WHERE tenant_id = $1 AND id = $2 AND ($3 = '' OR owner = $3)`+forShare, tenantID, id, owner)
	b.Queue(`SELECT id, to_seq FROM compactions WHERE tenant_id = $1 AND session_id = $2 ORDER BY id`, tenantID, id)
	br := tx.SendBatch(ctx, b)
	defer br.Close()
	var (
		src        sourceRow
		claim      claimRead
		forkedFrom *string
		forkedAt   *int64
		background bool
	)
	sess, err := s.scanSessionWith(br.QueryRow(), &claim.lease, &claim.owner, &forkedFrom, &forkedAt, &src.lastSeq, &background)
	if err != nil {
		return nil, err
	}
	src.Session = sess
	if forkedFrom != nil && forkedAt != nil {
		src.ForkedFrom = &ForkOrigin{SessionID: *forkedFrom, Messages: *forkedAt}
	}
	rows, err := br.Query()
	if err != nil {
		return nil, interpretError(err)
	}
	src.compactions, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (c compactionBound, err error) {
		err = r.Scan(&c.id, &c.toSeq)
		return c, err
	})
	if err != nil {
		return nil, interpretError(err)
	}
	if err := br.Close(); err != nil {
		return nil, interpretError(err)
	}
	if src.ranges, err = lockedRanges(ctx, tx, tenantID, id, lock); err != nil {
		return nil, err
	}
	if src.ActiveTurnID == "" {
		return &src, nil
	}
	// A background turn holds its session until it ends, queued or its
	// process dead: another worker goes on with it (docs/background.md).
	if !background {
		expired, dead, err := claimState(ctx, tx, claim.lease, claim.owner)
		if err != nil || expired || dead {
			return &src, err
		}
	}
	src.running, src.TurnLive = src.ActiveTurnID, true
	err = tx.QueryRow(ctx, `SELECT coalesce(first_seq, $4) FROM turns WHERE tenant_id = $1 AND session_id = $2 AND id = $3`,
		tenantID, id, src.running, src.lastSeq+1).Scan(&src.runningFirst)
	if errors.Is(err, pgx.ErrNoRows) {
		// A claim whose turn record is gone (it was never committed):
		// everything stored is older than the turn.
		src.runningFirst, err = src.lastSeq+1, nil
	}
	return &src, interpretError(err)
}

// lockedRanges reads the ranges a session inherits and, with lock, locks
// the sessions holding them (FOR KEY SHARE). A source being deleted is
// waited for; it has then copied its ranges into the session, which are
// read again.
func lockedRanges(ctx context.Context, tx pgx.Tx, tenantID, id string, lock bool) ([]inheritedRange, error) {
	for attempt := 0; ; attempt++ {
		ranges, err := inheritedRanges(ctx, tx, tenantID, id)
		if err != nil || !lock || len(ranges) == 0 {
			return ranges, err
		}
		var sources []string
		for _, r := range ranges {
			sources = append(sources, r.source)
		}
		var held int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM (SELECT 1 FROM sessions WHERE tenant_id = $1 AND id = ANY($2) FOR KEY SHARE) s`,
			tenantID, sources).Scan(&held); err != nil {
			return nil, interpretError(err)
		}
		if held == len(uniq(sources)) {
			return ranges, nil
		}
		if attempt == 3 {
			return nil, fmt.Errorf("the sessions session %s inherits from kept being deleted: %w", id, ErrConflict)
		}
	}
}

// uniq returns the distinct strings of a list.
func uniq(list []string) map[string]bool {
	out := make(map[string]bool, len(list))
	for _, s := range list {
		out[s] = true
	}
	return out
}

// resolveFork finds the seq a fork's point names.
func resolveFork(ctx context.Context, tx pgx.Tx, src *sourceRow, p ForkPoint) (int64, error) {
	runningErr := func(what string) error {
		return &PointConflictError{Reason: PointTurnRunning, TurnID: src.running,
			Msg: fmt.Sprintf("%s turn %s, which is still running: fork at a point before it (at.message %d or less), or once it has ended",
				what, src.running, src.runningFirst-1)}
	}
	switch {
	case p.TurnID != "":
		if !ValidID("turn_", p.TurnID) {
			return 0, &PointError{Field: "at.turn", Msg: fmt.Sprintf("%q is not a turn id", p.TurnID)}
		}
		if p.TurnID == src.running {
			return 0, runningErr("the point is the end of")
		}
		var (
			createdAt time.Time
			end       *int64
		)
		err := tx.QueryRow(ctx, `
			SELECT t.created_at,
				(SELECT n.first_seq - 1 FROM turns n
				 WHERE n.tenant_id = t.tenant_id AND n.session_id = t.session_id AND (n.created_at, n.id) > (t.created_at, t.id)
				 ORDER BY n.created_at, n.id LIMIT 1)
			FROM turns t WHERE t.tenant_id = $1 AND t.session_id = $2 AND t.id = $3`,
			src.TenantID, src.ID, p.TurnID).Scan(&createdAt, &end)
		if errors.Is(err, pgx.ErrNoRows) {
			return 0, &PointError{Field: "at.turn", Msg: fmt.Sprintf("the session has no turn %s", p.TurnID)}
		}
		if err != nil {
			return 0, interpretError(err)
		}
		if end == nil {
			return src.lastSeq, nil // the last turn: the session's end
		}
		return *end, nil
	case p.AtMessages:
		switch {
		case p.Messages < 0:
			return 0, &PointError{Field: "at.message", Msg: "must be 0 or more"}
		case src.running != "" && p.Messages >= src.runningFirst:
			return 0, runningErr(fmt.Sprintf("message %d is written by", p.Messages))
		case p.Messages > src.lastSeq:
			return 0, &PointError{Field: "at.message", Msg: fmt.Sprintf("the session has %d messages: fork at %d or less", src.lastSeq, src.lastSeq)}
		}
		return p.Messages, nil
	}
	if src.running != "" {
		return 0, runningErr("the whole session includes")
	}
	return src.lastSeq, nil
}

// cutAt completes a point: the pending tool calls there, and which
// compactions it carries.
func cutAt(ctx context.Context, tx pgx.Tx, src *sourceRow, seq int64) (cut, error) {
	c := cut{seq: seq}
	if seq < src.HistoryTrimmedThrough {
		return cut{}, &PointConflictError{Reason: PointHistoryTrimmed, Msg: fmt.Sprintf(
			"the full history's messages 1 to %d were dropped by the tenant's retention policy: cut the session at message %d or later",
			src.HistoryTrimmedThrough, src.HistoryTrimmedThrough)}
	}
	if seq == src.lastSeq && src.running == "" {
		// The session's end: its pending calls are known exactly.
		c.pending = src.Pending
	} else {
		open, err := openToolCalls(ctx, tx, src.TenantID, src.pieces(seq))
		if err != nil {
			return cut{}, err
		}
		if len(open) > 0 {
			return cut{}, &PointConflictError{Reason: PointToolCallsOpen, Msg: fmt.Sprintf(
				"tool calls are unanswered after message %d (%s): cut the session before the message that made them, after their results, or at its end",
				seq, strings.Join(open, ", "))}
		}
	}
	// A compaction is carried when its range ends at or before the point,
	// and so do the ranges of every compaction before it (each rewrote
	// what the one before left).
	for _, cb := range src.compactions {
		if cb.toSeq > seq {
			c.next = cb.id
			break
		}
		c.carried = cb.id
	}
	if c.next != 0 {
		var kept bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM compaction_replaced
			WHERE tenant_id = $1 AND session_id = $2 AND compaction_id = $3)`, src.TenantID, src.ID, c.next).Scan(&kept); err != nil {
			return cut{}, interpretError(err)
		}
		if !kept {
			return cut{}, &PointConflictError{Reason: PointCompactedHistoryGone, Msg: fmt.Sprintf(
				"the compacted history as it stood after message %d was rewritten by a compaction whose replaced history is no longer kept (made before this server kept it, or dropped by retention): cut the session at a later point", seq)}
		}
	}
	return c, nil
}

// openToolCalls returns the ids of the tool calls unanswered at the end of
// the pieces of a full history. Every call is answered before the next
// assistant message (by its result, a denial, or the server closing it), so
// only the last assistant message and the messages after it are read: the
// pieces are searched from the last for it, one index probe each.
func openToolCalls(ctx context.Context, tx pgx.Tx, tenantID string, pieces []piece) ([]string, error) {
	from := -1
	var at int64
	for i := len(pieces) - 1; i >= 0 && from < 0; i-- {
		p := pieces[i]
		var last *int64
		if err := tx.QueryRow(ctx, `SELECT max(seq) FROM messages
			WHERE tenant_id = $1 AND session_id = $2 AND seq BETWEEN $3 AND $4 AND message->>'role' = 'assistant'`,
			tenantID, p.session, p.first, p.last).Scan(&last); err != nil {
			return nil, interpretError(err)
		}
		if last != nil {
			from, at = i, *last
		}
	}
	if from < 0 {
		return nil, nil // no assistant message: no call
	}
	tail := append([]piece{}, pieces[from:]...)
	tail[0].first = at
	var msgs []aap.Message
	err := fullHistoryPieces(ctx, tx, tenantID, tail, fullHistorySQL, func(_ piece, rows pgx.Rows) error {
		m, err := scanStoredMessage(rows, false)
		msgs = append(msgs, m.Message)
		return err
	})
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, p := range aap.PendingFromHistory(msgs, nil) {
		ids = append(ids, fmt.Sprintf("%q", p.ToolCallID))
	}
	return ids, nil
}
