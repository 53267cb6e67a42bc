package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/jackc/pgx/v5"
)

// SessionImportParams creates a session from an export document.
type SessionImportParams struct {
	TenantID string
	// Owner is the end user the session belongs to ("" for none).
	Owner string
	// Session is the document's session: its agent, server tools, options,
	// client tools, pending tool calls, creation time and origin. Its
	// SecretOptions are sealed anew; Sealed, when set, are secret values
	// sealed by a server with the same key, kept as they are.
	Session ExportedSession
}

// ImportPart is one part of a document after its session, in document
// order: exactly one field is set.
type ImportPart struct {
	// Turn is a turn's record; the session gets a new id for it.
	Turn *Turn
	// Message is the next full-history message; its TurnID is the last
	// turn's id in the document, or "" for none.
	Message    *ExportedMessage
	Compaction *Compaction
	// Replaced is part of what the last compaction replaced.
	Replaced  *CompactedPart
	Compacted *CompactedPart
}

// ErrSealedElsewhere: the document's sealed secret values were sealed with
// another encryption key than this server's.
var ErrSealedElsewhere = errors.New("the secret option values were sealed with another encryption key than this server's")

// importFlushBytes is about how much an import holds before writing it.
const importFlushBytes = 4 << 20

// SessionImport creates a session of the tenant from the parts next
// returns, in one transaction: all of it or, when next fails (or the
// database refuses), nothing. next returns io.EOF after the last part. The
// parts are written as they come, with COPY, a few MiB at a time, so a
// session of any size is imported in constant memory.
//
// The parts are taken as the caller's parser checked them (package
// transfer): in order, every reference resolved.
func (s *Store) SessionImport(ctx context.Context, p SessionImportParams, next func() (ImportPart, error)) (Session, error) {
	var sess Session
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		sess, err = s.importSession(ctx, tx, p)
		if err != nil {
			return err
		}
		w := &importer{tx: tx, tenantID: p.TenantID, sessionID: sess.ID}
		for {
			part, err := next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return err
			}
			if err := w.add(ctx, part); err != nil {
				return err
			}
		}
		if err := w.flush(ctx); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE sessions SET last_seq = $3 WHERE tenant_id = $1 AND id = $2`, p.TenantID, sess.ID, w.messages)
		return interpretError(err)
	})
	if err != nil {
		return Session{}, fmt.Errorf("import session: %w", err)
	}
	return sess, nil
}

// importSession inserts the session row of an import.
func (s *Store) importSession(ctx context.Context, tx pgx.Tx, p SessionImportParams) (Session, error) {
	in := p.Session
	sealed := in.Sealed
	if sealed != nil {
		if _, err := s.sealer.openJSON(sealed); err != nil {
			return Session{}, ErrSealedElsewhere
		}
	} else {
		var err error
		if sealed, err = s.sealer.sealJSON(in.SecretOptions); err != nil {
			return Session{}, fmt.Errorf("seal secret options: %w", err)
		}
	}
	sess := in.Session
	sess.TenantID, sess.ID, sess.Owner, sess.ActiveTurnID, sess.TurnLive = p.TenantID, NewSessionID(), p.Owner, "", false
	var forkedFrom *string
	var forkedAt *int64
	if in.ForkedFrom != nil {
		forkedFrom, forkedAt = &in.ForkedFrom.SessionID, &in.ForkedFrom.Messages
	}
	createdAt := in.CreatedAt
	if createdAt.IsZero() {
		createdAt = time.Now()
	}
	err := tx.QueryRow(ctx, `
		INSERT INTO sessions (tenant_id, id, agent_name, agent_tools, options, secret_options, client_tools,
			pending_tool_calls, owner, forked_from, forked_at, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, nullif($9, ''), $10, $11, $12)
		RETURNING created_at, updated_at`,
		p.TenantID, sess.ID, in.AgentName, jsonOrNull(in.AgentTools), jsonObject(in.Options), sealed,
		jsonOrNull(in.ClientTools), jsonList(in.Pending), p.Owner, forkedFrom, forkedAt, createdAt).
		Scan(&sess.CreatedAt, &sess.UpdatedAt)
	if err != nil {
		return Session{}, interpretError(err)
	}
	return sess, nil
}

// importer buffers an import's rows per table and writes them with COPY.
type importer struct {
	tx        pgx.Tx
	tenantID  string
	sessionID string

	messages int64 // messages so far: the last one's seq
	// docTurn is the document's id of the last turn, newTurn the id it
	// was given.
	docTurn, newTurn string
	compaction       int64 // the id given to the last compaction
	ids              []int64

	turnRows, messageRows, compactionRows, replacedRows, writtenRows [][]any
	copies                                                           []CompactedPart
	held                                                             int
}

func (w *importer) add(ctx context.Context, part ImportPart) error {
	switch {
	case part.Turn != nil:
		t := part.Turn
		w.docTurn, w.newTurn = t.ID, NewTurnID()
		w.turnRows = append(w.turnRows, []any{w.tenantID, w.sessionID, w.newTurn, string(t.Status), string(t.Stream),
			nullText(string(t.StopReason)), nullText(PgText(t.Error)), nullText(t.ErrorType), t.InputTokens, t.OutputTokens,
			t.CreatedAt, t.FinishedAt, w.messages + 1})
		w.held += 200 + len(t.Error)
	case part.Message != nil:
		m := part.Message
		w.messages++
		if m.Seq != w.messages {
			return fmt.Errorf("message %d is not the next (%d)", m.Seq, w.messages)
		}
		var turn *string
		switch m.TurnID {
		case "":
		case w.docTurn:
			id := w.newTurn
			turn = &id
		default:
			return fmt.Errorf("message %d names turn %s, which is not the last turn", m.Seq, m.TurnID)
		}
		w.messageRows = append(w.messageRows, []any{w.tenantID, w.sessionID, m.Seq, turn, string(m.Origin),
			string(m.Message), rawOrNull(m.Extra), m.CreatedAt})
		w.held += 100 + len(m.Message) + len(m.Extra)
	case part.Compaction != nil:
		c := part.Compaction
		id, err := w.compactionID(ctx)
		if err != nil {
			return err
		}
		w.compaction = id
		w.compactionRows = append(w.compactionRows, []any{w.tenantID, w.sessionID, id, c.CreatedAt, c.Trigger, c.Strategy,
			c.FromSeq, c.ToSeq, c.MessagesBefore, c.MessagesAfter, c.TokensBefore, c.TokensAfter})
		w.held += 200
	case part.Replaced != nil:
		r := part.Replaced
		if w.compaction == 0 {
			return errors.New("a replaced part before any compaction")
		}
		row := []any{w.tenantID, w.sessionID, w.compaction, r.Seq, r.Seq, nil, string(r.Message), rawOrNull(r.Extra)}
		if r.Copies > 0 {
			row[4], row[5], row[6] = r.Seq+r.Copies-1, r.SourceSeq, nil
		}
		w.replacedRows = append(w.replacedRows, row)
		w.held += 100 + len(r.Message) + len(r.Extra)
	case part.Compacted != nil:
		c := part.Compacted
		if c.Copies > 0 {
			w.copies = append(w.copies, *c)
			w.held += 100
			break
		}
		w.writtenRows = append(w.writtenRows, []any{w.tenantID, w.sessionID, c.Seq, nil, string(c.Message), rawOrNull(c.Extra)})
		w.held += 100 + len(c.Message) + len(c.Extra)
	default:
		return errors.New("an empty part")
	}
	if w.held >= importFlushBytes {
		return w.flush(ctx)
	}
	return nil
}

// compactionID returns a new compaction id from the table's identity, a
// block of them at a time: the session's later compactions get greater ids,
// as its imported ones keep their order.
func (w *importer) compactionID(ctx context.Context) (int64, error) {
	if len(w.ids) == 0 {
		rows, err := w.tx.Query(ctx, `SELECT nextval(pg_get_serial_sequence('compactions', 'id')) FROM generate_series(1, 256) ORDER BY 1`)
		if err != nil {
			return 0, interpretError(err)
		}
		if w.ids, err = pgx.CollectRows(rows, pgx.RowTo[int64]); err != nil {
			return 0, interpretError(err)
		}
	}
	id := w.ids[0]
	w.ids = w.ids[1:]
	return id, nil
}

// flush writes what the importer holds, parents before children.
func (w *importer) flush(ctx context.Context) error {
	for _, t := range []struct {
		table string
		cols  []string
		rows  *[][]any
	}{
		{"turns", []string{"tenant_id", "session_id", "id", "status", "stream", "stop_reason", "error", "error_type",
			"input_tokens", "output_tokens", "created_at", "finished_at", "first_seq"}, &w.turnRows},
		{"messages", []string{"tenant_id", "session_id", "seq", "turn_id", "origin", "message", "extra", "created_at"}, &w.messageRows},
		{"compactions", []string{"tenant_id", "session_id", "id", "created_at", "trigger", "strategy", "from_seq", "to_seq",
			"messages_before", "messages_after", "tokens_before", "tokens_after"}, &w.compactionRows},
		{"compaction_replaced", []string{"tenant_id", "session_id", "compaction_id", "seq", "last_seq", "source_seq", "message", "extra"}, &w.replacedRows},
		{"compacted_messages", []string{"tenant_id", "session_id", "seq", "source_seq", "message", "extra"}, &w.writtenRows},
	} {
		if len(*t.rows) == 0 {
			continue
		}
		if _, err := w.tx.CopyFrom(ctx, pgx.Identifier{t.table}, t.cols, pgx.CopyFromRows(*t.rows)); err != nil {
			return fmt.Errorf("write %s: %w", t.table, interpretError(err))
		}
		*t.rows = (*t.rows)[:0]
	}
	if len(w.copies) > 0 {
		// A compacted history's copies are read from the full history
		// just written.
		b := &pgx.Batch{}
		for _, c := range w.copies {
			b.Queue(`INSERT INTO compacted_messages (tenant_id, session_id, seq, source_seq, message, extra)
				SELECT tenant_id, session_id, $3 + (seq - $4), seq, message, extra FROM messages
				WHERE tenant_id = $1 AND session_id = $2 AND seq BETWEEN $4 AND $5`,
				w.tenantID, w.sessionID, c.Seq, c.SourceSeq, c.SourceSeq+c.Copies-1)
		}
		if err := w.tx.SendBatch(ctx, b).Close(); err != nil {
			return fmt.Errorf("write the compacted history: %w", interpretError(err))
		}
		w.copies = w.copies[:0]
	}
	w.held = 0
	return nil
}

func nullText(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func rawOrNull(b []byte) *string {
	if len(b) == 0 {
		return nil
	}
	s := string(b)
	return &s
}
