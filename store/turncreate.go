package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// SessionKeyUsedError: a creation's idempotency key created a session
// before (SessionID), with the same request. Nothing was written: the
// caller begins the turn on that session with the same key, which replays
// the turn the first request began with it.
type SessionKeyUsedError struct{ SessionID string }

func (e *SessionKeyUsedError) Error() string {
	return fmt.Sprintf("the idempotency key created session %s before", e.SessionID)
}

// createSessionSQL inserts a new session already claimed by its first
// turn: $1–$11 are claimSetSQL's arguments (the claim planned against the
// session as created), $12 the agent, $13 the end user, $14 the thread,
// $15 the labels.
const createSessionSQL = `INSERT INTO sessions (tenant_id, id, agent_tools, options, secret_options, client_tools,
		pending_tool_calls, active_turn_id, lease_owner, lease_expires_at, last_seq, agent_name, owner, thread_id, labels)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, now() + $10 * interval '1 millisecond', $11, $12, nullif($13, ''), nullif($14, ''), $15)
	RETURNING created_at, updated_at`

// turnBeginCreate creates the session p.Create describes, with
// p.SessionID as its id, and claims it for the turn, in one transaction
// sent as one round trip: the session, its creation key, its seed
// history, the turn and the turn's messages commit together or not at
// all, so no crash leaves a session with its seed and without the turn it
// was created for. A creation key used before voids the transaction
// (its primary key): then *SessionKeyUsedError names the session it
// created, or ErrIdempotencyMismatch says it was another request.
func (s *Store) turnBeginCreate(ctx context.Context, conn *pgxpool.Conn, p *TurnBeginParams) (*TurnBegun, error) {
	c := p.Create
	msgs := make([]NewMessage, len(c.Messages))
	for i, m := range c.Messages {
		msgs[i] = NewMessage{Message: m, Origin: OriginClient}
		if i < len(c.MessageIDs) {
			msgs[i].ClientID = c.MessageIDs[i]
		}
	}
	seed, err := newMessageRows(1, msgs)
	if err != nil {
		return nil, err
	}
	sess := Session{
		TenantID: p.TenantID, ID: p.SessionID, Owner: c.Owner, AgentName: c.AgentName, AgentTools: c.AgentTools,
		Options: c.Options, SecretOptions: c.SecretOptions, ClientTools: c.ClientTools, Pending: c.Pending,
		ThreadID: c.ThreadID, Labels: c.Labels,
	}
	w, err := s.planClaim(p, &sess, int64(len(msgs)))
	if err != nil {
		return nil, err
	}
	idemKey := ownedIdempotencyKey(c.Owner, c.IdempotencyKey)
	b := &pgx.Batch{}
	queueBegin(b, p.TenantID)
	queueAsyncCommit(b, p)
	if c.IdempotencyKey != "" {
		b.Queue(`DELETE FROM idempotency_keys WHERE tenant_id = $1 AND created_at < now() - interval '`+idempotencyKeyTTL+`'`, p.TenantID)
	}
	sessStmt := b.Len()
	b.Queue(createSessionSQL, append(w.setArgs, c.AgentName, c.Owner, c.ThreadID, jsonMapOrNull(c.Labels))...)
	if c.IdempotencyKey != "" {
		b.Queue(`INSERT INTO idempotency_keys (tenant_id, key, request_hash, session_id) VALUES ($1, $2, $3, $4)`,
			p.TenantID, idemKey, c.RequestHash, p.SessionID)
	}
	if len(seed.seqs) > 0 {
		full, fullArgs := seed.insert(p.TenantID, p.SessionID, nil)
		compacted, compactedArgs := seed.insertCompacted(p.TenantID, p.SessionID)
		b.Queue(full, fullArgs...)
		b.Queue(compacted, compactedArgs...)
		if len(seed.clientIDs) > 0 {
			ids, idArgs := seed.insertClientIDs(p.TenantID, p.SessionID)
			b.Queue(ids, idArgs...)
		}
	}
	turnStmt := w.queueTurn(b, p)
	b.Queue("COMMIT")

	out := &TurnBegun{History: seed.stored, HistoryWhole: true}
	w.begun(p, out)
	err = sendTx(ctx, conn, b, map[int]func(pgx.Row) error{
		sessStmt: func(row pgx.Row) error { return row.Scan(&out.Session.CreatedAt, &out.Session.UpdatedAt) },
		turnStmt: func(row pgx.Row) error {
			t, err := scanTurn(row)
			if err == nil {
				out.Turn = t
			}
			return err
		},
	})
	switch {
	case err == nil:
		return out, nil
	case errors.Is(err, ErrOutcomeUnknown):
		return out, err
	case c.IdempotencyKey != "" && errors.Is(err, ErrConflict):
		prev, _, err := s.sessionCreated(ctx, p.TenantID, idemKey, c.RequestHash)
		if err != nil {
			return nil, err
		}
		return nil, &SessionKeyUsedError{SessionID: prev.ID}
	}
	return nil, err
}
