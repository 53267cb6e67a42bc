package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/aapd/aapd/aap"
)

// EventsChannel is the notification channel on which a turn's id is
// published whenever events of it are recorded, so that followers on any
// process wake up.
const EventsChannel = "aapd_turn_events"

// CancelChannel is the notification channel on which the id of a turn to
// cancel is published, so that whichever process runs it stops it.
const CancelChannel = "aapd_turn_cancel"

// TurnEvent is a recorded event of a turn; Seq is its SSE id (from 1).
type TurnEvent struct {
	Seq   int
	Event aap.Event
}

// TurnRef names a turn of a session of a tenant.
type TurnRef struct {
	TenantID  string
	SessionID string
	TurnID    string
}

// TurnEventsAppend records events of a running turn and notifies followers.
// It fails with ErrNotFound once the turn is gone (its session deleted).
func (s *Store) TurnEventsAppend(ctx context.Context, ref TurnRef, events []TurnEvent) error {
	if len(events) == 0 {
		return nil
	}
	err := s.inTx(ctx, func(tx pgx.Tx) error { return appendEvents(ctx, tx, ref, events) })
	if err != nil {
		return fmt.Errorf("record events of turn %s: %w", ref.TurnID, err)
	}
	return nil
}

func appendEvents(ctx context.Context, tx pgx.Tx, ref TurnRef, events []TurnEvent) error {
	if len(events) == 0 {
		return nil
	}
	seqs := make([]int32, len(events))
	types := make([]string, len(events))
	datas := make([]string, len(events))
	for i, e := range events {
		b, err := json.Marshal(e.Event)
		if err != nil {
			return fmt.Errorf("encode event: %w", err)
		}
		seqs[i], types[i], datas[i] = int32(e.Seq), string(e.Event.Type), string(b)
	}
	_, err := tx.Exec(ctx, `
		INSERT INTO turn_events (tenant_id, session_id, turn_id, seq, type, data)
		SELECT $1, $2, $3, s, t, d::json FROM unnest($4::integer[], $5::text[], $6::text[]) AS e(s, t, d)
		ON CONFLICT DO NOTHING`,
		ref.TenantID, ref.SessionID, ref.TurnID, seqs, types, datas)
	if err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "23503" { // foreign key: the turn is gone
			return ErrNotFound
		}
		return interpretError(err)
	}
	_, err = tx.Exec(ctx, `SELECT pg_notify($1, $2)`, EventsChannel, ref.TurnID)
	return interpretError(err)
}

// TurnEventsAfter returns up to limit recorded events of a turn after seq
// after, in order.
func (s *Store) TurnEventsAfter(ctx context.Context, ref TurnRef, after, limit int) ([]TurnEvent, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT seq, type, data::text FROM turn_events
		WHERE tenant_id = $1 AND session_id = $2 AND turn_id = $3 AND seq > $4
		ORDER BY seq LIMIT $5`, ref.TenantID, ref.SessionID, ref.TurnID, after, limit)
	if err != nil {
		return nil, fmt.Errorf("read events of turn %s: %w", ref.TurnID, interpretError(err))
	}
	defer rows.Close()
	var out []TurnEvent
	for rows.Next() {
		var (
			e    TurnEvent
			typ  string
			data []byte
		)
		if err := rows.Scan(&e.Seq, &typ, &data); err != nil {
			return nil, fmt.Errorf("read events of turn %s: %w", ref.TurnID, interpretError(err))
		}
		if e.Event, err = aap.ParseEvent(aap.EventType(typ), data); err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read events of turn %s: %w", ref.TurnID, interpretError(err))
	}
	return out, nil
}

// interruptedError is recorded on a turn whose process stopped.
const interruptedError = "the process running the turn stopped before it finished"

// interruptTurn records a running turn as interrupted, ends its event log
// with turn_stop "error", and releases its session if it still holds it.
// It reports whether the turn was running.
func interruptTurn(ctx context.Context, tx pgx.Tx, ref TurnRef) (bool, error) {
	tag, err := tx.Exec(ctx, `
		UPDATE turns SET status = 'interrupted', stop_reason = 'error', finished_at = now(), error = $4
		WHERE tenant_id = $1 AND session_id = $2 AND id = $3 AND status = 'running'`,
		ref.TenantID, ref.SessionID, ref.TurnID, interruptedError)
	if err != nil || tag.RowsAffected() == 0 {
		return false, interpretError(err)
	}
	var last int
	if err := tx.QueryRow(ctx, `SELECT coalesce(max(seq), 0) FROM turn_events
		WHERE tenant_id = $1 AND session_id = $2 AND turn_id = $3`, ref.TenantID, ref.SessionID, ref.TurnID).Scan(&last); err != nil {
		return false, interpretError(err)
	}
	if err := appendEvents(ctx, tx, ref, []TurnEvent{{Seq: last + 1, Event: aap.TurnStop(aap.StopError)}}); err != nil {
		return false, err
	}
	_, err = tx.Exec(ctx, `
		UPDATE sessions SET active_turn_id = NULL, lease_owner = NULL, lease_expires_at = NULL
		WHERE tenant_id = $1 AND id = $2 AND active_turn_id = $3`, ref.TenantID, ref.SessionID, ref.TurnID)
	return true, interpretError(err)
}

// TurnInterruptIfDead records a running turn as interrupted if the process
// that ran it is gone (it no longer holds its instance lock). It reports
// whether it did.
func (s *Store) TurnInterruptIfDead(ctx context.Context, ref TurnRef) (bool, error) {
	var done bool
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var dead bool
		err := tx.QueryRow(ctx, `
			SELECT owner IS NULL OR NOT aapd_instance_alive(owner) FROM turns
			WHERE tenant_id = $1 AND session_id = $2 AND id = $3 AND status = 'running' FOR UPDATE`,
			ref.TenantID, ref.SessionID, ref.TurnID).Scan(&dead)
		if errors.Is(interpretError(err), ErrNotFound) || (err == nil && !dead) {
			return nil
		}
		if err != nil {
			return interpretError(err)
		}
		done, err = interruptTurn(ctx, tx, ref)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("interrupt turn %s: %w", ref.TurnID, err)
	}
	return done, nil
}

// TurnRequestCancel asks the process running a turn to stop it: it sets the
// turn's cancel flag and publishes its id on CancelChannel. It returns the
// turn as it is.
func (s *Store) TurnRequestCancel(ctx context.Context, ref TurnRef) (Turn, error) {
	var t Turn
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		t, err = scanTurn(tx.QueryRow(ctx, `
			UPDATE turns SET cancel_requested = (status = 'running')
			WHERE tenant_id = $1 AND session_id = $2 AND id = $3
			RETURNING `+turnColumns, ref.TenantID, ref.SessionID, ref.TurnID))
		if err != nil || t.Status != TurnRunning {
			return err
		}
		_, err = tx.Exec(ctx, `SELECT pg_notify($1, $2)`, CancelChannel, ref.TurnID)
		return interpretError(err)
	})
	if err != nil {
		return Turn{}, fmt.Errorf("cancel turn %s: %w", ref.TurnID, err)
	}
	return t, nil
}
