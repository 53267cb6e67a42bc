package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/aapd/aapd/aap"
)

// CancelChannel is the notification channel on which the id of a turn to
// cancel is published, so that whichever process runs it stops it.
const CancelChannel = "aapd_turn_cancel"

// TurnRef names a turn of a session of a tenant.
type TurnRef struct {
	TenantID  string
	SessionID string
	TurnID    string
}

// TurnEventsAppend records a batch of a running turn's events, first
// numbered first (the ids are consecutive). Recording a batch again, or a
// longer batch from the same first id, is safe: the longer one wins. It
// reports false, recording nothing, once the turn is no longer running
// (finished, taken over, resumed by another attempt, or deleted with its
// session): what it had not recorded by then is not part of its log.
// attempt is the turn's attempt that records (0 is taken as 1, as in
// TurnStepParams).
func (s *Store) TurnEventsAppend(ctx context.Context, ref TurnRef, attempt, first int, events []aap.Event) (bool, error) {
	if len(events) == 0 {
		return true, nil
	}
	data, err := encodeEvents(events)
	if err != nil {
		return false, err
	}
	// FOR SHARE: a takeover that folds the log waits for this batch, and
	// then sees it.
	tag, err := s.tenant(ref.TenantID).Exec(ctx, `
		INSERT INTO turn_event_batches (tenant_id, session_id, turn_id, first_seq, last_seq, events)
		SELECT $1, $2, $3, $4, $5, $6::json
		WHERE EXISTS (SELECT 1 FROM turns WHERE tenant_id = $1 AND session_id = $2 AND id = $3 AND status = 'running'
		                AND attempts = $7 FOR SHARE)
		ON CONFLICT (tenant_id, session_id, turn_id, first_seq)
		DO UPDATE SET last_seq = EXCLUDED.last_seq, events = EXCLUDED.events`,
		ref.TenantID, ref.SessionID, ref.TurnID, first, first+len(events)-1, data, max(attempt, 1))
	if err != nil {
		return false, fmt.Errorf("record events of turn %s: %w", ref.TurnID, writeError(err))
	}
	return tag.RowsAffected() > 0, nil
}

// TurnLog is a turn's recorded events after a position.
type TurnLog struct {
	// Events are the events after the position asked for, in order.
	Events []aap.Event
	// Len is the number of events recorded so far: the id of the last one.
	Len int
	// Finished is true once the turn has ended: its log is whole, and its
	// last event is turn_stop.
	Finished bool
	// Status is the turn's status.
	Status TurnStatus
	// Trimmed is true when the turn's log was dropped with its session's
	// trimmed full history: Events is then turn_start and the turn's
	// turn_stop alone, a log that still ends (what a replay of the turn
	// sends); a read of the turn's events answers ErrTurnTrimmed.
	Trimmed bool
}

// TurnEventsAfter reads a turn's recorded events after id after, with the
// turn's status, consistently (one statement): a finished turn's log whole
// from its folded form, a running turn's from its batches. ErrNotFound
// once the turn is gone. A turn whose log was dropped with its session's
// trimmed full history reads as Trimmed.
func (s *Store) TurnEventsAfter(ctx context.Context, ref TurnRef, after int64) (TurnLog, error) {
	var (
		out                         TurnLog
		folded                      []byte
		batches                     []byte
		stopReason, errType, errMsg string
	)
	err := s.tenant(ref.TenantID).QueryRow(ctx, `
		SELECT t.status, coalesce(t.stop_reason, ''), coalesce(t.error_type, ''), coalesce(t.error, ''), t.events::text,
			(SELECT json_agg(json_build_object('f', b.first_seq, 'e', b.events) ORDER BY b.first_seq)::text
			 FROM turn_event_batches b
			 WHERE b.tenant_id = t.tenant_id AND b.session_id = t.session_id AND b.turn_id = t.id AND b.last_seq > $4::bigint),
			(SELECT coalesce(max(b.last_seq), 0) FROM turn_event_batches b
			 WHERE b.tenant_id = t.tenant_id AND b.session_id = t.session_id AND b.turn_id = t.id)
		FROM turns t WHERE t.tenant_id = $1 AND t.session_id = $2 AND t.id = $3`,
		ref.TenantID, ref.SessionID, ref.TurnID, after).Scan(&out.Status, &stopReason, &errType, &errMsg, &folded, &batches, &out.Len)
	if err != nil {
		return TurnLog{}, fmt.Errorf("read events of turn %s: %w", ref.TurnID, interpretError(err))
	}
	out.Finished = out.Status != TurnRunning
	if isTrimmedLog(folded) {
		stop := aap.TurnStop(aap.StopReason(stopReason))
		if errType != "" || errMsg != "" {
			stop = aap.TurnStopError(aap.TurnError{Type: errType, Message: errMsg})
		}
		all := []aap.Event{aap.TurnStart(), stop}
		out.Trimmed, out.Len = true, len(all)
		if after < int64(len(all)) {
			out.Events = all[after:]
		}
		return out, nil
	}
	if folded != nil {
		all, err := decodeEvents(nil, folded)
		if err != nil {
			return TurnLog{}, fmt.Errorf("read events of turn %s: %w", ref.TurnID, err)
		}
		out.Len = len(all)
		if after < int64(len(all)) {
			out.Events = all[after:]
		}
		return out, nil
	}
	// A running turn's log has turn_start (id 1) before anything is
	// recorded: its process sends it at once.
	out.Len = max(out.Len, 1)
	if batches == nil {
		return out, nil
	}
	var list []struct {
		F int64           `json:"f"`
		E json.RawMessage `json:"e"`
	}
	if err := json.Unmarshal(batches, &list); err != nil {
		return TurnLog{}, fmt.Errorf("read events of turn %s: %w", ref.TurnID, err)
	}
	for _, b := range list {
		evs, err := decodeEvents(nil, b.E)
		if err != nil {
			return TurnLog{}, fmt.Errorf("read events of turn %s: %w", ref.TurnID, err)
		}
		for i, e := range evs {
			if b.F+int64(i) == after+int64(len(out.Events))+1 {
				out.Events = append(out.Events, e)
			}
		}
	}
	return out, nil
}

// interruptedError is recorded on a turn whose process stopped.
const interruptedError = "the process running the turn stopped before it finished"

// queueInterrupt queues the statements that record a running turn as
// interrupted and end its log (queueEnd).
func queueInterrupt(b *pgx.Batch, ref TurnRef) error {
	return queueEnd(b, ref, TurnInterrupted, aap.TurnStopError(aap.TurnError{Type: aap.TurnErrorInterrupted, Message: interruptedError}))
}

// queueEnd queues the statements that end a running turn that no worker
// will end (its process died, or it never ran): its status, and its log
// with its recorded batches folded, then stop (turn_stop) with the next id —
// after every id a client can have been sent, since a process sends only
// what it has recorded. A turn that recorded nothing gets turn_start (id 1,
// which a process sends at once) before it. The turn's row is locked
// first, so a batch being recorded is waited for and included; then the
// turn's webhook event is queued (unownedEndOutbox), and the turn is added
// to its tenant's usage (usageTurnEnding) if it still runs. It queues four
// statements: the lock, the event, the usage, the record.
func queueEnd(b *pgx.Batch, ref TurnRef, status TurnStatus, stop aap.Event) error {
	stopEntry, err := encodeEvents([]aap.Event{stop})
	if err != nil {
		// A turn_stop always encodes; should it not, the log ends without it.
		stopEntry = "[]"
	}
	var errType, errMsg string
	if stop.Error != nil {
		errType, errMsg = stop.Error.Type, PgText(stop.Error.Message)
	}
	b.Queue(`SELECT 1 FROM turns WHERE tenant_id = $1 AND session_id = $2 AND id = $3 FOR UPDATE`,
		ref.TenantID, ref.SessionID, ref.TurnID)
	outbox, err := unownedEndOutbox(ref, status, stop)
	if err != nil {
		return err
	}
	b.Queue(outbox.sql, outbox.args...)
	usage := usageTurnEnding(ref)
	b.Queue(usage.sql, usage.args...)
	b.Queue(`
		WITH batches AS (
			DELETE FROM turn_event_batches WHERE tenant_id = $1 AND session_id = $2 AND turn_id = $3
			RETURNING first_seq, events
		), entries AS (
			SELECT x.e, b.first_seq AS o1, x.o AS o2
			FROM batches b, json_array_elements(b.events) WITH ORDINALITY AS x(e, o)
			UNION ALL SELECT '{"t":"turn_start","d":{}}'::json, 0, 0 WHERE NOT EXISTS (SELECT 1 FROM batches)
			UNION ALL SELECT x.e, 2147483647, x.o FROM json_array_elements($4::json) WITH ORDINALITY AS x(e, o)
		)
		UPDATE turns SET status = $5, stop_reason = $6, finished_at = now(), error = nullif($7, ''), error_type = nullif($8, ''),
			events = (SELECT json_agg(e ORDER BY o1, o2) FROM entries)
		WHERE tenant_id = $1 AND session_id = $2 AND id = $3 AND status = 'running'`,
		ref.TenantID, ref.SessionID, ref.TurnID, stopEntry, status, stop.StopReason, errMsg, errType)
	return nil
}

// turnClaimSQL reads, for a running turn ($1 tenant, $2 session, $3 turn),
// the claim of its session: which turn holds it, until when, and the
// instance running the turn. turnDead judges it.
const turnClaimSQL = `
	SELECT coalesce(s.active_turn_id, ''), s.lease_expires_at, t.owner
	FROM sessions s JOIN turns t ON t.tenant_id = s.tenant_id AND t.session_id = s.id
	WHERE s.tenant_id = $1 AND s.id = $2 AND t.id = $3 AND t.status = 'running' AND NOT t.background`

// turnDead says why a running turn can no longer finish by itself — its
// session is claimed by another turn, its claim expired, or the process
// that runs it no longer holds its instance lock — or "" when it can, or is
// not running. A background turn always can: another process resumes it
// (TurnAdopt). lock takes the session's row lock as it reads.
func turnDead(ctx context.Context, db dbtx, ref TurnRef, lock bool) (string, error) {
	q := turnClaimSQL
	if lock {
		q += ` FOR UPDATE OF s`
	}
	var (
		active string
		lease  *time.Time
		owner  *int32
	)
	err := interpretError(db.QueryRow(ctx, q, ref.TenantID, ref.SessionID, ref.TurnID).Scan(&active, &lease, &owner))
	if errors.Is(err, ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	if active != ref.TurnID {
		return "the session is claimed by another turn", nil
	}
	expired, dead, err := claimState(ctx, db, lease, owner)
	switch {
	case err != nil:
		return "", err
	case expired:
		return "its claim expired", nil
	case dead:
		return "its process holds no instance lock", nil
	}
	return "", nil
}

// TurnLooksDead says, without changing anything, why a running turn looks
// as if it cannot finish by itself (turnDead); "" when it looks alive, or
// is not running. A process whose connection to the database is down for a
// moment (a restart) looks dead too: callers confirm over time before
// TurnInterruptIfDead.
func (s *Store) TurnLooksDead(ctx context.Context, ref TurnRef) (why string, err error) {
	why, err = turnDead(ctx, s.tenant(ref.TenantID), ref, false)
	if err != nil {
		return "", fmt.Errorf("check turn %s: %w", ref.TurnID, err)
	}
	return why, nil
}

// TurnInterruptIfDead records a running turn as interrupted if it cannot
// finish by itself any more: the process that ran it is gone (it no longer
// holds its instance lock), or its claim's lease ran out. It reports
// whether it did.
func (s *Store) TurnInterruptIfDead(ctx context.Context, ref TurnRef) (bool, error) {
	var done bool
	err := s.inTx(ctx, ref.TenantID, func(tx pgx.Tx) error {
		// The session first, as every turn write locks it: no deadlock.
		why, err := turnDead(ctx, tx, ref, true)
		if err != nil || why == "" {
			return err
		}
		b := &pgx.Batch{}
		if err := queueInterrupt(b, ref); err != nil {
			return err
		}
		b.Queue(`UPDATE sessions SET active_turn_id = NULL, lease_owner = NULL, lease_expires_at = NULL
			WHERE tenant_id = $1 AND id = $2 AND active_turn_id = $3`, ref.TenantID, ref.SessionID, ref.TurnID)
		br := tx.SendBatch(ctx, b)
		defer br.Close()
		for range 3 { // the lock, the webhook event, the usage
			if _, err := br.Exec(); err != nil {
				return interpretError(err)
			}
		}
		tag, err := br.Exec()
		if err != nil {
			return interpretError(err)
		}
		done = tag.RowsAffected() > 0
		_, err = br.Exec()
		return interpretError(err)
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
	err := s.inTx(ctx, ref.TenantID, func(tx pgx.Tx) error {
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
