// Package scheduler runs the sessions' schedules (docs/background.md#schedules):
// each process runs one Scheduler, whose one goroutine looks every second
// for schedules due, in every tenant, and fires each due tick: in one
// transaction the tick's schedule is claimed (FOR UPDATE SKIP LOCKED, so
// that of the processes looking at once one fires it), its session is
// claimed for the tick's turn — a background turn, queued as
// Prefer: respond-async queues one when every worker is busy — and the
// schedule's next tick is written (store.ScheduleFire). The turn then runs
// through the one turn pipeline (agents.Runner.StartQueued): here if a
// worker is free, else on the first free worker of any process.
package scheduler

import (
	"context"
	"crypto/sha256"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/aapd/aapd/agents"
	"github.com/aapd/aapd/scheduler/spec"
	"github.com/aapd/aapd/store"
)

// Defaults of Config.
const (
	// DefaultPoll is how often a scheduler looks for due schedules: how
	// late a tick may start.
	DefaultPoll = time.Second
	// lookLimit bounds the schedules fired in one look; a look that fired
	// as many looks again at once.
	lookLimit = 100
)

// Config configures a Scheduler.
type Config struct {
	Store  *store.Store
	Runner *agents.Runner
	// Poll is how often it looks for due schedules (DefaultPoll if zero).
	Poll   time.Duration
	Logger *slog.Logger
	// Registry, if set, gets the scheduler's metrics.
	Registry prometheus.Registerer
}

// Scheduler fires the due ticks of every tenant's schedules.
type Scheduler struct {
	cfg     Config
	log     *slog.Logger
	metrics *metrics
	stop    context.CancelFunc
	done    chan struct{}
	once    sync.Once
}

// New returns a scheduler, its metrics registered (at zero); Start starts
// it.
func New(cfg Config) *Scheduler {
	if cfg.Poll <= 0 {
		cfg.Poll = DefaultPoll
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Scheduler{cfg: cfg, log: cfg.Logger, metrics: newMetrics(cfg.Registry), done: make(chan struct{})}
}

// Start starts the scheduler's goroutine; Stop stops it.
func (s *Scheduler) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	s.stop = cancel
	go s.run(ctx)
}

// Stop stops looking for due schedules and waits for a look under way. A
// tick being fired commits or rolls back: it is never half fired. Stop may
// be called more than once, and on a scheduler never started.
func (s *Scheduler) Stop() {
	s.once.Do(func() {
		if s.stop == nil {
			close(s.done)
			return
		}
		s.stop()
	})
	<-s.done
}

func (s *Scheduler) run(ctx context.Context) {
	defer close(s.done)
	tick := time.NewTicker(s.cfg.Poll)
	defer tick.Stop()
	for {
		// A look right away: ticks missed while no process ran are
		// decided at start-up.
		for s.look(ctx) == lookLimit && ctx.Err() == nil {
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// look fires the schedules due now, and returns how many it fired (those
// other processes fired are not counted: a full page fired here is a
// reason to look again at once).
func (s *Scheduler) look(ctx context.Context) int {
	due, err := s.cfg.Store.SchedulesDue(ctx, lookLimit)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("look for due schedules", "err", err)
		}
		return 0
	}
	fired := 0
	for _, ref := range due {
		if ctx.Err() != nil {
			return 0
		}
		if s.fire(ctx, ref) {
			fired++
		}
	}
	return fired
}

// fire fires one due schedule, if no other process did, and starts its
// tick's turn. It reports whether it fired it.
func (s *Scheduler) fire(ctx context.Context, ref store.ScheduleRef) bool {
	log := s.log.With("tenant", ref.TenantID, "session", ref.SessionID, "schedule", ref.ScheduleID)
	var turnRef store.TurnRef
	fired, err := s.cfg.Store.ScheduleFire(ctx, store.ScheduleFireParams{Ref: ref,
		Plan: func(sc store.Schedule, now time.Time) store.ScheduleTick {
			tick, tr := s.plan(ctx, sc, now)
			turnRef = tr
			return tick
		}})
	switch {
	case err != nil:
		if ctx.Err() == nil {
			log.Warn("fire a schedule's tick", "err", err)
		}
		return false
	case fired == nil:
		return false // fired by another process, deleted, or not due any more
	}
	if fired.Tick.Missed > 0 {
		s.metrics.skipped(skipMissed, fired.Tick.Missed)
		log.Info("schedule ticks missed while no process ran, skipped", "missed", fired.Tick.Missed)
	}
	switch fired.Skipped {
	case store.ScheduleSkipRunning:
		s.metrics.skipped(skipRunning, 1)
		log.Info("schedule tick skipped: its session still runs a turn")
	case store.ScheduleSkipRefused:
		s.metrics.skipped(skipRefused, 1)
		log.Warn("schedule tick skipped: its turn was refused", "err", fired.Refusal)
	}
	if fired.Tick.Next == nil {
		log.Info("schedule ended")
	}
	if fired.Turn == nil {
		return true
	}
	s.metrics.ran()
	log.Debug("schedule tick started a turn", "turn", turnRef.TurnID, "tick", fired.Tick.At)
	s.cfg.Runner.StartQueued(ctx, turnRef)
	return true
}

// plan decides what sc's due tick does at now: which tick runs, as the
// claim of a queued background turn, and which are missed.
func (s *Scheduler) plan(ctx context.Context, sc store.Schedule, now time.Time) (store.ScheduleTick, store.TurnRef) {
	var tick store.ScheduleTick
	sp, err := spec.Parse(sc.Cron, sc.Timezone, sc.Every)
	if err != nil {
		// Stored, so checked once: a server that cannot read it (a time
		// zone its tz database lacks) ends nothing, and counts the tick.
		next := now.Add(time.Minute)
		tick.Next, tick.Refusal = &next, err
		return tick, store.TurnRef{}
	}
	due := now
	if sc.NextRunAt != nil {
		due = *sc.NextRunAt
	}
	t := sp.Due(due, now, sc.EndAt)
	tick.Missed, tick.At = t.Missed, t.At
	if !t.Next.IsZero() {
		next := t.Next
		tick.Next = &next
	}
	if !t.Run {
		return tick, store.TurnRef{}
	}
	ref := store.TurnRef{TenantID: sc.TenantID, SessionID: sc.SessionID, TurnID: store.NewTurnID()}
	key := TurnKey(sc.ID, t.At)
	hash := sha256.Sum256([]byte(key))
	tick.Turn = s.cfg.Runner.QueuedClaim(ctx, ref, agents.StartParams{
		TenantID: sc.TenantID, SessionID: sc.SessionID, Request: sc.Request,
		IdempotencyKey: key, RequestHash: hash[:],
	})
	return tick, ref
}

// TurnKey is the idempotency key of the turn a schedule's tick starts: the
// schedule and the tick, so that no tick can start two turns.
func TurnKey(scheduleID string, tick time.Time) string {
	return scheduleID + "@" + tick.UTC().Format(time.RFC3339Nano)
}
