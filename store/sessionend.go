package store

import (
	"context"
	"errors"
	"fmt"
)

// SessionEnd ends a session of the tenant (of the end user owner; "" for
// any): no turn is claimed on it again (the claim refuses it with
// ErrSessionEnded, whichever door asks), while everything it holds stays
// readable. It returns the turn holding the session's claim, if any, for
// the caller to stop, and whether this call ended it: ending a session
// that has ended changes nothing. ErrNotFound if there is no such session.
func (s *Store) SessionEnd(ctx context.Context, tenantID, owner, id string) (activeTurnID string, ended bool, err error) {
	err = s.tenant(tenantID).QueryRow(ctx, `
		UPDATE sessions SET ended_at = now(), updated_at = now()
		WHERE tenant_id = $1 AND id = $2 AND ($3 = '' OR owner = $3) AND ended_at IS NULL
		RETURNING coalesce(active_turn_id, '')`, tenantID, id, owner).Scan(&activeTurnID)
	switch err = interpretError(err); {
	case err == nil:
		return activeTurnID, true, nil
	case !errors.Is(err, ErrNotFound):
		return "", false, fmt.Errorf("end session %s: %w", id, err)
	}
	// Ended already, or no such session.
	if _, err := s.SessionGetOwned(ctx, tenantID, owner, id); err != nil {
		return "", false, fmt.Errorf("end session %s: %w", id, err)
	}
	return "", false, nil
}
