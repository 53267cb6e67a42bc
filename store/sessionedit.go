package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/aapd/aapd/aap"
)

// Edits of a session outside a turn, for doors whose clients change a
// conversation between turns (the OpenAI door's conversations: their
// metadata, items appended, the agent a new conversation runs).

// SessionSetLabels sets labels of a session (of the end user owner, if
// not ""): each of set is written over the stored labels, the others
// stay. ErrNotFound if there is no such session.
func (s *Store) SessionSetLabels(ctx context.Context, tenantID, owner, id string, set map[string]string) (Session, error) {
	_, err := s.tenant(tenantID).Exec(ctx, `
		UPDATE sessions SET labels = (coalesce(labels::jsonb, '{}'::jsonb) || $4::jsonb)::json
		WHERE tenant_id = $1 AND id = $2 AND ($3 = '' OR owner = $3)`, tenantID, id, owner, jsonObject(set))
	if err != nil {
		return Session{}, fmt.Errorf("set labels of session %s: %w", id, interpretError(err))
	}
	return s.SessionGetOwned(ctx, tenantID, owner, id)
}

// ErrSessionUsed is SessionRebind's refusal: the session has had a turn,
// so its agent is settled.
var ErrSessionUsed = errors.New("the session has had turns")

// SessionRebind gives a session that has never had a turn another agent
// and server tools, and sets labels (as SessionSetLabels): a conversation
// created without a model takes the agent of its first response.
// ErrSessionUsed once it has had a turn (or one holds it); ErrNotFound if
// there is no such session.
func (s *Store) SessionRebind(ctx context.Context, tenantID, owner, id, agentName string, tools []aap.ServerToolRef, labels map[string]string) error {
	tag, err := s.tenant(tenantID).Exec(ctx, `
		UPDATE sessions SET agent_name = $4, agent_tools = $5, labels = (coalesce(labels::jsonb, '{}'::jsonb) || $6::jsonb)::json,
			updated_at = now()
		WHERE tenant_id = $1 AND id = $2 AND ($3 = '' OR owner = $3) AND active_turn_id IS NULL
		  AND NOT EXISTS (SELECT 1 FROM turns t WHERE t.tenant_id = $1 AND t.session_id = $2)`,
		tenantID, id, owner, agentName, jsonOrNull(tools), jsonObject(labels))
	if err != nil {
		return fmt.Errorf("rebind session %s: %w", id, interpretError(err))
	}
	if tag.RowsAffected() == 1 {
		return nil
	}
	if _, err := s.SessionGetOwned(ctx, tenantID, owner, id); err != nil {
		return fmt.Errorf("rebind session %s: %w", id, err)
	}
	return fmt.Errorf("rebind session %s: %w", id, ErrSessionUsed)
}

// ErrSessionAwaits is SessionAppend's refusal while the session waits on
// the client for tool calls: messages appended between a call and its
// answer would break the history.
type ErrSessionAwaits struct{ Calls []string }

func (e *ErrSessionAwaits) Error() string {
	return "the session waits for the results of tool calls " + strings.Join(e.Calls, ", ")
}

// SessionAppend appends messages to both histories of a session (of the
// end user owner, if not "") between turns, as the client wrote them, and
// returns the seq of the first. *TurnRunningError while a turn holds the
// session, ErrSessionEnded once it ended, *ErrSessionAwaits while it
// waits on the client's tool results, ErrNotFound if there is no such
// session. The session's row changes, so a process that remembers it
// (KnownSession) reads it again at its next turn, history included.
func (s *Store) SessionAppend(ctx context.Context, tenantID, owner, id string, msgs []aap.Message) (first int64, err error) {
	err = s.inTx(ctx, tenantID, func(tx pgx.Tx) error {
		var (
			lastSeq int64
			active  string
			ended   bool
			pending []aap.PendingToolCall
		)
		var pendingJSON []byte
		err := tx.QueryRow(ctx, `
			SELECT last_seq, coalesce(active_turn_id, ''), ended_at IS NOT NULL, pending_tool_calls::text
			FROM sessions WHERE tenant_id = $1 AND id = $2 AND ($3 = '' OR owner = $3) FOR UPDATE`,
			tenantID, id, owner).Scan(&lastSeq, &active, &ended, &pendingJSON)
		if err != nil {
			return interpretError(err)
		}
		if err := json.Unmarshal(pendingJSON, &pending); err != nil {
			return fmt.Errorf("decode pending tool calls: %w", err)
		}
		switch {
		case ended:
			return ErrSessionEnded
		case active != "":
			return &TurnRunningError{TurnID: active}
		case len(pending) > 0:
			e := &ErrSessionAwaits{}
			for _, p := range pending {
				e.Calls = append(e.Calls, p.ToolCallID)
			}
			return e
		}
		news := make([]NewMessage, len(msgs))
		for i, m := range msgs {
			news[i] = NewMessage{Message: m, Origin: OriginClient}
		}
		rows, err := newMessageRows(lastSeq+1, news)
		if err != nil {
			return err
		}
		full, fullArgs := rows.insert(tenantID, id, nil)
		compacted, compactedArgs := rows.insertCompacted(tenantID, id)
		if _, err := tx.Exec(ctx, full, fullArgs...); err != nil {
			return interpretError(err)
		}
		if _, err := tx.Exec(ctx, compacted, compactedArgs...); err != nil {
			return interpretError(err)
		}
		if _, err := tx.Exec(ctx, `UPDATE sessions SET last_seq = $3, updated_at = now() WHERE tenant_id = $1 AND id = $2`,
			tenantID, id, lastSeq+int64(len(msgs))); err != nil {
			return interpretError(err)
		}
		first = lastSeq + 1
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("append to session %s: %w", id, err)
	}
	return first, nil
}

// TurnClientMessages returns what the client sent in a turn (its user
// message, its tool results), with their seqs: a response's input items.
// Those the tenant's retention trimmed are left out (TurnMessages).
func (s *Store) TurnClientMessages(ctx context.Context, tenantID, sessionID, turnID string) ([]StoredMessage, error) {
	rows, err := s.tenant(tenantID).Query(ctx, `SELECT seq, seq, message::text, extra::text FROM messages
		WHERE tenant_id = $1 AND session_id = $2 AND turn_id = $3 AND origin = 'client'
		  AND seq > `+trimmedThroughSQL+`
		ORDER BY seq`, tenantID, sessionID, turnID)
	if err != nil {
		return nil, fmt.Errorf("load the input of turn %s: %w", turnID, interpretError(err))
	}
	out, err := scanHistory(rows)
	if err != nil {
		return nil, fmt.Errorf("load the input of turn %s: %w", turnID, err)
	}
	return out, nil
}

// TurnGetByKey returns the turn of a session an idempotency key started;
// ErrNotFound if none did.
func (s *Store) TurnGetByKey(ctx context.Context, tenantID, sessionID, key string) (Turn, error) {
	t, err := scanTurn(s.tenant(tenantID).QueryRow(ctx, `SELECT `+turnColumns+` FROM turns
		WHERE tenant_id = $1 AND session_id = $2 AND idempotency_key = $3`, tenantID, sessionID, key))
	if err != nil {
		return Turn{}, fmt.Errorf("load the turn of an idempotency key: %w", err)
	}
	return t, nil
}
