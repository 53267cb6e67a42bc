package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/aapd/aapd/aap"
)

// NewMessage is a message to append to a session's histories, with the
// provider data (opaque to the store) that travels with it.
type NewMessage struct {
	Message aap.Message
	Extra   json.RawMessage
	Origin  Origin
	// ClientID is the id the client gave the message (AG-UI's message ids),
	// if any: recorded with it, so that the client can send its whole thread
	// again and this message is recognised (MessageIDsStored).
	ClientID string
}

// Origin says who wrote a message.
type Origin string

// Message origins.
const (
	// OriginClient: sent by the application (seed history, a user message,
	// a client tool's result).
	OriginClient Origin = "client"
	// OriginAgent: produced by the agent (model output, a server tool's
	// result, a denial).
	OriginAgent Origin = "agent"
	// OriginServer: written by aapd itself to keep the history valid, such as
	// closing tool calls the user moved past.
	OriginServer Origin = "server"
)

// StoredMessage is a message of a history.
type StoredMessage struct {
	// Seq orders the history; it is never reused within a session.
	Seq int64
	// SourceSeq, in the compacted history, is the full-history message this
	// one copies; zero for a message compaction wrote (a summary).
	SourceSeq int64
	Message   aap.Message
	Extra     json.RawMessage
}

// messageRows are messages to append to both histories, numbered from a
// seq the caller chose: the process holding a session's claim numbers its
// messages itself, so a retried write carries the same numbers as the
// first attempt and can be recognised.
type messageRows struct {
	seqs    []int64
	origins []string
	bodies  []string
	extras  []*string
	stored  []StoredMessage
	// clientIDs and clientSeqs are the client ids of the messages that have
	// one, and their seqs (insertClientIDs).
	clientIDs  []string
	clientSeqs []int64
}

func newMessageRows(first int64, msgs []NewMessage) (messageRows, error) {
	r := messageRows{
		seqs: make([]int64, len(msgs)), origins: make([]string, len(msgs)), bodies: make([]string, len(msgs)),
		extras: make([]*string, len(msgs)), stored: make([]StoredMessage, len(msgs)),
	}
	for i, m := range msgs {
		b, err := json.Marshal(m.Message)
		if err != nil {
			return messageRows{}, fmt.Errorf("encode message: %w", err)
		}
		r.bodies[i], r.seqs[i], r.origins[i] = string(b), first+int64(i), string(m.Origin)
		if m.Origin == "" {
			r.origins[i] = string(OriginAgent)
		}
		if len(m.Extra) > 0 {
			e := string(m.Extra)
			r.extras[i] = &e
		}
		r.stored[i] = StoredMessage{Seq: r.seqs[i], SourceSeq: r.seqs[i], Message: m.Message, Extra: m.Extra}
		if m.ClientID != "" {
			r.clientIDs, r.clientSeqs = append(r.clientIDs, m.ClientID), append(r.clientSeqs, r.seqs[i])
		}
	}
	return r, nil
}

// insertClientIDs returns a statement recording the client ids of the
// rows, in the transaction that stores the messages, and its arguments
// (VALUES, as insert).
func (r messageRows) insertClientIDs(tenantID, sessionID string) (string, []any) {
	var b strings.Builder
	b.WriteString(`INSERT INTO message_client_ids (tenant_id, session_id, client_id, seq) VALUES `)
	args := []any{tenantID, sessionID}
	for i := range r.clientIDs {
		n := len(args)
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "($1, $2, $%d::text, $%d::bigint)", n+1, n+2)
		args = append(args, r.clientIDs[i], r.clientSeqs[i])
	}
	return b.String(), args
}

// insert returns a statement appending the rows to the full history, and
// its arguments. It is multi-row VALUES rather than unnest: on Citus
// (docs/citus.md) an INSERT … SELECT is pulled to the coordinator and
// commits in two phases even for one shard, while VALUES go straight to
// the shard.
func (r messageRows) insert(tenantID, sessionID string, turnID *string) (string, []any) {
	var b strings.Builder
	b.WriteString(`INSERT INTO messages (tenant_id, session_id, seq, turn_id, origin, message, extra) VALUES `)
	args := []any{tenantID, sessionID, turnID}
	for i := range r.seqs {
		n := len(args)
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "($1, $2, $%d::bigint, $3::text, $%d::text, $%d::text::json, $%d::text::json)", n+1, n+2, n+3, n+4)
		args = append(args, r.seqs[i], r.origins[i], r.bodies[i], r.extras[i])
	}
	return b.String(), args
}

// insertCompacted is insert for the compacted history.
func (r messageRows) insertCompacted(tenantID, sessionID string) (string, []any) {
	var b strings.Builder
	b.WriteString(`INSERT INTO compacted_messages (tenant_id, session_id, seq, source_seq, message, extra) VALUES `)
	args := []any{tenantID, sessionID}
	for i := range r.seqs {
		n := len(args)
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "($1, $2, $%d::bigint, $%d::bigint, $%d::text::json, $%d::text::json)", n+1, n+1, n+2, n+3)
		args = append(args, r.seqs[i], r.bodies[i], r.extras[i])
	}
	return b.String(), args
}

// HistoryParams selects a history of a session.
type HistoryParams struct {
	TenantID  string
	SessionID string
	Type      aap.HistoryType
}

// HistoryEach calls fn with each message of a history, in order, as the JSON
// it was stored as. Rows stream from the database, so a history of any length
// is served without holding it in memory. It does not check that the session
// exists. For the full history it returns where the tenant's retention
// trimmed it (historytrim.go: the messages 1 to it are gone; 0 for none, and
// for the compacted history), as of the rows it read: what a read of the
// full history says beside them, never the session's record read apart (a
// trim in between would have it say less than the rows show).
func (s *Store) HistoryEach(ctx context.Context, p HistoryParams, fn func(seq int64, message json.RawMessage) error) (trimmedThrough int64, err error) {
	var (
		seq  int64
		body []byte
	)
	if p.Type == aap.HistoryCompacted {
		err = eachRow(ctx, s.tenant(p.TenantID), `SELECT seq, message::text FROM compacted_messages
			WHERE tenant_id = $1 AND session_id = $2 ORDER BY seq`, []any{p.TenantID, p.SessionID}, func(rows pgx.Rows) error {
			if err := rows.Scan(&seq, &body); err != nil {
				return interpretError(err)
			}
			return fn(seq, body)
		})
	} else {
		trimmedThrough, err = s.fullHistory(ctx, p.TenantID, p.SessionID, func(seq int64, body []byte, _ *string) error {
			return fn(seq, body)
		})
	}
	if err != nil {
		return 0, fmt.Errorf("read %s history of %s: %w", p.Type, p.SessionID, err)
	}
	return trimmedThrough, nil
}

// fullHistorySQL reads a piece of a full history (fullHistoryPieces).
const fullHistorySQL = `SELECT seq, message::text, extra::text FROM messages
	WHERE tenant_id = $1 AND session_id = $2 AND seq BETWEEN $3 AND $4 ORDER BY seq`

// eachRow runs a query and calls fn with each of its rows.
func eachRow(ctx context.Context, db dbtx, query string, args []any, fn func(pgx.Rows) error) error {
	rows, err := db.Query(ctx, query, args...)
	if err != nil {
		return interpretError(err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := fn(rows); err != nil {
			return err
		}
	}
	return interpretError(rows.Err())
}

// History loads a whole history of a session, decoded. For the compacted
// history this is what the model sees; the full history may be long, and is
// better served with HistoryEach.
func (s *Store) History(ctx context.Context, p HistoryParams) ([]StoredMessage, error) {
	if p.Type == aap.HistoryCompacted {
		return history(ctx, s.tenant(p.TenantID), p)
	}
	var out []StoredMessage
	_, err := s.fullHistory(ctx, p.TenantID, p.SessionID, func(seq int64, body []byte, extra *string) error {
		m := StoredMessage{Seq: seq, SourceSeq: seq}
		if err := json.Unmarshal(body, &m.Message); err != nil {
			return fmt.Errorf("decode message %d: %w", seq, err)
		}
		if extra != nil {
			m.Extra = json.RawMessage(*extra)
		}
		out = append(out, m)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("load %s history of %s: %w", p.Type, p.SessionID, err)
	}
	return out, nil
}

// history loads a compacted history.
func history(ctx context.Context, db dbtx, p HistoryParams) ([]StoredMessage, error) {
	rows, err := db.Query(ctx, `SELECT seq, coalesce(source_seq, 0), message::text, extra::text FROM compacted_messages
		WHERE tenant_id = $1 AND session_id = $2 ORDER BY seq`, p.TenantID, p.SessionID)
	if err != nil {
		return nil, fmt.Errorf("load %s history of %s: %w", p.Type, p.SessionID, interpretError(err))
	}
	out, err := scanHistory(rows)
	if err != nil {
		return nil, fmt.Errorf("load %s history of %s: %w", p.Type, p.SessionID, err)
	}
	return out, nil
}

// scanHistory reads rows of (seq, source_seq, message, extra), decoded.
func scanHistory(rows interface {
	Next() bool
	Scan(...any) error
	Err() error
	Close()
}) ([]StoredMessage, error) {
	defer rows.Close()
	var out []StoredMessage
	for rows.Next() {
		m, err := scanStoredMessage(rows, true)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, interpretError(rows.Err())
}

// scanStoredMessage scans a row of (seq, source_seq, message, extra), or of
// (seq, message, extra) without a source seq (the full history's: its own).
func scanStoredMessage(row interface{ Scan(...any) error }, withSource bool) (StoredMessage, error) {
	var (
		m     StoredMessage
		body  []byte
		extra *string
		err   error
	)
	if withSource {
		err = row.Scan(&m.Seq, &m.SourceSeq, &body, &extra)
	} else {
		err = row.Scan(&m.Seq, &body, &extra)
		m.SourceSeq = m.Seq
	}
	if err != nil {
		return StoredMessage{}, interpretError(err)
	}
	if err := json.Unmarshal(body, &m.Message); err != nil {
		return StoredMessage{}, fmt.Errorf("decode message %d: %w", m.Seq, err)
	}
	if extra != nil {
		m.Extra = json.RawMessage(*extra)
	}
	return m, nil
}
