package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/aapd/aapd/aap"
)

// TurnStatus is the state of a turn's record.
type TurnStatus string

// Turn statuses. Every status but running is final.
const (
	TurnRunning     TurnStatus = "running"
	TurnCompleted   TurnStatus = "completed"
	TurnFailed      TurnStatus = "failed"
	TurnInterrupted TurnStatus = "interrupted"
	TurnCancelled   TurnStatus = "cancelled"
)

// Turn is the record of one POST /sessions/:id/turns.
type Turn struct {
	TenantID       string
	SessionID      string
	ID             string
	Status         TurnStatus
	Stream         aap.StreamMode
	StopReason     aap.StopReason
	Error          string
	InputTokens    int64
	OutputTokens   int64
	IdempotencyKey string
	CreatedAt      time.Time
	FinishedAt     *time.Time
}

// NewTurnID returns an opaque, time-ordered turn id.
func NewTurnID() string { return "turn_" + mustV7() }

const turnColumns = `tenant_id::text, session_id, id, status, stream, coalesce(stop_reason, ''), coalesce(error, ''),
	input_tokens, output_tokens, coalesce(idempotency_key, ''), created_at, finished_at`

func scanTurn(row interface{ Scan(...any) error }) (Turn, error) {
	var t Turn
	err := row.Scan(&t.TenantID, &t.SessionID, &t.ID, &t.Status, &t.Stream, &t.StopReason, &t.Error,
		&t.InputTokens, &t.OutputTokens, &t.IdempotencyKey, &t.CreatedAt, &t.FinishedAt)
	return t, interpretError(err)
}

// TurnPlan is what a new turn changes in its session before the model runs.
type TurnPlan struct {
	// SetAgentTools replaces the enabled server tools with AgentTools.
	SetAgentTools bool
	AgentTools    []aap.ServerToolRef
	// SetOptions replaces the client-set options with Options and
	// SecretOptions (the caller merges by key).
	SetOptions    bool
	Options       map[string]string
	SecretOptions map[string]string
	// SetClientTools replaces the client tools with ClientTools.
	SetClientTools bool
	ClientTools    []aap.ToolSpec
	// Messages are appended to both histories: answers to pending tool
	// calls, the user's message.
	Messages []NewMessage
	// Pending replaces the session's pending tool calls.
	Pending []aap.PendingToolCall
}

// TurnBeginParams starts a turn.
type TurnBeginParams struct {
	TenantID  string
	SessionID string
	Stream    aap.StreamMode
	// Owner is the instance id of the process that will run the turn.
	Owner int32
	// Lease is how long the claim holds without a heartbeat.
	Lease time.Duration
	// IdempotencyKey, when set, makes a retry with the same key and request
	// hash return the first turn instead of starting another.
	IdempotencyKey string
	RequestHash    []byte
	// Prepare decides, from the session as it is inside the claiming
	// transaction, what the turn changes. An error aborts the turn and
	// changes nothing.
	Prepare func(Session) (TurnPlan, error)
}

// TurnBegun is a turn that holds its session.
type TurnBegun struct {
	Turn Turn
	// Session is the session after the plan was applied.
	Session Session
	// Appended are the plan's messages as stored.
	Appended []StoredMessage
	// Interrupted is the id of a dead turn whose claim this turn took over.
	Interrupted string
	// Replay is true when the idempotency key matched an earlier turn: Turn
	// is that turn, and nothing was changed.
	Replay bool
}

// TurnBegin claims the session for a new turn, atomically: it fails with a
// *TurnRunningError while another live turn holds the session, records a
// turn whose process died as interrupted, applies the caller's plan, and
// stores the incoming messages, all in one transaction. The claim is a lease
// on the session row; no connection is held once this returns.
func (s *Store) TurnBegin(ctx context.Context, p TurnBeginParams) (TurnBegun, error) {
	var out TurnBegun
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var expired, dead bool
		sess, err := s.scanSessionWith(tx.QueryRow(ctx, `
			SELECT `+sessionColumns+`,
				lease_expires_at IS NULL OR lease_expires_at < now(),
				lease_owner IS NULL OR NOT aapd_instance_alive(lease_owner)
			FROM sessions WHERE tenant_id = $1 AND id = $2 FOR UPDATE`, p.TenantID, p.SessionID), &expired, &dead)
		if err != nil {
			return err
		}
		// With the session locked, a retry racing its original sees it.
		if p.IdempotencyKey != "" {
			prev, hash, err := turnByIdempotencyKey(ctx, tx, p.TenantID, p.SessionID, p.IdempotencyKey)
			switch {
			case err == nil && !bytes.Equal(hash, p.RequestHash):
				return ErrIdempotencyMismatch
			case err == nil:
				out = TurnBegun{Turn: prev, Replay: true}
				return nil
			case !errors.Is(err, ErrNotFound):
				return err
			}
		}
		if sess.ActiveTurnID != "" {
			if !expired && !dead {
				return &TurnRunningError{TurnID: sess.ActiveTurnID}
			}
			if _, err := interruptTurn(ctx, tx, TurnRef{p.TenantID, p.SessionID, sess.ActiveTurnID}); err != nil {
				return err
			}
			out.Interrupted = sess.ActiveTurnID
		}
		plan, err := p.Prepare(sess)
		if err != nil {
			return err
		}
		applyPlan(&sess, plan)
		sealed, err := s.sealer.sealJSON(sess.SecretOptions)
		if err != nil {
			return fmt.Errorf("seal secret options: %w", err)
		}
		turn, err := scanTurn(tx.QueryRow(ctx, `
			INSERT INTO turns (tenant_id, session_id, id, status, stream, owner, idempotency_key, request_hash)
			VALUES ($1, $2, $3, 'running', $4, $5, nullif($6, ''), $7)
			RETURNING `+turnColumns,
			p.TenantID, p.SessionID, NewTurnID(), p.Stream, p.Owner, p.IdempotencyKey, p.RequestHash))
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `
			UPDATE sessions SET agent_tools = $3, options = $4, secret_options = $5, client_tools = $6,
				pending_tool_calls = $7, active_turn_id = $8, lease_owner = $9,
				lease_expires_at = now() + $10 * interval '1 millisecond', updated_at = now()
			WHERE tenant_id = $1 AND id = $2`,
			p.TenantID, p.SessionID, jsonOrNull(sess.AgentTools), jsonObject(sess.Options), sealed,
			jsonOrNull(sess.ClientTools), jsonList(sess.Pending), turn.ID, p.Owner, p.Lease.Milliseconds()); err != nil {
			return interpretError(err)
		}
		sess.ActiveTurnID = turn.ID
		appended, err := appendMessages(ctx, tx, p.TenantID, p.SessionID, turn.ID, plan.Messages)
		if err != nil {
			return err
		}
		out.Turn, out.Session, out.Appended = turn, sess, appended
		return nil
	})
	if err != nil {
		return TurnBegun{}, fmt.Errorf("begin turn on session %s: %w", p.SessionID, err)
	}
	return out, nil
}

func applyPlan(sess *Session, plan TurnPlan) {
	if plan.SetAgentTools {
		sess.AgentTools = plan.AgentTools
	}
	if plan.SetOptions {
		sess.Options, sess.SecretOptions = plan.Options, plan.SecretOptions
	}
	if plan.SetClientTools {
		sess.ClientTools = plan.ClientTools
	}
	sess.Pending = plan.Pending
}

func turnByIdempotencyKey(ctx context.Context, tx pgx.Tx, tenantID, sessionID, key string) (Turn, []byte, error) {
	var hash []byte
	var t Turn
	err := tx.QueryRow(ctx, `SELECT `+turnColumns+`, request_hash FROM turns
		WHERE tenant_id = $1 AND session_id = $2 AND idempotency_key = $3`, tenantID, sessionID, key).Scan(
		&t.TenantID, &t.SessionID, &t.ID, &t.Status, &t.Stream, &t.StopReason, &t.Error,
		&t.InputTokens, &t.OutputTokens, &t.IdempotencyKey, &t.CreatedAt, &t.FinishedAt, &hash)
	return t, hash, interpretError(err)
}

// TurnStepParams commits one step of a running turn.
type TurnStepParams struct {
	TenantID  string
	SessionID string
	TurnID    string
	// Messages are appended to both histories.
	Messages []NewMessage
	// Pending replaces the session's pending tool calls.
	Pending []aap.PendingToolCall
	// Lease renews the claim.
	Lease time.Duration
}

// TurnCommitStep appends a step's messages and sets the pending tool calls
// in one transaction, if the turn still holds its session (ErrClaimLost if
// not: nothing is written).
func (s *Store) TurnCommitStep(ctx context.Context, p TurnStepParams) ([]StoredMessage, error) {
	var stored []StoredMessage
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `
			UPDATE sessions SET pending_tool_calls = $4,
				lease_expires_at = now() + $5 * interval '1 millisecond'
			WHERE tenant_id = $1 AND id = $2 AND active_turn_id = $3`,
			p.TenantID, p.SessionID, p.TurnID, jsonList(p.Pending), p.Lease.Milliseconds())
		if err != nil {
			return interpretError(err)
		}
		if tag.RowsAffected() == 0 {
			return ErrClaimLost
		}
		stored, err = appendMessages(ctx, tx, p.TenantID, p.SessionID, p.TurnID, p.Messages)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("commit step of turn %s: %w", p.TurnID, err)
	}
	return stored, nil
}

// TurnHeartbeat renews a running turn's claim and reports whether the turn
// was asked to stop (see TurnRequestCancel); ErrClaimLost if the turn has
// lost its session.
func (s *Store) TurnHeartbeat(ctx context.Context, ref TurnRef, lease time.Duration) (cancelRequested bool, err error) {
	err = s.pool.QueryRow(ctx, `
		UPDATE sessions SET lease_expires_at = now() + $4 * interval '1 millisecond'
		WHERE tenant_id = $1 AND id = $2 AND active_turn_id = $3
		RETURNING (SELECT cancel_requested FROM turns WHERE tenant_id = $1 AND session_id = $2 AND id = $3)`,
		ref.TenantID, ref.SessionID, ref.TurnID, lease.Milliseconds()).Scan(&cancelRequested)
	if errors.Is(interpretError(err), ErrNotFound) {
		return false, fmt.Errorf("heartbeat turn %s: %w", ref.TurnID, ErrClaimLost)
	}
	if err != nil {
		return false, fmt.Errorf("heartbeat turn %s: %w", ref.TurnID, interpretError(err))
	}
	return cancelRequested, nil
}

// TurnFinishParams ends a turn.
type TurnFinishParams struct {
	TenantID     string
	SessionID    string
	TurnID       string
	Status       TurnStatus
	StopReason   aap.StopReason
	Error        string
	InputTokens  int64
	OutputTokens int64
	// ContextTokens are the input tokens the provider reported for the
	// turn's last model call, which saw the compacted history up to
	// ContextUpTo; zero when the provider reported none.
	ContextTokens int64
	ContextUpTo   int64
	// Events are the turn's last unrecorded events, turn_stop included:
	// recorded in the same transaction, so a finished turn's log is whole.
	Events []TurnEvent
}

// TurnFinish records how a turn ended and releases its session, in one
// transaction. A turn already ended (e.g. recorded interrupted by a takeover)
// keeps its first record.
func (s *Store) TurnFinish(ctx context.Context, p TurnFinishParams) error {
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `
			UPDATE turns SET status = $4, stop_reason = nullif($5, ''), error = nullif($6, ''),
				input_tokens = $7, output_tokens = $8, finished_at = now()
			WHERE tenant_id = $1 AND session_id = $2 AND id = $3 AND status = 'running'`,
			p.TenantID, p.SessionID, p.TurnID, p.Status, p.StopReason, p.Error, p.InputTokens, p.OutputTokens)
		if err != nil {
			return interpretError(err)
		}
		if tag.RowsAffected() == 0 {
			return nil // already ended (taken over, or the session is gone)
		}
		if err := appendEvents(ctx, tx, TurnRef{p.TenantID, p.SessionID, p.TurnID}, p.Events); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `
			UPDATE sessions SET active_turn_id = NULL, lease_owner = NULL, lease_expires_at = NULL,
				reported_tokens = CASE WHEN $4 > 0 THEN $4 ELSE reported_tokens END,
				reported_upto_seq = CASE WHEN $4 > 0 THEN $5 ELSE reported_upto_seq END
			WHERE tenant_id = $1 AND id = $2 AND active_turn_id = $3`,
			p.TenantID, p.SessionID, p.TurnID, p.ContextTokens, p.ContextUpTo)
		return interpretError(err)
	})
	if err != nil {
		return fmt.Errorf("finish turn %s: %w", p.TurnID, err)
	}
	return nil
}

// TurnGet loads a turn of a session of the tenant.
func (s *Store) TurnGet(ctx context.Context, tenantID, sessionID, turnID string) (Turn, error) {
	t, err := scanTurn(s.pool.QueryRow(ctx, `SELECT `+turnColumns+` FROM turns
		WHERE tenant_id = $1 AND session_id = $2 AND id = $3`, tenantID, sessionID, turnID))
	if err != nil {
		return Turn{}, fmt.Errorf("load turn %s: %w", turnID, err)
	}
	return t, nil
}

// TurnMessages returns the messages the agent produced in a turn (model
// output, server tool results, denials), in order: the body of a stream
// "none" response.
func (s *Store) TurnMessages(ctx context.Context, tenantID, sessionID, turnID string) ([]StoredMessage, error) {
	rows, err := s.pool.Query(ctx, `SELECT seq, message::text FROM messages
		WHERE tenant_id = $1 AND session_id = $2 AND turn_id = $3 AND origin = 'agent' ORDER BY seq`, tenantID, sessionID, turnID)
	if err != nil {
		return nil, fmt.Errorf("load messages of turn %s: %w", turnID, interpretError(err))
	}
	defer rows.Close()
	var out []StoredMessage
	for rows.Next() {
		var m StoredMessage
		var body []byte
		if err := rows.Scan(&m.Seq, &body); err != nil {
			return nil, fmt.Errorf("load messages of turn %s: %w", turnID, interpretError(err))
		}
		if err := m.Message.UnmarshalJSON(body); err != nil {
			return nil, fmt.Errorf("decode message %d: %w", m.Seq, err)
		}
		m.SourceSeq = m.Seq
		out = append(out, m)
	}
	return out, interpretError(rows.Err())
}

// TurnListParams selects a page of a session's turns.
type TurnListParams struct {
	TenantID  string
	SessionID string
	// After is the cursor of the previous page ("" for the first).
	After string
	Limit int
}

// TurnPage is a page of turns, newest first.
type TurnPage struct {
	Turns []Turn
	Next  string
}

// TurnList pages through a session's turns, newest first, by keyset on the
// time-ordered turn id (stable while turns are added).
func (s *Store) TurnList(ctx context.Context, p TurnListParams) (TurnPage, error) {
	after, err := decodeCursor(p.After, "turn_")
	if err != nil {
		return TurnPage{}, err
	}
	rows, err := s.pool.Query(ctx, `SELECT `+turnColumns+` FROM turns
		WHERE tenant_id = $1 AND session_id = $2 AND ($3 = '' OR id < $3)
		ORDER BY id DESC LIMIT $4`, p.TenantID, p.SessionID, after, p.Limit+1)
	if err != nil {
		return TurnPage{}, fmt.Errorf("list turns: %w", interpretError(err))
	}
	defer rows.Close()
	var page TurnPage
	for rows.Next() {
		t, err := scanTurn(rows)
		if err != nil {
			return TurnPage{}, fmt.Errorf("list turns: %w", err)
		}
		page.Turns = append(page.Turns, t)
	}
	if err := rows.Err(); err != nil {
		return TurnPage{}, fmt.Errorf("list turns: %w", interpretError(err))
	}
	if len(page.Turns) > p.Limit {
		page.Turns = page.Turns[:p.Limit]
		page.Next = encodeCursor(page.Turns[p.Limit-1].ID)
	}
	return page, nil
}
