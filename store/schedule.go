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

// Schedules (docs/background.md#schedules) start a session's turns by a
// clock: each tick queues one background turn (schedulefire.go). A
// schedule belongs to its session: its rows go with the session's
// deletion (a foreign key), and travel in its export.

// Schedule is one of a session's schedules.
type Schedule struct {
	TenantID  string
	SessionID string
	ID        string
	// Cron is a five-field cron expression read in Timezone (an IANA name,
	// "" for UTC); or, when Cron is "", the schedule ticks every Every.
	Cron     string
	Timezone string
	Every    time.Duration
	// Request is the turn each tick starts.
	Request   aap.TurnRequest
	EndAt     *time.Time
	CreatedAt time.Time
	// NextRunAt is the next tick; nil once the schedule has ended.
	NextRunAt  *time.Time
	LastRunAt  *time.Time
	LastTurnID string
	// Runs counts the ticks that started a turn; the Skipped counts the
	// ticks that did not: the session still ran a turn (its previous one,
	// or another), the tick was missed while no replica ran and is more
	// than a period late, or the turn was refused (LastError says why).
	Runs           int64
	SkippedRunning int64
	SkippedMissed  int64
	SkippedRefused int64
	LastError      string
}

// Ref names the schedule.
func (s Schedule) Ref() ScheduleRef {
	return ScheduleRef{TenantID: s.TenantID, SessionID: s.SessionID, ScheduleID: s.ID}
}

// ScheduleRef names a schedule.
type ScheduleRef struct {
	TenantID, SessionID, ScheduleID string
}

// MaxSchedulesPerSession bounds a session's schedules (ErrScheduleLimit).
const MaxSchedulesPerSession = 20

// ErrScheduleLimit: the session has as many schedules as it may.
var ErrScheduleLimit = fmt.Errorf("the session has %d schedules, as many as it may have", MaxSchedulesPerSession)

// NewScheduleID returns an opaque, time-ordered schedule id.
func NewScheduleID() string { return "sch_" + mustV7() }

const scheduleColumns = `tenant_id::text, session_id, id, coalesce(cron, ''), coalesce(timezone, ''), coalesce(every_ms, 0),
	request::text, end_at, created_at, next_run_at, last_run_at, coalesce(last_turn_id, ''),
	runs, skipped_running, skipped_missed, skipped_refused, coalesce(last_error, '')`

func scanSchedule(row interface{ Scan(...any) error }, extra ...any) (Schedule, error) {
	var (
		s       Schedule
		everyMs int64
		request []byte
	)
	err := row.Scan(append([]any{&s.TenantID, &s.SessionID, &s.ID, &s.Cron, &s.Timezone, &everyMs,
		&request, &s.EndAt, &s.CreatedAt, &s.NextRunAt, &s.LastRunAt, &s.LastTurnID,
		&s.Runs, &s.SkippedRunning, &s.SkippedMissed, &s.SkippedRefused, &s.LastError}, extra...)...)
	if err != nil {
		return Schedule{}, interpretError(err)
	}
	s.Every = time.Duration(everyMs) * time.Millisecond
	if err := json.Unmarshal(request, &s.Request); err != nil {
		return Schedule{}, fmt.Errorf("read the turn of schedule %s: %w", s.ID, err)
	}
	return s, nil
}

// scheduleRequestJSON is the stored form of a schedule's turn: its
// messages and stream mode.
func scheduleRequestJSON(r aap.TurnRequest) ([]byte, error) {
	return json.Marshal(aap.TurnRequest{Messages: r.Messages, Stream: r.Stream})
}

// scheduleInsert is the statement that stores sc as it is (its creation
// time now when zero).
func scheduleInsert(sc Schedule) (batchStmt, error) {
	request, err := scheduleRequestJSON(sc.Request)
	if err != nil {
		return batchStmt{}, fmt.Errorf("encode the turn of schedule %s: %w", sc.ID, err)
	}
	var created *time.Time
	if !sc.CreatedAt.IsZero() {
		created = &sc.CreatedAt
	}
	return batchStmt{sql: `INSERT INTO schedules (tenant_id, session_id, id, cron, timezone, every_ms, request, end_at, next_run_at,
			created_at, last_run_at, last_turn_id, runs, skipped_running, skipped_missed, skipped_refused, last_error)
		VALUES ($1, $2, $3, nullif($4, ''), nullif($5, ''), nullif($6, 0), $7, $8, $9,
			coalesce($10, now()), $11, nullif($12, ''), $13, $14, $15, $16, nullif($17, ''))`,
		args: []any{sc.TenantID, sc.SessionID, sc.ID, sc.Cron, sc.Timezone, sc.Every.Milliseconds(), request, sc.EndAt, sc.NextRunAt,
			created, sc.LastRunAt, sc.LastTurnID, sc.Runs, sc.SkippedRunning, sc.SkippedMissed, sc.SkippedRefused, sc.LastError}}, nil
}

// ScheduleCreateParams describes a new schedule (its ID set by the
// caller, NewScheduleID). NextRunAt is its first tick.
type ScheduleCreateParams struct {
	Schedule Schedule
	// SessionOwner confines it to a session of this end user ("" for any):
	// another's session is ErrNotFound.
	SessionOwner string
}

// ScheduleCreate stores a new schedule of a session: ErrNotFound when the
// session is not the tenant's (or the owner's), ErrScheduleLimit when it
// has MaxSchedulesPerSession already. The session's row is locked while
// its schedules are counted, so two creations cannot both pass the limit.
func (s *Store) ScheduleCreate(ctx context.Context, p ScheduleCreateParams) (Schedule, error) {
	sc := p.Schedule
	var out Schedule
	err := s.inTx(ctx, sc.TenantID, func(tx pgx.Tx) error {
		var n int
		err := tx.QueryRow(ctx, `SELECT (SELECT count(*) FROM schedules WHERE tenant_id = $1 AND session_id = $2)
			FROM sessions WHERE tenant_id = $1 AND id = $2 AND ($3 = '' OR owner = $3) FOR UPDATE`,
			sc.TenantID, sc.SessionID, p.SessionOwner).Scan(&n)
		if err != nil {
			return interpretError(err)
		}
		if n >= MaxSchedulesPerSession {
			return ErrScheduleLimit
		}
		sc.CreatedAt = time.Time{}
		st, err := scheduleInsert(sc)
		if err != nil {
			return err
		}
		out, err = scanSchedule(tx.QueryRow(ctx, st.sql+` RETURNING `+scheduleColumns, st.args...))
		return err
	})
	if err != nil {
		return Schedule{}, fmt.Errorf("create a schedule of session %s: %w", sc.SessionID, err)
	}
	return out, nil
}

// ScheduleList returns a session's schedules, oldest first (at most
// MaxSchedulesPerSession): ErrNotFound when the session is not the
// tenant's (or the owner's).
func (s *Store) ScheduleList(ctx context.Context, tenantID, owner, sessionID string) ([]Schedule, error) {
	b := &pgx.Batch{}
	queueBegin(b, tenantID)
	b.Queue(`SELECT 1 FROM sessions WHERE tenant_id = $1 AND id = $2 AND ($3 = '' OR owner = $3)`, tenantID, sessionID, owner)
	b.Queue(`SELECT `+scheduleColumns+` FROM schedules WHERE tenant_id = $1 AND session_id = $2 ORDER BY id`, tenantID, sessionID)
	b.Queue("COMMIT")
	var out []Schedule
	err := s.inBatch(ctx, s.pool, b, func(br pgx.BatchResults) error {
		for range beginLen {
			if _, err := br.Exec(); err != nil {
				return err
			}
		}
		var one int
		if err := br.QueryRow().Scan(&one); err != nil {
			return err
		}
		rows, err := br.Query()
		if err != nil {
			return err
		}
		if out, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (Schedule, error) { return scanSchedule(r) }); err != nil {
			return err
		}
		_, err = br.Exec() // COMMIT
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list the schedules of session %s: %w", sessionID, interpretError(err))
	}
	return out, nil
}

// ScheduleGet returns a schedule of a session of the tenant (and of the
// owner, unless ""): ErrNotFound otherwise.
func (s *Store) ScheduleGet(ctx context.Context, ref ScheduleRef, owner string) (Schedule, error) {
	sc, err := scanSchedule(s.tenant(ref.TenantID).QueryRow(ctx, `SELECT `+scheduleColumns+` FROM schedules
		WHERE tenant_id = $1 AND session_id = $2 AND id = $3
		  AND EXISTS (SELECT 1 FROM sessions WHERE tenant_id = $1 AND id = $2 AND ($4 = '' OR owner = $4))`,
		ref.TenantID, ref.SessionID, ref.ScheduleID, owner))
	if err != nil {
		return Schedule{}, fmt.Errorf("load schedule %s: %w", ref.ScheduleID, err)
	}
	return sc, nil
}

// ScheduleDelete deletes a schedule: no tick of it starts a turn once this
// returns (a tick being claimed holds the row; the deletion waits for it).
// A turn it started already runs on. ErrNotFound when there is no such
// schedule of the tenant's (or the owner's) session.
func (s *Store) ScheduleDelete(ctx context.Context, ref ScheduleRef, owner string) error {
	tag, err := s.tenant(ref.TenantID).Exec(ctx, `DELETE FROM schedules
		WHERE tenant_id = $1 AND session_id = $2 AND id = $3
		  AND EXISTS (SELECT 1 FROM sessions WHERE tenant_id = $1 AND id = $2 AND ($4 = '' OR owner = $4))`,
		ref.TenantID, ref.SessionID, ref.ScheduleID, owner)
	if err == nil && tag.RowsAffected() == 0 {
		err = ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("delete schedule %s: %w", ref.ScheduleID, interpretError(err))
	}
	return nil
}

// errScheduleGone is a tick's schedule that is no longer due: another
// replica claimed the tick, or the schedule was deleted.
var errScheduleGone = errors.New("the schedule is not due")
