package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// SessionExportParams selects the session an export reads.
type SessionExportParams struct {
	TenantID string
	// Owner confines the export to a session of this end user ("" for
	// any): another's is ErrNotFound.
	Owner     string
	SessionID string
}

// SessionWriter receives a session's parts in the order of its export
// document (package transfer): the session, its turns and full-history
// messages in the order they were written (a turn before its messages),
// its compactions each followed by what it replaced, and its compacted
// history.
type SessionWriter interface {
	Session(ExportedSession) error
	Turn(Turn) error
	Message(ExportedMessage) error
	Compaction(Compaction) error
	Replaced(CompactedPart) error
	Compacted(CompactedPart) error
}

// ExportedSession is the session an export reads, as it stood at its
// point.
type ExportedSession struct {
	// Session is its configuration, owner, creation time, origin and the
	// tool calls pending at the point. SecretOptions holds the secret
	// values in the clear: a writer lists their names, never their values.
	Session
	// Sealed is the secret option values as stored (sealed with the
	// server's key); nil when none are set.
	Sealed []byte
	// Messages is the point: how many full-history messages it holds.
	Messages int64
	// LeftOut is the running turn the export leaves out, if any.
	LeftOut string
	// Schedules are the session's schedules (at most
	// MaxSchedulesPerSession), oldest first.
	Schedules []Schedule
}

// ExportedMessage is a full-history message as an export writes it.
type ExportedMessage struct {
	Seq int64
	// TurnID is the turn of the session that wrote it; "" for a message of
	// no turn (a seed, or one the session inherited as a fork).
	TurnID    string
	Origin    Origin
	CreatedAt time.Time
	Message   json.RawMessage
	Extra     json.RawMessage
}

// CompactedPart is part of a compacted history (or of what a compaction
// replaced): a run of copies of full-history messages, or one message
// compaction wrote.
type CompactedPart struct {
	// Seq is its first compacted seq.
	Seq int64
	// Copies, when above zero, is how many messages the run copies: seqs
	// Seq..Seq+Copies-1 copy the full-history messages from SourceSeq on.
	Copies    int64
	SourceSeq int64
	// Message and Extra are the message compaction wrote (Copies 0).
	Message json.RawMessage
	Extra   json.RawMessage
}

// SessionExport reads a session, as one state (a REPEATABLE READ
// transaction), and hands its parts to w in document order, streaming
// them from the database: a session of any length is exported in constant
// memory. A session with a running turn is exported as it stood before the
// turn began, leaving the turn out; if a tool call was open then, it is a
// *PointConflictError (PointToolCallsOpen), as a fork there would be.
func (s *Store) SessionExport(ctx context.Context, p SessionExportParams, w SessionWriter) error {
	err := s.readTx(ctx, p.TenantID, func(tx pgx.Tx) error {
		src, err := s.readSource(ctx, tx, p.TenantID, p.Owner, p.SessionID, false)
		if err != nil {
			return err
		}
		seq := src.lastSeq
		if src.running != "" {
			seq = src.runningFirst - 1
		}
		c, err := cutAt(ctx, tx, src, seq)
		if err != nil {
			return err
		}
		if c.next != 0 {
			// Compactions never run during a turn: every one ended
			// before the point.
			return fmt.Errorf("compaction %d ends after message %d", c.next, seq)
		}
		x := exporter{tx: tx, tenantID: p.TenantID, src: src, seq: seq, w: w}
		return x.run(ctx, c)
	})
	if err != nil {
		return fmt.Errorf("export session %s: %w", p.SessionID, interpretError(err))
	}
	return nil
}

// exporter reads one session for SessionExport.
type exporter struct {
	tx       pgx.Tx
	tenantID string
	src      *sourceRow
	seq      int64
	w        SessionWriter
}

func (x *exporter) run(ctx context.Context, c cut) error {
	var sealed []byte
	if err := x.tx.QueryRow(ctx, `SELECT secret_options FROM sessions WHERE tenant_id = $1 AND id = $2`,
		x.tenantID, x.src.ID).Scan(&sealed); err != nil {
		return interpretError(err)
	}
	rows, err := x.tx.Query(ctx, `SELECT `+scheduleColumns+` FROM schedules WHERE tenant_id = $1 AND session_id = $2 ORDER BY id`,
		x.tenantID, x.src.ID)
	if err != nil {
		return interpretError(err)
	}
	schedules, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Schedule, error) { return scanSchedule(r) })
	if err != nil {
		return interpretError(err)
	}
	sess := x.src.Session
	sess.Pending = c.pending
	if err := x.w.Session(ExportedSession{Session: sess, Sealed: sealed, Messages: x.seq, LeftOut: x.src.running, Schedules: schedules}); err != nil {
		return err
	}
	if err := x.history(ctx); err != nil {
		return err
	}
	if err := x.compactions(ctx); err != nil {
		return err
	}
	return x.compacted(ctx)
}

// history writes the turns and the full history, merged in the order they
// were written: a turn just before its first message. Each is read through
// a cursor, a few rows at a time, so neither is held whole.
func (x *exporter) history(ctx context.Context) error {
	turns, err := x.openTurns(ctx)
	if err != nil {
		return err
	}
	// emitTurns writes the turns that began before message seq.
	emitTurns := func(seq int64) error {
		for {
			t, pos, ok, err := turns.next(ctx)
			if err != nil || !ok {
				return err
			}
			if pos > seq {
				turns.unread()
				return nil
			}
			if err := x.w.Turn(t); err != nil {
				return err
			}
		}
	}
	for i, p := range x.src.pieces(x.seq) {
		name := fmt.Sprintf("export_messages_%d", i)
		if _, err := x.tx.Exec(ctx, `DECLARE `+name+` NO SCROLL CURSOR FOR
			SELECT seq, coalesce(turn_id, ''), origin, created_at, message::text, extra::text FROM messages
			WHERE tenant_id = $1 AND session_id = $2 AND seq BETWEEN $3 AND $4 ORDER BY seq`,
			x.tenantID, p.session, p.first, p.last); err != nil {
			return interpretError(err)
		}
		for {
			page, err := fetchPage(ctx, x.tx, name, func(r pgx.Rows) (m ExportedMessage, err error) {
				var extra *string
				err = r.Scan(&m.Seq, &m.TurnID, &m.Origin, &m.CreatedAt, &m.Message, &extra)
				if extra != nil {
					m.Extra = json.RawMessage(*extra)
				}
				return m, err
			})
			if err != nil {
				return err
			}
			for _, m := range page {
				if p.inherited {
					m.TurnID = "" // the turn was its source's
				}
				if err := emitTurns(m.Seq); err != nil {
					return err
				}
				if err := x.w.Message(m); err != nil {
					return err
				}
			}
			if len(page) < cursorPage {
				break
			}
		}
	}
	// The turns that wrote nothing after the last message.
	return emitTurns(x.seq + 1)
}

// cursorPage is how many rows a cursor's fetch reads.
const cursorPage = 64

// fetchPage reads the next page of a cursor.
func fetchPage[T any](ctx context.Context, tx pgx.Tx, cursor string, scan func(pgx.Rows) (T, error)) ([]T, error) {
	rows, err := tx.Query(ctx, fmt.Sprintf(`FETCH %d FROM %s`, cursorPage, cursor))
	if err != nil {
		return nil, interpretError(err)
	}
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			rows.Close()
			return nil, interpretError(err)
		}
		out = append(out, v)
	}
	return out, interpretError(rows.Err())
}

// turnCursor pages through a session's turns in the order they began, each
// with its position: the seq of its first message.
type turnCursor struct {
	tx   pgx.Tx
	page []positionedTurn
	at   int
	done bool
}

type positionedTurn struct {
	turn Turn
	pos  int64
}

// openTurns declares the cursor of the turns an export writes: every turn
// but the running one it leaves out. A turn whose process died (its claim
// dead, not yet taken over) is written as interrupted, which it is.
func (x *exporter) openTurns(ctx context.Context) (*turnCursor, error) {
	// A turn recorded before turns kept their first seq (migration 00003)
	// is placed by its first message.
	if _, err := x.tx.Exec(ctx, `DECLARE export_turns NO SCROLL CURSOR FOR
		SELECT `+turnColumns+`,
			coalesce(t.first_seq, (SELECT min(seq) FROM messages m
			                       WHERE m.tenant_id = t.tenant_id AND m.session_id = t.session_id AND m.turn_id = t.id), 0) AS pos
		FROM turns t WHERE tenant_id = $1 AND session_id = $2 AND id <> $3
		ORDER BY pos, created_at, id`, x.tenantID, x.src.ID, x.src.running); err != nil {
		return nil, interpretError(err)
	}
	return &turnCursor{tx: x.tx}, nil
}

func (c *turnCursor) next(ctx context.Context) (Turn, int64, bool, error) {
	if c.at == len(c.page) {
		if c.done {
			return Turn{}, 0, false, nil
		}
		page, err := fetchPage(ctx, c.tx, "export_turns", func(r pgx.Rows) (pt positionedTurn, err error) {
			pt.turn, err = scanTurn(r, &pt.pos)
			return pt, err
		})
		if err != nil {
			return Turn{}, 0, false, err
		}
		c.page, c.at, c.done = page, 0, len(page) < cursorPage
		if len(page) == 0 {
			return Turn{}, 0, false, nil
		}
	}
	pt := c.page[c.at]
	c.at++
	if pt.turn.Status == TurnRunning {
		pt.turn.Status = TurnInterrupted
	}
	return pt.turn, pt.pos, true, nil
}

// unread puts back the turn next returned last.
func (c *turnCursor) unread() { c.at-- }

// compactions writes the session's compactions, oldest first, each followed
// by what it replaced.
func (x *exporter) compactions(ctx context.Context) error {
	rows, err := x.tx.Query(ctx, `
		SELECT c.id, c.created_at, c.trigger, c.strategy, c.from_seq, c.to_seq,
			c.messages_before, c.messages_after, c.tokens_before, c.tokens_after,
			r.seq, r.last_seq, r.source_seq, r.message::text, r.extra::text
		FROM compactions c
		LEFT JOIN compaction_replaced r ON r.tenant_id = c.tenant_id AND r.session_id = c.session_id AND r.compaction_id = c.id
		  AND r.seq <= $3 AND (r.source_seq IS NULL OR r.source_seq <= $3)
		WHERE c.tenant_id = $1 AND c.session_id = $2
		ORDER BY c.id, r.seq`, x.tenantID, x.src.ID, x.seq)
	if err != nil {
		return interpretError(err)
	}
	defer rows.Close()
	var last int64
	for rows.Next() {
		var (
			c                  Compaction
			seq, end, source   *int64
			message, extraText *string
		)
		if err := rows.Scan(&c.ID, &c.CreatedAt, &c.Trigger, &c.Strategy, &c.FromSeq, &c.ToSeq,
			&c.MessagesBefore, &c.MessagesAfter, &c.TokensBefore, &c.TokensAfter,
			&seq, &end, &source, &message, &extraText); err != nil {
			return interpretError(err)
		}
		if c.ID != last {
			if err := x.w.Compaction(c); err != nil {
				return err
			}
			last = c.ID
		}
		if seq == nil {
			continue // a compaction made before they kept what they replaced
		}
		part := CompactedPart{Seq: *seq}
		if source != nil {
			part.SourceSeq = *source
			part.Copies = min(*end-*seq+1, x.seq-*source+1, x.seq-*seq+1)
		} else {
			part.Message = json.RawMessage(*message)
			if extraText != nil {
				part.Extra = json.RawMessage(*extraText)
			}
		}
		if err := x.w.Replaced(part); err != nil {
			return err
		}
	}
	return interpretError(rows.Err())
}

// compacted writes the compacted history as it stood at the point: runs of
// copies of full-history messages, and the messages compaction wrote.
func (x *exporter) compacted(ctx context.Context) error {
	// A copy of a message the full history's trimmed prefix dropped is
	// written whole, as a message compaction wrote: nothing refers to a
	// dropped position.
	rows, err := x.tx.Query(ctx, `SELECT seq, CASE WHEN source_seq > $4 THEN source_seq END,
			CASE WHEN source_seq IS NULL OR source_seq <= $4 THEN message::text END, extra::text
		FROM compacted_messages
		WHERE tenant_id = $1 AND session_id = $2 AND seq <= $3 AND (source_seq IS NULL OR source_seq <= $3)
		ORDER BY seq`, x.tenantID, x.src.ID, x.seq, x.src.HistoryTrimmedThrough)
	if err != nil {
		return interpretError(err)
	}
	defer rows.Close()
	var run CompactedPart
	flush := func() error {
		if run.Copies == 0 {
			return nil
		}
		err := x.w.Compacted(run)
		run = CompactedPart{}
		return err
	}
	for rows.Next() {
		var (
			seq            int64
			source         *int64
			message, extra *string
		)
		if err := rows.Scan(&seq, &source, &message, &extra); err != nil {
			return interpretError(err)
		}
		if source != nil && run.Copies > 0 && seq == run.Seq+run.Copies && *source == run.SourceSeq+run.Copies {
			run.Copies++
			continue
		}
		if err := flush(); err != nil {
			return err
		}
		if source != nil {
			run = CompactedPart{Seq: seq, Copies: 1, SourceSeq: *source}
			continue
		}
		part := CompactedPart{Seq: seq, Message: json.RawMessage(*message)}
		if extra != nil {
			part.Extra = json.RawMessage(*extra)
		}
		if err := x.w.Compacted(part); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return interpretError(err)
	}
	return flush()
}
