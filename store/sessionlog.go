package store

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/aapd/aapd/aap"
)

// SessionLogParams selects the turns of a session's event log from a
// position: the turn After names (included: the caller skips what it has of
// it), then every later turn, in the order they were claimed.
type SessionLogParams struct {
	TenantID string
	// Owner confines the read to a session of this end user ("" for any).
	Owner     string
	SessionID string
	// After is the id of the turn the log resumes in; "" for the first.
	After string
	// Turns bounds how many turns are read.
	Turns int
}

// SessionLogTurn is one turn of a session's event log: all of its
// recorded events.
type SessionLogTurn struct {
	TurnID string
	// Finished is true once the turn has ended: its log is whole.
	Finished bool
	// Events are the events recorded so far, from id 1.
	Events []aap.Event
	// Trimmed is true when the turn's log was dropped with its session's
	// trimmed full history (ErrTurnTrimmed): it has no Events, and the
	// log reads on after it.
	Trimmed bool
}

// SessionLog reads the recorded events of a session's turns, from the turn
// p.After names, in the order the turns were claimed (by the database's
// clock: a session runs one turn at a time, each claimed after the last
// ended). ErrNotFound for an unknown session (or another's), ErrBadCursor
// when p.After is no turn of the session.
func (s *Store) SessionLog(ctx context.Context, p SessionLogParams) ([]SessionLogTurn, error) {
	// Two statements, not one with "$4 = '' OR": a generic plan of the
	// one could not bound its index scan by the cursor's turn, and would
	// walk the session's turns from its first to reach it.
	turnsFrom := `AND (t.created_at, t.id) >= (SELECT created_at, id FROM cur)`
	if p.After == "" {
		turnsFrom = ""
	}
	// The session's turns, then a row of the session alone (found even
	// when it has no turns): not a LEFT JOIN, which Citus refuses on
	// PostgreSQL 15 and 16 once the tenant wall's policy adds its
	// condition to both sides (an outer join with a pseudoconstant qual).
	rows, err := s.tenant(p.TenantID).Query(ctx, `
		WITH cur AS (
			SELECT created_at, id FROM turns WHERE tenant_id = $1 AND session_id = $2 AND id = $4
		)
		SELECT (SELECT count(*) FROM cur), t.id, t.status, t.events::text,
			(SELECT json_agg(json_build_object('f', b.first_seq, 'e', b.events) ORDER BY b.first_seq)::text
			 FROM turn_event_batches b
			 WHERE b.tenant_id = t.tenant_id AND b.session_id = t.session_id AND b.turn_id = t.id)
		FROM sessions s
		JOIN LATERAL (
			SELECT * FROM turns t
			WHERE t.tenant_id = s.tenant_id AND t.session_id = s.id `+turnsFrom+`
			ORDER BY t.created_at, t.id
			LIMIT $5
		) t ON true
		WHERE s.tenant_id = $1 AND s.id = $2 AND ($3 = '' OR s.owner = $3)
		UNION ALL
		SELECT (SELECT count(*) FROM cur), NULL, NULL, NULL, NULL
		FROM sessions s
		WHERE s.tenant_id = $1 AND s.id = $2 AND ($3 = '' OR s.owner = $3)`,
		p.TenantID, p.SessionID, p.Owner, p.After, p.Turns)
	if err != nil {
		return nil, fmt.Errorf("read the event log of session %s: %w", p.SessionID, interpretError(err))
	}
	defer rows.Close()
	var (
		out    []SessionLogTurn
		found  = false
		cursor int
	)
	for rows.Next() {
		found = true
		var (
			id, status      *string
			folded, batches []byte
		)
		if err := rows.Scan(&cursor, &id, &status, &folded, &batches); err != nil {
			return nil, fmt.Errorf("read the event log of session %s: %w", p.SessionID, interpretError(err))
		}
		if id == nil {
			continue // the session's own row
		}
		t := SessionLogTurn{TurnID: *id, Finished: TurnStatus(*status) != TurnRunning}
		if isTrimmedLog(folded) {
			t.Trimmed = true
		} else if t.Events, err = turnEvents(folded, batches); err != nil {
			return nil, fmt.Errorf("read the events of turn %s: %w", *id, err)
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the event log of session %s: %w", p.SessionID, interpretError(err))
	}
	switch {
	case !found:
		return nil, fmt.Errorf("read the event log of session %s: %w", p.SessionID, ErrNotFound)
	case p.After != "" && cursor == 0:
		return nil, ErrBadCursor
	}
	return out, nil
}

// turnEvents decodes a turn's recorded events: its folded log once it has
// ended, else its batches, gapless from id 1 (a batch recorded again longer
// overlaps the one before).
func turnEvents(folded, batches []byte) ([]aap.Event, error) {
	if folded != nil {
		return decodeEvents(nil, folded)
	}
	if batches == nil {
		return nil, nil
	}
	var list []struct {
		F int64           `json:"f"`
		E json.RawMessage `json:"e"`
	}
	if err := json.Unmarshal(batches, &list); err != nil {
		return nil, err
	}
	var out []aap.Event
	for _, b := range list {
		evs, err := decodeEvents(nil, b.E)
		if err != nil {
			return nil, err
		}
		for i, e := range evs {
			if b.F+int64(i) == int64(len(out))+1 {
				out = append(out, e)
			}
		}
	}
	return out, nil
}
