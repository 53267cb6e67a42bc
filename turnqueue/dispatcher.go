// Package turnqueue runs the background turns that wait for a worker
// (docs/background.md): turns queued while every worker was busy, turns
// handed back by a shutdown, and turns whose process died. Each process
// runs one Dispatcher, whose one goroutine looks for them every second and
// whenever a worker of the process frees while some wait, and hands them to
// the runner (agents.Runner.Resume), which adopts them in the database: of
// processes looking at once, one gets each turn.
package turnqueue

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/aapd/aapd/agents"
	"github.com/aapd/aapd/store"
)

// Defaults of Config.
const (
	// DefaultPoll is how often a dispatcher looks for waiting turns when
	// nothing wakes it: how long a turn queued by another process, or
	// orphaned, may wait for a worker that is free here.
	DefaultPoll = time.Second
	// DefaultDeadConfirm is how long an orphaned turn's process must keep
	// looking dead before the turn is resumed. A live process whose
	// database connection broke for a moment looks dead until it
	// reconnects (within store.MaxReconnectBackoff and a round trip);
	// resuming its turn then would only cost an attempt, since the
	// replaced worker writes nothing more.
	DefaultDeadConfirm = 3 * time.Second
	// minGap spaces the looks a busy process makes as its workers free.
	minGap = 50 * time.Millisecond
)

// Config configures a Dispatcher.
type Config struct {
	Store  *store.Store
	Runner *agents.Runner
	// Poll and DeadConfirm: zero for their defaults.
	Poll        time.Duration
	DeadConfirm time.Duration
	Logger      *slog.Logger
}

// Dispatcher gives the background turns waiting for a worker to this
// process's runner.
type Dispatcher struct {
	cfg  Config
	log  *slog.Logger
	stop context.CancelFunc
	done chan struct{}

	// Owned by the dispatcher's goroutine:
	// suspects are the orphaned turns seen, and when each was first seen.
	suspects map[string]time.Time
	// backlog is true when the last look left turns waiting for a worker
	// here: a worker that frees is a reason to look again.
	backlog bool
}

// New returns a dispatcher; Start starts it.
func New(cfg Config) *Dispatcher {
	if cfg.Poll <= 0 {
		cfg.Poll = DefaultPoll
	}
	if cfg.DeadConfirm <= 0 {
		cfg.DeadConfirm = DefaultDeadConfirm
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Dispatcher{cfg: cfg, log: cfg.Logger, done: make(chan struct{}), suspects: map[string]time.Time{}}
}

// Start starts the dispatcher's goroutine; Stop stops it.
func (d *Dispatcher) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	d.stop = cancel
	go d.run(ctx)
}

// Stop stops looking for turns and waits for a look under way. Turns it
// handed to the runner are the runner's (agents.Runner.Shutdown).
func (d *Dispatcher) Stop() {
	d.stop()
	<-d.done
}

func (d *Dispatcher) run(ctx context.Context) {
	defer close(d.done)
	tick := time.NewTicker(d.cfg.Poll)
	defer tick.Stop()
	var last time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-d.cfg.Runner.Freed():
			if !d.backlog {
				continue
			}
			if wait := minGap - time.Since(last); wait > 0 {
				select {
				case <-ctx.Done():
					return
				case <-time.After(wait):
				}
			}
		}
		last = time.Now()
		d.look(ctx)
	}
}

// look hands waiting turns to the runner while it has free workers.
func (d *Dispatcher) look(ctx context.Context) {
	free := d.cfg.Runner.FreeWorkers()
	if free == 0 {
		// Nothing can start here; a worker that frees says so.
		d.backlog = true
		return
	}
	// More than the free workers: some are taken by other processes, or
	// their tenants are at their limits.
	limit := free + 16
	waiting, err := d.cfg.Store.TurnQueueWaiting(ctx, limit)
	if err != nil {
		if ctx.Err() == nil {
			d.log.Warn("look for background turns waiting for a worker", "err", err)
		}
		return
	}
	now := time.Now()
	seen := make(map[string]bool, len(waiting))
	left := 0
	for i, w := range waiting {
		id := w.Ref.TurnID
		seen[id] = true
		if w.Orphaned {
			first, ok := d.suspects[id]
			if !ok {
				d.suspects[id] = now
			}
			if !ok || now.Sub(first) < d.cfg.DeadConfirm {
				left++
				continue
			}
		}
		_, err := d.cfg.Runner.Resume(ctx, w.Ref)
		switch {
		case err == nil, errors.Is(err, store.ErrNotAdoptable):
			delete(d.suspects, id)
		case errors.Is(err, agents.ErrShutdown), ctx.Err() != nil:
			return
		case errors.Is(err, agents.ErrOverloaded):
			// No worker is free here any more.
			d.backlog = true
			d.forget(seen, waiting[i:])
			return
		case errors.Is(err, agents.ErrTooManyTurns), errors.Is(err, agents.ErrOverFairShare):
			// This tenant waits; the next may not.
			left++
		default:
			left++
			d.log.Warn("resume a background turn", "tenant", w.Ref.TenantID, "session", w.Ref.SessionID, "turn", id, "err", err)
		}
		if d.cfg.Runner.FreeWorkers() == 0 {
			d.backlog = true
			d.forget(seen, waiting[i+1:])
			return
		}
	}
	d.backlog = left > 0 || len(waiting) == limit
	d.forget(seen, nil)
}

// forget drops the suspects no longer waiting: those the last look did not
// list, unless they are among rest, the turns it did not get to.
func (d *Dispatcher) forget(seen map[string]bool, rest []store.WaitingTurn) {
	for _, w := range rest {
		seen[w.Ref.TurnID] = true
	}
	for id := range d.suspects {
		if !seen[id] {
			delete(d.suspects, id)
		}
	}
}
