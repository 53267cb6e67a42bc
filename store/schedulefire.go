package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// A schedule's tick, exactly once: the scheduler of every replica lists
// the schedules due (SchedulesDue) and fires each (ScheduleFire), whose one
// transaction locks the schedule (FOR UPDATE SKIP LOCKED: a replica firing
// it already has it), claims its session for the tick's turn as a queued
// background turn (turnBeginRead, as StartBackground queues one when every
// worker is busy), and advances next_run_at. A replica that dies before the
// commit leaves the tick due and no turn; after it, the turn queued and
// the tick past. The turn carries an idempotency key made of the schedule
// and the tick, so that even a tick fired twice could not start two turns.

// Why a tick started no turn (ScheduleFired.Skipped).
const (
	// ScheduleSkipRunning: the session still ran a turn (the schedule's
	// previous one, or another).
	ScheduleSkipRunning = "running"
	// ScheduleSkipRefused: the turn was refused (ScheduleFired.Refusal).
	ScheduleSkipRefused = "refused"
)

// ScheduleTick is what a due schedule does now, as its scheduler decided
// from the schedule and the database's clock.
type ScheduleTick struct {
	// Turn claims the tick's turn: a queued background turn (Queued and
	// Background set). Nil when no tick runs: those due were missed, or the
	// schedule ended before them.
	Turn *TurnBeginParams
	// At is the tick that runs, with Turn.
	At time.Time
	// Missed counts the ticks skipped because they were more than a period
	// late (missed while no replica ran).
	Missed int
	// Next is the schedule's next tick; nil when it has ended.
	Next *time.Time
	// Refusal, when set, refuses the tick's turn without claiming it (the
	// schedule itself cannot run): it is counted refused.
	Refusal error
}

// ScheduleFireParams fires a schedule's due tick.
type ScheduleFireParams struct {
	Ref ScheduleRef
	// Plan decides what the tick does from the schedule as locked, and now
	// by the database's clock. It runs inside the firing transaction.
	Plan func(sc Schedule, now time.Time) ScheduleTick
}

// ScheduleFired is what firing a due schedule did.
type ScheduleFired struct {
	// Schedule is as it was when its tick was claimed.
	Schedule Schedule
	Tick     ScheduleTick
	// Turn is the turn the tick queued; nil if none.
	Turn *Turn
	// Skipped says why the tick that was due to run started no turn:
	// ScheduleSkipRunning or ScheduleSkipRefused, Refusal then saying why;
	// "" when it started one, or none was due to run.
	Skipped string
	Refusal error
}

// SchedulesDue lists the schedules due by the database's clock, those due
// longest first, at most limit. It is one of the few queries across
// tenants (each scheduler's look), so it runs as the chores role, through
// the tenant wall (wall.go); it reads only the schedules' names, and each
// is then fired on its own, in a transaction of its tenant (ScheduleFire),
// which decides.
func (s *Store) SchedulesDue(ctx context.Context, limit int) ([]ScheduleRef, error) {
	rows, err := s.chores.Query(ctx, `SELECT tenant_id::text, session_id, id FROM schedules
		WHERE next_run_at <= now() ORDER BY next_run_at LIMIT $1`, limit)
	if err != nil {
		return nil, fmt.Errorf("find due schedules: %w", interpretError(err))
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ref ScheduleRef, err error) {
		err = r.Scan(&ref.TenantID, &ref.SessionID, &ref.ScheduleID)
		return ref, err
	})
	if err != nil {
		return nil, fmt.Errorf("find due schedules: %w", interpretError(err))
	}
	return out, nil
}

// ScheduleFire fires a schedule if it is due, in one transaction: it
// locks its session, then the schedule (skipping it if another replica
// holds it), asks p.Plan what the tick does, claims the session for the
// tick's turn (queued: a worker of any process adopts it, TurnAdopt), and
// advances the schedule, counting the tick. A session that runs a turn
// skips the tick (ScheduleSkipRunning); a turn the pipeline refuses
// (an ended session, an unknown agent, the tenant's queue full…) skips it
// too (ScheduleSkipRefused), its reason kept in the schedule's last error.
// It returns nil when the schedule is not due (any more) or gone.
//
// The session is locked before the schedule, as a session's deletion locks
// it before the deletion cascades to its schedules.
func (s *Store) ScheduleFire(ctx context.Context, p ScheduleFireParams) (*ScheduleFired, error) {
	out, err := s.scheduleFire(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("fire schedule %s: %w", p.Ref.ScheduleID, err)
	}
	return out, nil
}

func (s *Store) scheduleFire(ctx context.Context, p ScheduleFireParams) (*ScheduleFired, error) {
	ref := p.Ref
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, interpretError(err)
	}
	defer conn.Release()
	rollback := func() { _, _ = conn.Exec(context.WithoutCancel(ctx), "ROLLBACK") }

	out := &ScheduleFired{}
	var now time.Time
	b := &pgx.Batch{}
	queueBegin(b, ref.TenantID)
	b.Queue(`SELECT 1 FROM sessions WHERE tenant_id = $1 AND id = $2 FOR UPDATE`, ref.TenantID, ref.SessionID)
	b.Queue(`SELECT `+scheduleColumns+`, now() FROM schedules
		WHERE tenant_id = $1 AND session_id = $2 AND id = $3 AND next_run_at <= now()
		FOR UPDATE SKIP LOCKED`, ref.TenantID, ref.SessionID, ref.ScheduleID)
	br := conn.SendBatch(ctx, b)
	for i := 0; i < beginLen && err == nil; i++ {
		_, err = br.Exec()
	}
	if err == nil {
		var one int
		err = br.QueryRow().Scan(&one)
	}
	if err == nil {
		out.Schedule, err = scanSchedule(br.QueryRow(), &now)
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		rollback()
		if errors.Is(interpretError(err), ErrNotFound) {
			return nil, nil
		}
		return nil, interpretError(err)
	}

	tick := p.Plan(out.Schedule, now)
	out.Tick = tick
	advance := scheduleAdvance{ref: ref, tick: tick}
	if tick.Turn == nil {
		if tick.Refusal != nil {
			out.Skipped, out.Refusal = ScheduleSkipRefused, tick.Refusal
			advance.refused = tick.Refusal
		}
		return out, s.scheduleAdvance(ctx, conn, advance)
	}

	// The claim's plan is the pipeline's (agents): its refusal skips the
	// tick; any other error is the database's.
	turn := *tick.Turn
	var refused error
	prepare := turn.Prepare
	turn.Prepare = func(sess Session) (TurnPlan, error) {
		plan, err := prepare(sess)
		refused = err
		return plan, err
	}
	advance.turnID = turn.TurnID
	begun, err := s.turnBeginRead(ctx, conn, &turn, &claimInTx{then: []batchStmt{advance.stmt()}})
	var (
		running *TurnRunningError
		full    *QueueFullError
	)
	switch {
	case err == nil && begun.Replay:
		// The tick's turn exists (it cannot, its tick being past once it
		// does; but if it did, it would not run twice).
		advance.turnID, advance.replay = begun.Turn.ID, true
		return out, s.scheduleAdvance(ctx, conn, advance)
	case err == nil:
		t := begun.Turn
		out.Turn = &t
		return out, nil
	case errors.As(err, &running):
		out.Skipped = ScheduleSkipRunning
		advance.turnID, advance.running = "", true
		return out, s.scheduleAdvance(ctx, conn, advance)
	case errors.As(err, &full), errors.Is(err, ErrIdempotencyMismatch), refused != nil && errors.Is(err, refused):
		out.Skipped, out.Refusal = ScheduleSkipRefused, err
		advance.turnID, advance.refused = "", err
		return out, s.scheduleAdvance(ctx, conn, advance)
	}
	// The claim's write rolled back or closed the connection already; a
	// read that failed left the transaction aborted.
	rollback()
	return nil, err
}

// scheduleAdvance is a fired tick's write to its schedule: the next tick,
// and what the tick did.
type scheduleAdvance struct {
	ref  ScheduleRef
	tick ScheduleTick
	// turnID is the turn the tick started ("": none); replay when it had
	// started it before.
	turnID  string
	replay  bool
	running bool
	refused error
}

func (a scheduleAdvance) stmt() batchStmt {
	var runs, running, refused int
	var lastRun *time.Time
	var lastError *string
	switch {
	case a.turnID != "" && !a.replay:
		runs, lastRun = 1, &a.tick.At
	case a.running:
		running = 1
	case a.refused != nil:
		refused = 1
		msg := a.refused.Error()
		lastError = &msg
	}
	return batchStmt{sql: `UPDATE schedules SET next_run_at = $4, skipped_missed = skipped_missed + $5,
			runs = runs + $6, last_run_at = coalesce($7, last_run_at), last_turn_id = coalesce(nullif($8, ''), last_turn_id),
			skipped_running = skipped_running + $9, skipped_refused = skipped_refused + $10,
			last_error = CASE WHEN $6 > 0 THEN NULL ELSE coalesce($11, last_error) END
		WHERE tenant_id = $1 AND session_id = $2 AND id = $3`,
		args: []any{a.ref.TenantID, a.ref.SessionID, a.ref.ScheduleID, a.tick.Next, a.tick.Missed,
			runs, lastRun, a.turnID, running, refused, lastError}}
}

// scheduleAdvance writes a tick that started no turn, and commits.
func (s *Store) scheduleAdvance(ctx context.Context, conn *pgxpool.Conn, a scheduleAdvance) error {
	b := &pgx.Batch{}
	st := a.stmt()
	b.Queue(st.sql, st.args...)
	b.Queue("COMMIT")
	return sendTx(ctx, conn, b, nil)
}
