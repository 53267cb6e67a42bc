package store

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/aapd/aapd/aap"
)

// PendingAnswer is a client's answer to one of a session's pending tool
// calls, kept on the session until every pending call has one: AAP answers
// all of a turn's calls in one request, a door whose clients answer them one
// at a time (sandbox-agent) collects them here first.
type PendingAnswer struct {
	// Message is the answer: a tool message for a client tool's call, a
	// tool_permission message for a server tool's.
	Message aap.Message `json:"message"`
	// TrustTool, on a granted permission, trusts the call's tool for the
	// rest of the session.
	TrustTool bool `json:"trustTool,omitempty"`
}

// SessionAnswerParams records one answer (SessionAnswer).
type SessionAnswerParams struct {
	TenantID string
	// Owner confines the answer to a session of this end user ("" for
	// any): another's session is ErrNotFound.
	Owner     string
	SessionID string
	Answer    PendingAnswer
	// Check decides, on the session as locked and the answers it holds
	// before this one, whether the answer may be recorded: an error
	// refuses it and changes nothing.
	Check func(Session, []PendingAnswer) error
}

// SessionAnswer records an answer to one of a session's pending tool
// calls, replacing an earlier answer to the same call, in a transaction
// that locks the session. It returns the session and every answer it now
// holds, this one included. The answers are cleared by the next turn's
// claim, which either carries them or (a user message) closes the calls.
// ErrNotFound for no such session.
func (s *Store) SessionAnswer(ctx context.Context, p SessionAnswerParams) (Session, []PendingAnswer, error) {
	var (
		sess    Session
		answers []PendingAnswer
	)
	err := s.inTx(ctx, p.TenantID, func(tx pgx.Tx) error {
		var held []byte
		var err error
		sess, err = s.scanSessionWith(tx.QueryRow(ctx, `SELECT `+sessionColumns+`, pending_answers FROM sessions
			WHERE tenant_id = $1 AND id = $2 AND ($3 = '' OR owner = $3) FOR UPDATE`,
			p.TenantID, p.SessionID, p.Owner), &held)
		if err != nil {
			return err
		}
		if len(held) > 0 {
			if err := json.Unmarshal(held, &answers); err != nil {
				return fmt.Errorf("decode pending_answers: %w", err)
			}
		}
		if p.Check != nil {
			if err := p.Check(sess, answers); err != nil {
				return err
			}
		}
		kept := answers[:0:0]
		for _, a := range answers {
			if a.Message.ToolCallID != p.Answer.Message.ToolCallID {
				kept = append(kept, a)
			}
		}
		answers = append(kept, p.Answer)
		_, err = tx.Exec(ctx, `UPDATE sessions SET pending_answers = $3, updated_at = now() WHERE tenant_id = $1 AND id = $2`,
			p.TenantID, p.SessionID, jsonList(answers))
		return interpretError(err)
	})
	if err != nil {
		return Session{}, nil, fmt.Errorf("answer tool call %s of session %s: %w", p.Answer.Message.ToolCallID, p.SessionID, err)
	}
	return sess, answers, nil
}
