package store

import (
	"context"
	"fmt"
	"time"

	"github.com/aapd/aapd/aap"
)

// TurnInput is what a turn was started with and what it left pending,
// beside its event log: what a door that shows a session's log in a shape
// of its own needs (the sandbox-agent door shows the client's messages and
// the answers to tool calls as events, which AAP's log does not carry).
// Everything in it is fixed once the turn has ended.
type TurnInput struct {
	TurnID    string
	CreatedAt time.Time
	// Messages are the messages the client sent in the turn (a user
	// message, tool results), in the order stored.
	Messages []aap.Message
	// Permissions are the permissions the turn was started with.
	Permissions []TurnPermission
	// Pending are the tool calls the session waited on when the turn
	// ended; nil while it runs (and for a turn that ended before they
	// were recorded, or that its process did not end).
	Pending []aap.PendingToolCall
	// PendingBefore are the calls the session waited on when the turn
	// began: those the turn before it left pending.
	PendingBefore []aap.PendingToolCall
}

// TurnInputs reads the inputs of turns of a session, by turn id: turns
// that are not the session's are left out. A turn's messages the tenant's
// retention trimmed are left out of its Messages (TurnMessages).
func (s *Store) TurnInputs(ctx context.Context, tenantID, sessionID string, turnIDs []string) (map[string]TurnInput, error) {
	out := make(map[string]TurnInput, len(turnIDs))
	if len(turnIDs) == 0 {
		return out, nil
	}
	rows, err := s.tenant(tenantID).Query(ctx, `
		SELECT t.id, t.created_at, t.permissions::text, t.pending::text,
			(SELECT p.pending::text FROM turns p
			 WHERE p.tenant_id = t.tenant_id AND p.session_id = t.session_id AND (p.created_at, p.id) < (t.created_at, t.id)
			 ORDER BY p.created_at DESC, p.id DESC LIMIT 1),
			(SELECT json_agg(m.message ORDER BY m.seq)::text FROM messages m
			 WHERE m.tenant_id = t.tenant_id AND m.session_id = t.session_id AND m.turn_id = t.id AND m.origin = 'client'
			   AND m.seq > `+trimmedThroughSQL+`)
		FROM turns t
		WHERE t.tenant_id = $1 AND t.session_id = $2 AND t.id = ANY($3::text[])`,
		tenantID, sessionID, turnIDs)
	if err != nil {
		return nil, fmt.Errorf("read the inputs of turns of session %s: %w", sessionID, interpretError(err))
	}
	defer rows.Close()
	for rows.Next() {
		var (
			in                                    TurnInput
			permissions, pending, before, clients []byte
		)
		if err := rows.Scan(&in.TurnID, &in.CreatedAt, &permissions, &pending, &before, &clients); err != nil {
			return nil, fmt.Errorf("read the inputs of turns of session %s: %w", sessionID, interpretError(err))
		}
		if err := unmarshalAll(
			field{"permissions", permissions, &in.Permissions},
			field{"pending", pending, &in.Pending},
			field{"pending before", before, &in.PendingBefore},
			field{"messages", clients, &in.Messages},
		); err != nil {
			return nil, fmt.Errorf("turn %s: %w", in.TurnID, err)
		}
		out[in.TurnID] = in
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the inputs of turns of session %s: %w", sessionID, interpretError(err))
	}
	return out, nil
}

// SessionSeed returns the messages a session was created with (its seed
// history), before its first turn's: those after the prefix the tenant's
// retention trimmed (TurnMessages), read from there on.
func (s *Store) SessionSeed(ctx context.Context, tenantID, sessionID string) ([]aap.Message, error) {
	rows, err := s.tenant(tenantID).Query(ctx, `
		SELECT message::text FROM messages
		WHERE tenant_id = $1 AND session_id = $2 AND turn_id IS NULL
		  AND seq > `+trimmedThroughSQL+`
		  AND seq < coalesce((SELECT first_seq FROM turns WHERE tenant_id = $1 AND session_id = $2
		                      ORDER BY created_at, id LIMIT 1), 9223372036854775807)
		ORDER BY seq`, tenantID, sessionID)
	if err != nil {
		return nil, fmt.Errorf("read the seed of session %s: %w", sessionID, interpretError(err))
	}
	defer rows.Close()
	var seed []aap.Message
	for rows.Next() {
		var (
			raw []byte
			m   aap.Message
		)
		if err := rows.Scan(&raw); err != nil {
			return nil, fmt.Errorf("read the seed of session %s: %w", sessionID, interpretError(err))
		}
		if err := m.UnmarshalJSON(raw); err != nil {
			return nil, fmt.Errorf("read the seed of session %s: %w", sessionID, err)
		}
		seed = append(seed, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the seed of session %s: %w", sessionID, interpretError(err))
	}
	return seed, nil
}

// trimmedThroughSQL is a session's trimmed prefix (historytrim.go), for a
// statement whose $1 is the tenant and $2 the session: what a read of the
// session's own rows of its full history starts after. The rows of the
// prefix a fork still reads stay in the session until the fork has trimmed
// past them (inherited.go), so a read by turn or by origin bounds itself
// by it, never by the rows it finds. NULL (no row read) for a session that
// is gone.
const trimmedThroughSQL = `(SELECT history_trimmed_through FROM sessions WHERE tenant_id = $1 AND id = $2)`
