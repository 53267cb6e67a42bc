package store

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/aapd/aapd/aap"
)

// NewMessage is a message to append to a session's histories, with the
// provider data (opaque to the store) that travels with it.
type NewMessage struct {
	Message aap.Message
	Extra   json.RawMessage
	Origin  Origin
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

// appendMessages appends messages to both histories of a session in tx,
// taking the next sequence numbers from the session row (which it locks),
// and returns them as stored.
func appendMessages(ctx context.Context, tx pgx.Tx, tenantID, sessionID, turnID string, msgs []NewMessage) ([]StoredMessage, error) {
	if len(msgs) == 0 {
		return nil, nil
	}
	var last int64
	err := tx.QueryRow(ctx, `
		UPDATE sessions SET last_seq = last_seq + $3, updated_at = now()
		WHERE tenant_id = $1 AND id = $2 RETURNING last_seq`,
		tenantID, sessionID, len(msgs)).Scan(&last)
	if err != nil {
		return nil, interpretError(err)
	}
	first := last - int64(len(msgs)) + 1
	stored := make([]StoredMessage, len(msgs))
	bodies := make([]string, len(msgs))
	extras := make([]*string, len(msgs))
	origins := make([]string, len(msgs))
	seqs := make([]int64, len(msgs))
	for i, m := range msgs {
		b, err := json.Marshal(m.Message)
		if err != nil {
			return nil, fmt.Errorf("encode message: %w", err)
		}
		bodies[i], seqs[i], origins[i] = string(b), first+int64(i), string(m.Origin)
		if m.Origin == "" {
			origins[i] = string(OriginAgent)
		}
		if len(m.Extra) > 0 {
			e := string(m.Extra)
			extras[i] = &e
		}
		stored[i] = StoredMessage{Seq: seqs[i], SourceSeq: seqs[i], Message: m.Message, Extra: m.Extra}
	}
	var turn *string
	if turnID != "" {
		turn = &turnID
	}
	if _, err := tx.Exec(ctx, `
		INSERT INTO messages (tenant_id, session_id, seq, turn_id, origin, message, extra)
		SELECT $1, $2, s, $3, o, m::json, e::json
		FROM unnest($4::bigint[], $5::text[], $6::text[], $7::text[]) AS t(s, o, m, e)`,
		tenantID, sessionID, turn, seqs, origins, bodies, extras); err != nil {
		return nil, interpretError(err)
	}
	if _, err := tx.Exec(ctx, `
		INSERT INTO compacted_messages (tenant_id, session_id, seq, source_seq, message, extra)
		SELECT $1, $2, s, s, m::json, e::json FROM unnest($3::bigint[], $4::text[], $5::text[]) AS t(s, m, e)`,
		tenantID, sessionID, seqs, bodies, extras); err != nil {
		return nil, interpretError(err)
	}
	return stored, nil
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
// exists.
func (s *Store) HistoryEach(ctx context.Context, p HistoryParams, fn func(seq int64, message json.RawMessage) error) error {
	table := "messages"
	if p.Type == aap.HistoryCompacted {
		table = "compacted_messages"
	}
	rows, err := s.pool.Query(ctx, `SELECT seq, message::text FROM `+table+`
		WHERE tenant_id = $1 AND session_id = $2 ORDER BY seq`, p.TenantID, p.SessionID)
	if err != nil {
		return fmt.Errorf("read %s history of %s: %w", p.Type, p.SessionID, interpretError(err))
	}
	defer rows.Close()
	var (
		seq  int64
		body []byte
	)
	for rows.Next() {
		if err := rows.Scan(&seq, &body); err != nil {
			return fmt.Errorf("read %s history of %s: %w", p.Type, p.SessionID, interpretError(err))
		}
		if err := fn(seq, body); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read %s history of %s: %w", p.Type, p.SessionID, interpretError(err))
	}
	return nil
}

// History loads a whole history of a session, decoded. For the compacted
// history this is what the model sees; the full history may be long, and is
// better served with HistoryEach.
func (s *Store) History(ctx context.Context, p HistoryParams) ([]StoredMessage, error) {
	return history(ctx, s.pool, p)
}

func history(ctx context.Context, db dbtx, p HistoryParams) ([]StoredMessage, error) {
	query := `SELECT seq, seq, message::text, extra::text FROM messages
		WHERE tenant_id = $1 AND session_id = $2 ORDER BY seq`
	if p.Type == aap.HistoryCompacted {
		query = `SELECT seq, coalesce(source_seq, 0), message::text, extra::text FROM compacted_messages
		WHERE tenant_id = $1 AND session_id = $2 ORDER BY seq`
	}
	rows, err := db.Query(ctx, query, p.TenantID, p.SessionID)
	if err != nil {
		return nil, fmt.Errorf("load %s history of %s: %w", p.Type, p.SessionID, interpretError(err))
	}
	defer rows.Close()
	var out []StoredMessage
	for rows.Next() {
		var (
			m     StoredMessage
			body  []byte
			extra *string
		)
		if err := rows.Scan(&m.Seq, &m.SourceSeq, &body, &extra); err != nil {
			return nil, fmt.Errorf("load %s history of %s: %w", p.Type, p.SessionID, interpretError(err))
		}
		if err := json.Unmarshal(body, &m.Message); err != nil {
			return nil, fmt.Errorf("decode message %d of %s: %w", m.Seq, p.SessionID, err)
		}
		if extra != nil {
			m.Extra = json.RawMessage(*extra)
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("load %s history of %s: %w", p.Type, p.SessionID, interpretError(err))
	}
	return out, nil
}
