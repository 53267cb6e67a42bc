package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"strconv"
	"strings"
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
	// KeepIDs keeps the session's id (Session.ID) and its turns' (an
	// operator moving a tenant): a session of the tenant with the same id
	// makes the import fail with ErrConflict. Otherwise they get new ones.
	KeepIDs bool
}

// ImportPart is one part of a document after its session, in document
// order: exactly one field is set. A Message's bytes may be valid only
// until the next part is asked for: SessionImport writes (or copies) them
// before it asks.
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
	// Schedule is one of the session's schedules (it gets a new id, and
	// forgets its last turn's, unless the import keeps ids).
	Schedule *Schedule
}

// ErrSealedElsewhere: the document's sealed secret values were sealed with
// another encryption key than this server's.
var ErrSealedElsewhere = errors.New("the secret option values were sealed with another encryption key than this server's")

// importFlushBytes is about how much an import holds before writing it
// (the full history aside, which streams).
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
	err := s.inTx(ctx, p.TenantID, func(tx pgx.Tx) error {
		var err error
		sess, err = s.importSession(ctx, tx, p)
		if err != nil {
			return err
		}
		w := &importer{tx: tx, tenantID: p.TenantID, sessionID: sess.ID, next: next, keepIDs: p.KeepIDs,
			appRole: s.appRole, choresRole: s.choresRole, citus: s.citus, messages: p.Session.HistoryTrimmedThrough}
		for {
			part, err := w.pull()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return err
			}
			if part.Message != nil || part.Turn != nil {
				// The full history, most of a document, streams into
				// the database as it is read.
				err = w.copyHistory(ctx, part)
			} else {
				err = w.add(ctx, part)
			}
			if err != nil {
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
	sess.TenantID, sess.Owner, sess.ActiveTurnID, sess.TurnLive = p.TenantID, p.Owner, "", false
	switch {
	case !p.KeepIDs:
		sess.ID = NewSessionID()
	case !ValidID("sess_", sess.ID):
		return Session{}, fmt.Errorf("%q is not a session id this server could have made", sess.ID)
	}
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
			pending_tool_calls, owner, forked_from, forked_at, created_at, history_trimmed_through)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, nullif($9, ''), $10, $11, $12, $13)
		RETURNING created_at, updated_at`,
		p.TenantID, sess.ID, in.AgentName, jsonOrNull(in.AgentTools), jsonObject(in.Options), sealed,
		jsonOrNull(in.ClientTools), jsonList(in.Pending), p.Owner, forkedFrom, forkedAt, createdAt, in.HistoryTrimmedThrough).
		Scan(&sess.CreatedAt, &sess.UpdatedAt)
	if err != nil {
		return Session{}, interpretError(err)
	}
	return sess, nil
}

// importer writes an import's rows with COPY: the full history streamed,
// the rest buffered per table a few MiB at a time.
type importer struct {
	tx       pgx.Tx
	tenantID string
	// appRole, choresRole and citus are the store's (copyRows).
	appRole, choresRole string
	citus               bool
	sessionID           string
	next                func() (ImportPart, error)
	keepIDs             bool
	// stashed is a part pulled but not taken yet (copyHistory stops at it).
	stashed *ImportPart

	messages int64 // messages so far: the last one's seq
	// docTurn is the document's id of the last turn, newTurn the id it
	// was given.
	docTurn, newTurn string
	compaction       int64 // the id given to the last compaction
	ids              []int64

	turnRows, compactionRows, replacedRows, writtenRows [][]any
	copies                                              []CompactedPart
	held                                                int
}

// pull returns the part stashed, or the next.
func (w *importer) pull() (ImportPart, error) {
	if p := w.stashed; p != nil {
		w.stashed = nil
		return *p, nil
	}
	return w.next()
}

// importTurnsHeld bounds the turn records held while the full history
// streams: when that many wait, the stream stops to write them.
const importTurnsHeld = 10_000

// copyHistory streams the full history from first on into messages, in
// one COPY, reading the parts as the COPY takes them (the reading and the
// database's work overlap), and holds the turns' records meanwhile, which
// are written once it stops: at the first part that is neither, or when
// importTurnsHeld turns wait.
func (w *importer) copyHistory(ctx context.Context, first ImportPart) error {
	src := &historySource{w: w, part: &first}
	if err := w.copyRows(ctx, "messages",
		[]string{"tenant_id", "session_id", "seq", "turn_id", "origin", "message", "extra", "created_at"}, src); err != nil {
		if src.err != nil {
			return src.err
		}
		return fmt.Errorf("write messages: %w", interpretError(err))
	}
	if src.err != nil {
		return src.err
	}
	return w.flush(ctx)
}

// historySource is the rows of copyHistory's COPY.
type historySource struct {
	w    *importer
	part *ImportPart // the part to take next, if pulled already
	row  []any
	err  error
}

func (h *historySource) Next() bool {
	w := h.w
	for {
		part := h.part
		h.part = nil
		if part == nil {
			p, err := w.pull()
			if errors.Is(err, io.EOF) {
				return false
			}
			if err != nil {
				h.err = err
				return false
			}
			part = &p
		}
		switch {
		case part.Message != nil:
			h.row, h.err = w.messageRow(part.Message)
			return h.err == nil
		case part.Turn != nil:
			if h.err = w.addTurn(part.Turn); h.err != nil {
				return false
			}
			if len(w.turnRows) >= importTurnsHeld {
				return false
			}
		default:
			w.stashed = part
			return false
		}
	}
}

func (h *historySource) Values() ([]any, error) { return h.row, nil }

func (h *historySource) Err() error { return h.err }

// addTurn holds a turn's record, under a new id.
func (w *importer) addTurn(t *Turn) error {
	w.docTurn, w.newTurn = t.ID, NewTurnID()
	if w.keepIDs {
		if !ValidID("turn_", t.ID) {
			return fmt.Errorf("%q is not a turn id this server could have made", t.ID)
		}
		w.newTurn = t.ID
	}
	w.turnRows = append(w.turnRows, []any{w.tenantID, w.sessionID, w.newTurn, string(t.Status), string(t.Stream),
		nullText(string(t.StopReason)), nullText(PgText(t.Error)), nullText(t.ErrorType), t.InputTokens, t.OutputTokens,
		t.CreatedAt, t.FinishedAt, w.messages + 1})
	w.held += 200 + len(t.Error)
	return nil
}

// messageRow is the row of the next message, whose turn is the last one's
// new id.
func (w *importer) messageRow(m *ExportedMessage) ([]any, error) {
	w.messages++
	if m.Seq != w.messages {
		return nil, fmt.Errorf("message %d is not the next (%d)", m.Seq, w.messages)
	}
	var turn *string
	switch m.TurnID {
	case "":
	case w.docTurn:
		id := w.newTurn
		turn = &id
	default:
		return nil, fmt.Errorf("message %d names turn %s, which is not the last turn", m.Seq, m.TurnID)
	}
	// The message's bytes are its line's, valid until the next part is
	// asked for: the COPY encodes the row before it asks.
	var extra []byte
	if len(m.Extra) > 0 {
		extra = m.Extra
	}
	return []any{w.tenantID, w.sessionID, m.Seq, turn, string(m.Origin), []byte(m.Message), extra, m.CreatedAt}, nil
}

// add holds a part that is not of the full history.
func (w *importer) add(ctx context.Context, part ImportPart) error {
	switch {
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
	case part.Schedule != nil:
		return w.addSchedule(ctx, *part.Schedule)
	default:
		return errors.New("an empty part")
	}
	if w.held >= importFlushBytes {
		return w.flush(ctx)
	}
	return nil
}

// copyRows writes the rows of src into table. On PostgreSQL it is a COPY,
// as the chores role, which then comes back to the app role: PostgreSQL
// refuses COPY FROM into a table with row-level security, so an import's
// bulk writes are the one write of a tenant's that passes the tenant wall
// there (docs/security.md). Every row they write has the importer's
// tenant, set by the importer, never read from the document.
//
// On Citus neither works: the coordinator refuses to reach a worker as
// another role within a transaction that wrote there already, and the
// workers refuse the COPY it would send them (an INSERT ... SELECT from
// the coordinator is one too). So there the rows go as multi-row INSERTs,
// as the app role, held by the wall like any other write (insertRows).
func (w *importer) copyRows(ctx context.Context, table string, cols []string, src pgx.CopyFromSource) error {
	if w.citus {
		return insertRows(ctx, w.tx, table, cols, src)
	}
	if _, err := w.tx.Exec(ctx, "SET LOCAL ROLE "+pgx.Identifier{w.choresRole}.Sanitize()); err != nil {
		return err
	}
	if _, err := w.tx.CopyFrom(ctx, pgx.Identifier{table}, cols, src); err != nil {
		return err
	}
	_, err := w.tx.Exec(ctx, "SET LOCAL ROLE "+pgx.Identifier{w.appRole}.Sanitize())
	return err
}

// insertRowsMax is the most rows one of insertRows's INSERTs carries (a
// power of two: see insertRows); insertBytesMax about the most bytes.
const (
	insertRowsMax  = 512
	insertBytesMax = 4 << 20
)

// insertRows writes the rows of src into table with multi-row INSERTs,
// which a Citus coordinator routes as they are to the one shard of the
// tenant. A full INSERT carries insertRowsMax rows, or fewer when they
// reach insertBytesMax; the rows left are written by INSERTs of
// powers of two rows, so that the statements prepared are few (one per
// power of two per table).
func insertRows(ctx context.Context, tx pgx.Tx, table string, cols []string, src pgx.CopyFromSource) error {
	var args []any
	rows, size := 0, 0
	write := func(n int) error {
		sql := insertSQL(table, cols, n)
		_, err := tx.Exec(ctx, sql, args[:n*len(cols)]...)
		args = append(args[:0], args[n*len(cols):]...)
		rows -= n
		return err
	}
	for src.Next() {
		vals, err := src.Values()
		if err != nil {
			return err
		}
		for _, v := range vals {
			switch v := v.(type) {
			case []byte:
				size += len(v)
			case string:
				size += len(v)
			}
			// A row's bytes may be valid only until the next row is
			// asked for (ImportPart): the arguments keep a copy.
			if b, ok := v.([]byte); ok && b != nil {
				v = append([]byte(nil), b...)
			}
			args = append(args, v)
		}
		rows++
		if rows == insertRowsMax || size >= insertBytesMax {
			for rows > 0 {
				if err := write(1 << (bits.Len(uint(rows)) - 1)); err != nil {
					return err
				}
			}
			size = 0
		}
	}
	if err := src.Err(); err != nil {
		return err
	}
	for rows > 0 {
		if err := write(1 << (bits.Len(uint(rows)) - 1)); err != nil {
			return err
		}
	}
	return nil
}

// insertSQL is the INSERT of n rows of cols into table.
func insertSQL(table string, cols []string, n int) string {
	var b strings.Builder
	b.WriteString("INSERT INTO " + pgx.Identifier{table}.Sanitize() + " (")
	for i, c := range cols {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(pgx.Identifier{c}.Sanitize())
	}
	// COPY writes the ids the importer took (compactionID) into an
	// identity column; an INSERT must be told to.
	b.WriteString(") OVERRIDING SYSTEM VALUE VALUES ")
	p := 1
	for r := range n {
		if r > 0 {
			b.WriteString(", ")
		}
		b.WriteByte('(')
		for i := range cols {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString("$" + strconv.Itoa(p))
			p++
		}
		b.WriteByte(')')
	}
	return b.String()
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
		{"compactions", []string{"tenant_id", "session_id", "id", "created_at", "trigger", "strategy", "from_seq", "to_seq",
			"messages_before", "messages_after", "tokens_before", "tokens_after"}, &w.compactionRows},
		{"compaction_replaced", []string{"tenant_id", "session_id", "compaction_id", "seq", "last_seq", "source_seq", "message", "extra"}, &w.replacedRows},
		{"compacted_messages", []string{"tenant_id", "session_id", "seq", "source_seq", "message", "extra"}, &w.writtenRows},
	} {
		if len(*t.rows) == 0 {
			continue
		}
		if err := w.copyRows(ctx, t.table, t.cols, pgx.CopyFromRows(*t.rows)); err != nil {
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

// addSchedule writes one of the session's schedules, its ticks and counts
// as exported: a tick due by now follows the rule of missed ticks
// (docs/background.md#schedules).
func (w *importer) addSchedule(ctx context.Context, sc Schedule) error {
	sc.TenantID, sc.SessionID = w.tenantID, w.sessionID
	switch {
	case !w.keepIDs:
		sc.ID, sc.LastTurnID = NewScheduleID(), ""
	case !ValidID("sch_", sc.ID):
		return fmt.Errorf("%q is not a schedule id this server could have made", sc.ID)
	}
	st, err := scheduleInsert(sc)
	if err != nil {
		return err
	}
	_, err = w.tx.Exec(ctx, st.sql, st.args...)
	return interpretError(err)
}
