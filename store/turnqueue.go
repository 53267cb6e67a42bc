package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/aapd/aapd/aap"
)

// The durable queue of background turns (docs/background.md). A background
// turn claims its session like any turn, and its claim also writes a row
// of turn_queue, which the turn's end deletes. A row whose claim has no
// live owner — never run (queued), handed back at a shutdown, or whose
// process died or stopped answering — is a turn waiting for a worker:
// TurnQueueWaiting lists them, TurnAdopt gives one to a worker, which goes
// on from the turn's last committed step. Every write of a turn is fenced
// on its attempt (turns.attempts), so the worker that was replaced writes
// nothing more.

// ErrNotAdoptable: the turn is not waiting for a worker (any more): it has
// ended, a live worker runs it, or another process is taking it.
var ErrNotAdoptable = errors.New("the turn is not waiting for a worker")

// QueueFullError refuses a background turn when its tenant has as many
// turns waiting for a worker as it may (its maxQueuedTurns).
type QueueFullError struct {
	// Limit is the tenant's maxQueuedTurns.
	Limit int
}

func (e *QueueFullError) Error() string {
	return fmt.Sprintf("the tenant has %d background turns waiting for a worker, as many as its limit allows", e.Limit)
}

// activeBackgroundSQL reads, beside a session's row ($1 tenant, $2
// session), whether the turn holding it is a background turn, whose claim
// no other turn takes over.
const activeBackgroundSQL = `coalesce((SELECT t.background FROM turns t
	WHERE t.tenant_id = $1 AND t.session_id = $2 AND t.id = sessions.active_turn_id), false)`

// queueLockKey is the first key of the advisory lock that serializes the
// queueing of a tenant's turns ('AAPQ'), so that its count of waiting turns
// stays within its limit.
const queueLockKey = 0x41415051

// queueQueuedCount queues, in a claim's read, the lock and the count of the
// tenant's turns waiting for their first worker.
func queueQueuedCount(b *pgx.Batch, tenantID string) {
	b.Queue(`SELECT pg_advisory_xact_lock($1, hashtext($2))`, int32(queueLockKey), tenantID)
	b.Queue(`SELECT count(*) FROM turn_queue q JOIN turns t ON t.tenant_id = q.tenant_id AND t.session_id = q.session_id AND t.id = q.turn_id
		WHERE q.tenant_id = $1 AND t.tenant_id = $1 AND t.attempts = 0 AND t.status = 'running'`, tenantID)
}

// WaitingTurn is a background turn that no live worker runs.
type WaitingTurn struct {
	Ref        TurnRef
	EnqueuedAt time.Time
	// Orphaned is true when a worker began the turn and no longer runs it:
	// its process is gone (or holds no instance lock: it may come back, so
	// callers wait a moment before they resume it), or its lease ran out.
	// False for a turn no worker has begun, or one handed back.
	Orphaned bool
	// Owner is the instance that last ran an orphaned turn.
	Owner int32
}

// TurnQueueWaiting lists the background turns waiting for a worker, at
// most limit: each tenant's oldest first, in rounds across tenants (every
// tenant's oldest, then every tenant's second…), so a tenant with a long
// queue does not starve another.
//
// It takes no lock: TurnAdopt decides. On Citus (docs/citus.md) its reads
// run on every worker, and liveness and the lease's clock are judged on the
// coordinator, as for every claim (claim.go).
func (s *Store) TurnQueueWaiting(ctx context.Context, limit int) ([]WaitingTurn, error) {
	rows, err := s.chores.Query(ctx, `
		SELECT DISTINCT s.lease_owner FROM turn_queue q
		JOIN sessions s ON s.tenant_id = q.tenant_id AND s.id = q.session_id AND s.active_turn_id = q.turn_id
		WHERE s.lease_owner IS NOT NULL`)
	if err != nil {
		return nil, fmt.Errorf("list waiting turns: %w", interpretError(err))
	}
	owners, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return nil, fmt.Errorf("list waiting turns: %w", interpretError(err))
	}
	var (
		dead []int32
		now  time.Time
	)
	if err := s.pool.QueryRow(ctx, `
		SELECT coalesce(array_agg(o) FILTER (WHERE NOT aapd_instance_alive(o)), '{}'), now()
		FROM unnest($1::integer[]) AS o`, owners).Scan(&dead, &now); err != nil {
		return nil, fmt.Errorf("list waiting turns: %w", interpretError(err))
	}
	rows, err = s.chores.Query(ctx, `
		SELECT tenant_id::text, session_id, turn_id, enqueued_at, coalesce(owner, 0) FROM (
			SELECT q.tenant_id, q.session_id, q.turn_id, q.enqueued_at, s.lease_owner AS owner,
				row_number() OVER (PARTITION BY q.tenant_id ORDER BY q.enqueued_at, q.turn_id) AS rank
			FROM turn_queue q
			JOIN sessions s ON s.tenant_id = q.tenant_id AND s.id = q.session_id AND s.active_turn_id = q.turn_id
			WHERE s.lease_owner IS NULL OR s.lease_owner = ANY($1) OR s.lease_expires_at < $2
		) w
		ORDER BY rank, enqueued_at, turn_id LIMIT $3`, dead, now, limit)
	if err != nil {
		return nil, fmt.Errorf("list waiting turns: %w", interpretError(err))
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (w WaitingTurn, err error) {
		err = r.Scan(&w.Ref.TenantID, &w.Ref.SessionID, &w.Ref.TurnID, &w.EnqueuedAt, &w.Owner)
		w.Orphaned = w.Owner != 0
		return w, err
	})
	if err != nil {
		return nil, fmt.Errorf("list waiting turns: %w", interpretError(err))
	}
	return out, nil
}

// TurnAdoptParams gives a background turn waiting for a worker to a worker
// of this process.
type TurnAdoptParams struct {
	Ref TurnRef
	// Owner is this process's instance id; Lease how long the claim holds
	// without a heartbeat.
	Owner int32
	Lease time.Duration
	// MaxAttempts bounds the workers that may begin the turn: a turn begun
	// that many times is ended instead, failed with attempts_exhausted.
	MaxAttempts int
}

// TurnAdopted is where an adopted background turn stands: what its worker
// goes on from.
type TurnAdopted struct {
	// Turn is its record, Attempts counting this worker. When Ended is
	// true the turn was ended instead of adopted (Turn.Status says how:
	// cancelled, or failed with its attempts exhausted).
	Turn  Turn
	Ended bool
	// Session is its session as the turn's last commit left it, LastSeq
	// the session's last seq, and History its whole compacted history, of
	// CompactionVersion.
	Session           Session
	LastSeq           int64
	CompactionVersion int64
	History           []StoredMessage
	// Step is the number of the turn's last committed step.
	Step int
	// Events is its recorded log, ids 1 to len(Events) (none if it recorded
	// nothing: turn_start alone was shown).
	Events []aap.Event
}

// TurnAdopt takes a background turn that no live worker runs for this
// process, in one transaction: the session is locked (FOR UPDATE SKIP
// LOCKED: a process taking it or a write of the turn under way leaves it
// to the next look), the claim is judged still unowned (never run, handed
// back, or its owner dead or its lease out), and the turn's attempts go up
// by one with the claim's owner and lease. It fails with ErrNotAdoptable
// when the turn is not waiting. A turn whose cancel was asked, or begun
// p.MaxAttempts times already, is ended instead (TurnAdopted.Ended).
func (s *Store) TurnAdopt(ctx context.Context, p TurnAdoptParams) (*TurnAdopted, error) {
	out := &TurnAdopted{}
	ref := p.Ref
	err := s.inTx(ctx, ref.TenantID, func(tx pgx.Tx) error {
		var (
			lastSeq, version int64
			lease            *time.Time
			owner            *int32
			cancel           bool
		)
		sess, err := s.scanSessionWith(tx.QueryRow(ctx, `SELECT `+sessionColumns+`, last_seq, compaction_version, lease_expires_at, lease_owner
			FROM sessions WHERE tenant_id = $1 AND id = $2 AND active_turn_id = $3 FOR UPDATE SKIP LOCKED`,
			ref.TenantID, ref.SessionID, ref.TurnID), &lastSeq, &version, &lease, &owner)
		if errors.Is(err, ErrNotFound) {
			return ErrNotAdoptable
		}
		if err != nil {
			return err
		}
		turn, err := scanTurn(tx.QueryRow(ctx, `SELECT `+turnColumns+`, step, cancel_requested FROM turns
			WHERE tenant_id = $1 AND session_id = $2 AND id = $3 AND status = 'running' AND background
			  AND EXISTS (SELECT 1 FROM turn_queue WHERE tenant_id = $1 AND session_id = $2 AND turn_id = $3)
			FOR UPDATE`, ref.TenantID, ref.SessionID, ref.TurnID), &out.Step, &cancel)
		if errors.Is(err, ErrNotFound) {
			return ErrNotAdoptable
		}
		if err != nil {
			return err
		}
		if owner != nil {
			expired, dead, err := claimState(ctx, tx, lease, owner)
			if err != nil {
				return err
			}
			if !expired && !dead {
				return ErrNotAdoptable
			}
		}
		switch {
		case cancel:
			out.Ended = true
			return endUnowned(ctx, tx, ref, TurnCancelled, aap.TurnStop(aap.StopEndTurn))
		case p.MaxAttempts > 0 && turn.Attempts >= p.MaxAttempts:
			out.Ended = true
			return endUnowned(ctx, tx, ref, TurnFailed, aap.TurnStopError(aap.TurnError{Type: aap.TurnErrorAttemptsExhausted,
				Message: fmt.Sprintf("the turn was begun %d times, and each time its process stopped before it finished; what it had committed is kept", turn.Attempts)}))
		}
		out.Turn, out.Session, out.LastSeq, out.CompactionVersion = turn, sess, lastSeq, version
		return s.adopt(ctx, tx, p, out)
	})
	if err != nil {
		return nil, fmt.Errorf("adopt turn %s: %w", ref.TurnID, err)
	}
	if out.Ended {
		out.Turn, err = s.TurnGet(ctx, ref.TenantID, ref.SessionID, ref.TurnID)
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// adopt writes the new attempt and the claim's owner, and reads what the
// worker goes on from: the compacted history and the recorded events.
func (s *Store) adopt(ctx context.Context, tx pgx.Tx, p TurnAdoptParams, out *TurnAdopted) error {
	ref := p.Ref
	b := &pgx.Batch{}
	b.Queue(`UPDATE turns SET attempts = attempts + 1, owner = $4 WHERE tenant_id = $1 AND session_id = $2 AND id = $3`,
		ref.TenantID, ref.SessionID, ref.TurnID, p.Owner)
	b.Queue(`UPDATE sessions SET lease_owner = $4, lease_expires_at = now() + $5 * interval '1 millisecond'
		WHERE tenant_id = $1 AND id = $2 AND active_turn_id = $3`, ref.TenantID, ref.SessionID, ref.TurnID, p.Owner, p.Lease.Milliseconds())
	b.Queue(`SELECT seq, coalesce(source_seq, 0), message::text, extra::text FROM compacted_messages
		WHERE tenant_id = $1 AND session_id = $2 ORDER BY seq`, ref.TenantID, ref.SessionID)
	b.Queue(`SELECT first_seq, events::text FROM turn_event_batches
		WHERE tenant_id = $1 AND session_id = $2 AND turn_id = $3 ORDER BY first_seq`, ref.TenantID, ref.SessionID, ref.TurnID)
	br := tx.SendBatch(ctx, b)
	defer br.Close()
	for range 2 {
		if _, err := br.Exec(); err != nil {
			return interpretError(err)
		}
	}
	rows, err := br.Query()
	if err != nil {
		return interpretError(err)
	}
	if out.History, err = scanHistory(rows); err != nil {
		return err
	}
	rows, err = br.Query()
	if err != nil {
		return interpretError(err)
	}
	type batch struct {
		first  int
		events []byte
	}
	batches, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (b batch, err error) {
		err = r.Scan(&b.first, &b.events)
		return b, err
	})
	if err != nil {
		return interpretError(err)
	}
	// Batches may overlap (one recorded again, longer): each id once.
	for _, b := range batches {
		evs, err := decodeEvents(nil, b.events)
		if err != nil {
			return fmt.Errorf("read events of turn %s: %w", ref.TurnID, err)
		}
		for i, e := range evs {
			if b.first+i == len(out.Events)+1 {
				out.Events = append(out.Events, e)
			}
		}
	}
	out.Turn.Attempts++
	out.Turn.Status = TurnRunning
	return nil
}

// endUnowned ends a background turn no worker runs, in tx: its status and
// log (queueEnd), the release of its session and its row of the queue.
// The session is locked by the caller.
func endUnowned(ctx context.Context, tx pgx.Tx, ref TurnRef, status TurnStatus, stop aap.Event) error {
	b := &pgx.Batch{}
	if err := queueEnd(b, ref, status, stop); err != nil {
		return err
	}
	b.Queue(`UPDATE sessions SET active_turn_id = NULL, lease_owner = NULL, lease_expires_at = NULL, updated_at = now()
		WHERE tenant_id = $1 AND id = $2 AND active_turn_id = $3`, ref.TenantID, ref.SessionID, ref.TurnID)
	b.Queue(`DELETE FROM turn_queue WHERE tenant_id = $1 AND session_id = $2 AND turn_id = $3`, ref.TenantID, ref.SessionID, ref.TurnID)
	br := tx.SendBatch(ctx, b)
	defer br.Close()
	for range b.Len() {
		if _, err := br.Exec(); err != nil {
			return interpretError(err)
		}
	}
	return nil
}

// TurnCancelUnowned cancels a background turn that no live worker runs (it
// is queued, or its process is gone): it ends it as cancelled, its log
// closed with turn_stop "end_turn", and frees its session. It reports
// whether it did; a turn that a live worker runs is left to it (its cancel
// flag, TurnRequestCancel).
func (s *Store) TurnCancelUnowned(ctx context.Context, ref TurnRef) (bool, error) {
	var done bool
	err := s.inTx(ctx, ref.TenantID, func(tx pgx.Tx) error {
		var (
			lease *time.Time
			owner *int32
		)
		err := tx.QueryRow(ctx, `SELECT s.lease_expires_at, s.lease_owner FROM sessions s
			WHERE s.tenant_id = $1 AND s.id = $2 AND s.active_turn_id = $3
			  AND EXISTS (SELECT 1 FROM turns t WHERE t.tenant_id = $1 AND t.session_id = $2 AND t.id = $3 AND t.background AND t.status = 'running')
			FOR UPDATE`, ref.TenantID, ref.SessionID, ref.TurnID).Scan(&lease, &owner)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return interpretError(err)
		}
		if owner != nil {
			expired, dead, err := claimState(ctx, tx, lease, owner)
			if err != nil || (!expired && !dead) {
				return err
			}
		}
		done = true
		return endUnowned(ctx, tx, ref, TurnCancelled, aap.TurnStop(aap.StopEndTurn))
	})
	if err != nil {
		return false, fmt.Errorf("cancel turn %s: %w", ref.TurnID, err)
	}
	return done, nil
}

// TurnRelease hands a background turn this process runs back to the queue
// (a shutdown that cannot wait for its end): its claim loses its owner and
// lease, so any process resumes it at once from its last committed step.
// It does nothing if the attempt no longer holds the turn.
func (s *Store) TurnRelease(ctx context.Context, ref TurnRef, attempt int) error {
	_, err := s.tenant(ref.TenantID).Exec(ctx, `UPDATE sessions SET lease_owner = NULL, lease_expires_at = NULL
		WHERE tenant_id = $1 AND id = $2 AND active_turn_id = $3
		  AND EXISTS (SELECT 1 FROM turns t WHERE t.tenant_id = $1 AND t.session_id = $2 AND t.id = $3
		              AND t.background AND t.status = 'running' AND t.attempts = $4)`,
		ref.TenantID, ref.SessionID, ref.TurnID, attempt)
	if err != nil {
		return fmt.Errorf("release turn %s: %w", ref.TurnID, interpretError(err))
	}
	return nil
}
