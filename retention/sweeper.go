// Package retention is the retention sweeper (docs/lifecycle.md,
// "Retention"): it applies each tenant's retention policy, deleting the
// sessions idle longer than the policy keeps them and trimming the full
// histories of the others to what the policy keeps and a compaction has
// summarised. One owner goroutine
// sweeps every interval; of all the replicas, only the one holding the
// store's retention lock sweeps at a time.
package retention

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/aapd/aapd/store"
)

// Store is what the sweeper needs of the database.
type Store interface {
	RetentionLead(ctx context.Context, fn func(ctx context.Context) error) error
	TenantList(ctx context.Context) ([]store.Tenant, error)
	SessionsIdle(ctx context.Context, tenantID string, before time.Time, limit int) ([]string, error)
	SessionDeleteIdle(ctx context.Context, tenantID, id string, before time.Time) (store.SessionDeletedIdle, error)
	SessionsToTrim(ctx context.Context, tenantID, after string, limit int) ([]string, error)
	SessionTrimHistory(ctx context.Context, tenantID, id string, before time.Time, batch int) (store.HistoryTrimmed, error)
}

// Defaults of a Config.
const (
	DefaultInterval  = time.Hour
	DefaultBatchSize = 50
	// DefaultTrimBatch is how many full-history messages one transaction
	// of a trim drops at most.
	DefaultTrimBatch = 1000
)

// Config configures a Sweeper.
type Config struct {
	Store  Store
	Logger *slog.Logger
	// Registry receives the metrics (nil: registered nowhere).
	Registry prometheus.Registerer
	// Defaults is the server's retention policy, for tenants without
	// their own (--retention-idle-session-days, ...); zero: keep forever.
	Defaults store.TenantRetention
	// Interval is the time between two sweeps (--retention-interval).
	Interval time.Duration
	// BatchSize is how many sessions a batch deletes, each in its own
	// transaction.
	BatchSize int
	// TrimBatch is how many full-history messages one trim transaction
	// drops at most.
	TrimBatch int
	// Pause is the rest after each batch, as a fraction of the batch's
	// own time (0: DefaultPause), so that a sweep of a large backlog
	// leaves the database to the turns most of the time.
	Pause float64
	// Now is the clock the policy's periods are measured on (nil:
	// time.Now).
	Now func() time.Time
}

// DefaultPause: after each batch, the sweeper rests as long as the batch
// took.
const DefaultPause = 1.0

// Result is what a sweep deleted.
type Result struct {
	Tenants  int   // tenants whose policy deleted something
	Sessions int64 // idle sessions deleted
	Messages int64 // full-history messages deleted with them
	// Trimmed are the sessions whose full history a trim shortened, and
	// TrimmedMessages the messages it dropped.
	Trimmed         int64
	TrimmedMessages int64
}

// Sweeper applies the tenants' retention policies.
type Sweeper struct {
	cfg     Config
	log     *slog.Logger
	metrics *metrics

	quit    chan struct{} // closed: stop sweeping
	done    chan struct{} // the owner goroutine returned
	started bool
	stop    sync.Once
	ctx     context.Context
	end     context.CancelFunc // ends the sweep in progress
}

// New returns a sweeper; Start runs it every interval, Sweep once.
func New(cfg Config) *Sweeper {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = DefaultBatchSize
	}
	if cfg.TrimBatch <= 0 {
		cfg.TrimBatch = DefaultTrimBatch
	}
	if cfg.Pause <= 0 {
		cfg.Pause = DefaultPause
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	s := &Sweeper{cfg: cfg, log: cfg.Logger, metrics: newMetrics(cfg.Registry),
		quit: make(chan struct{}), done: make(chan struct{})}
	s.ctx, s.end = context.WithCancel(context.Background())
	return s
}

// Start starts the owner goroutine: a sweep at once, then one every
// interval. Stop it with Stop.
func (s *Sweeper) Start() {
	s.started = true
	go s.run()
}

// Stop stops the sweeper: a sweep in progress ends at once (each
// deletion is one transaction, whole or not at all). It waits for the
// owner goroutine if Start started it. Call Start and Stop from one
// goroutine.
func (s *Sweeper) Stop() {
	s.stop.Do(func() {
		close(s.quit)
		s.end()
		if s.started {
			<-s.done
		}
	})
}

func (s *Sweeper) run() {
	defer close(s.done)
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-s.quit:
			return
		case <-t.C:
		}
		if _, err := s.Sweep(s.ctx); err != nil && !errors.Is(err, store.ErrRetentionBusy) && s.ctx.Err() == nil {
			s.log.Error("retention sweep", "err", err)
		}
		t.Reset(s.cfg.Interval)
	}
}

// Sweep runs one sweep over every tenant, if no other process is
// sweeping (store.ErrRetentionBusy otherwise).
func (s *Sweeper) Sweep(ctx context.Context) (Result, error) {
	var res Result
	start := time.Now()
	err := s.cfg.Store.RetentionLead(ctx, func(ctx context.Context) error {
		tenants, err := s.cfg.Store.TenantList(ctx)
		if err != nil {
			return err
		}
		var failed error
		for _, t := range tenants {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			p := t.Retention.Or(s.cfg.Defaults)
			var n int64
			var err error
			if p.IdleSessionDays != 0 {
				n, err = s.sweepIdle(ctx, t, p.IdleSessionDays, &res)
			}
			if p.FullHistoryDays != 0 && err == nil && ctx.Err() == nil {
				var m int64
				m, err = s.sweepTrim(ctx, t, p.FullHistoryDays, &res)
				n += m
			}
			if n > 0 {
				res.Tenants++
			}
			if err != nil && ctx.Err() == nil {
				// One tenant's failure does not hold up the others'
				// sweeps; the sweep reports it.
				s.log.Error("retention: sweep tenant", "tenant", t.Name, "tenant_id", t.ID, "err", err)
				failed = errors.Join(failed, fmt.Errorf("tenant %s: %w", t.Name, err))
			}
		}
		if failed != nil {
			return failed
		}
		return ctx.Err()
	})
	switch {
	case errors.Is(err, store.ErrRetentionBusy):
		s.metrics.sweeps.WithLabelValues(resultBusy).Inc()
		s.log.Debug("retention: another process is sweeping")
		return res, err
	case err != nil:
		s.metrics.sweeps.WithLabelValues(resultFailed).Inc()
		return res, fmt.Errorf("retention sweep: %w", err)
	}
	s.metrics.sweeps.WithLabelValues(resultDone).Inc()
	s.metrics.lastSweep.SetToCurrentTime()
	s.log.Info("retention sweep", "tenants", res.Tenants, "sessions_deleted", res.Sessions, "messages_deleted", res.Messages,
		"sessions_trimmed", res.Trimmed, "messages_trimmed", res.TrimmedMessages, "duration_ms", time.Since(start).Milliseconds())
	return res, nil
}

// sweepIdle deletes a tenant's sessions idle for longer than days, a batch
// at a time, oldest first, and returns how many it deleted.
func (s *Sweeper) sweepIdle(ctx context.Context, t store.Tenant, days int, res *Result) (int64, error) {
	var total int64
	before := s.cfg.Now().Add(-time.Duration(days) * 24 * time.Hour)
	for {
		start := time.Now()
		ids, err := s.cfg.Store.SessionsIdle(ctx, t.ID, before, s.cfg.BatchSize)
		if err != nil {
			return total, err
		}
		var sessions, messages int64
		for _, id := range ids {
			if ctx.Err() != nil {
				break
			}
			d, err := s.cfg.Store.SessionDeleteIdle(ctx, t.ID, id, before)
			if err != nil {
				s.logBatch(t, sessions, messages, start)
				return total, err
			}
			if d.Deleted {
				sessions++
				messages += d.Messages
				s.metrics.sessions.Inc()
				s.metrics.messages.WithLabelValues(kindIdleSession).Add(float64(d.Messages))
			}
		}
		total += sessions
		res.Sessions += sessions
		res.Messages += messages
		if len(ids) > 0 {
			s.logBatch(t, sessions, messages, start)
		}
		if len(ids) < s.cfg.BatchSize || ctx.Err() != nil {
			return total, ctx.Err()
		}
		// A session a batch found but did not delete (it was used
		// meanwhile) is not found again: it is no longer idle.
		if err := s.rest(ctx, time.Since(start)); err != nil {
			return total, err
		}
	}
}

// sweepTrim trims the full histories of a tenant's sessions to the
// messages of the last days (and those no compaction summarised), a
// session at a time, each in transactions of at most TrimBatch messages,
// and returns how many messages it dropped. A session whose turn runs is
// skipped: the next sweep trims it.
func (s *Sweeper) sweepTrim(ctx context.Context, t store.Tenant, days int, res *Result) (int64, error) {
	var total int64
	before := s.cfg.Now().Add(-time.Duration(days) * 24 * time.Hour)
	after := ""
	for {
		ids, err := s.cfg.Store.SessionsToTrim(ctx, t.ID, after, s.cfg.BatchSize)
		if err != nil {
			return total, err
		}
		for _, id := range ids {
			after = id
			trimmed := false
			for {
				start := time.Now()
				tr, err := s.cfg.Store.SessionTrimHistory(ctx, t.ID, id, before, s.cfg.TrimBatch)
				if err != nil {
					return total, err
				}
				if tr.Messages > 0 {
					trimmed = true
					total += tr.Messages
					res.TrimmedMessages += tr.Messages
					s.metrics.messages.WithLabelValues(kindFullHistory).Add(float64(tr.Messages))
					s.log.Info("retention trim", "tenant", t.Name, "tenant_id", t.ID, "session", id,
						"trimmed_through", tr.Through, "messages_deleted", tr.Messages, "duration_ms", time.Since(start).Milliseconds())
				}
				if !tr.More || ctx.Err() != nil {
					break
				}
				if err := s.rest(ctx, time.Since(start)); err != nil {
					return total, err
				}
			}
			if trimmed {
				res.Trimmed++
			}
			if ctx.Err() != nil {
				return total, ctx.Err()
			}
		}
		if len(ids) < s.cfg.BatchSize {
			return total, nil
		}
	}
}

// logBatch logs one batch of deletions.
func (s *Sweeper) logBatch(t store.Tenant, sessions, messages int64, start time.Time) {
	s.log.Info("retention batch", "tenant", t.Name, "tenant_id", t.ID, "sessions_deleted", sessions,
		"messages_deleted", messages, "duration_ms", time.Since(start).Milliseconds())
}

// rest waits Pause times took, or until ctx ends.
func (s *Sweeper) rest(ctx context.Context, took time.Duration) error {
	t := time.NewTimer(time.Duration(float64(took) * s.cfg.Pause))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
