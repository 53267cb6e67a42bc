package store

import (
	"context"
	"fmt"
)

// SessionGetByThread loads the session a client created for its thread
// (SessionCreateParams.ThreadID): AG-UI names a conversation by an id of the
// client's choosing. Threads are looked up among the sessions of one owner:
// owner "" is the tenant's API keys' own threads, not any owner's, so that
// an end user's thread id never reaches, nor collides with, a session that
// is not theirs. ErrNotFound when the tenant has no such thread.
func (s *Store) SessionGetByThread(ctx context.Context, tenantID, owner, threadID string) (Session, error) {
	sess, err := s.scanSession(s.tenant(tenantID).QueryRow(ctx,
		`SELECT `+sessionColumns+` FROM sessions
		WHERE tenant_id = $1 AND coalesce(owner, '') = $2 AND thread_id = $3`,
		tenantID, owner, threadID))
	if err != nil {
		return Session{}, fmt.Errorf("load the session of thread %q: %w", threadID, err)
	}
	return sess, nil
}

// MessageIDsStored tells which of ids are the client ids of messages the
// session has stored (NewMessage.ClientID). It does not check that the
// session exists: the caller has loaded it.
func (s *Store) MessageIDsStored(ctx context.Context, tenantID, sessionID string, ids []string) (map[string]bool, error) {
	stored := map[string]bool{}
	if len(ids) == 0 {
		return stored, nil
	}
	rows, err := s.tenant(tenantID).Query(ctx, `SELECT client_id FROM message_client_ids
		WHERE tenant_id = $1 AND session_id = $2 AND client_id = ANY($3::text[])`, tenantID, sessionID, ids)
	if err != nil {
		return nil, fmt.Errorf("look up message ids of session %s: %w", sessionID, interpretError(err))
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("look up message ids of session %s: %w", sessionID, interpretError(err))
		}
		stored[id] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("look up message ids of session %s: %w", sessionID, interpretError(err))
	}
	return stored, nil
}
