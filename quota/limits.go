// Package quota holds the limits a tenant's requests and turns are held to
// (docs/tenancy.md): the tenant's own, else the server's defaults, shared
// among the live replicas; and the token buckets that hold requests to
// their rate.
//
// Limits hold per replica, each replica enforcing its share of the tenant's
// limit (the limit divided by the number of live replicas): a limit held
// across replicas exactly would cost a database write per request, which is
// what the limits are there to protect.
package quota

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/aapd/aapd/store"
)

// Source is what Limits reads the tenants' limits and the replicas from;
// *store.Store is one.
type Source interface {
	TenantGet(ctx context.Context, id string) (store.Tenant, error)
	InstanceCountLive(ctx context.Context) (int, error)
}

const (
	// limitsTTL is how long a tenant's limits are used without reading
	// them again. A change reaches every replica at once
	// (store.LimitsChangedChannel); the TTL bounds how long a missed
	// notification keeps old limits in force.
	limitsTTL = 30 * time.Second
	// failedTTL is how long a tenant whose limits could not be read is held
	// to the last limits known (or the defaults) before trying again.
	failedTTL = time.Second
	// limitsCacheMax bounds the tenants remembered; beyond it the cache
	// starts over.
	limitsCacheMax = 10000
	// replicasTTL is how often the live replicas are counted again: a
	// replica that starts or stops changes every replica's share within it.
	replicasTTL = 10 * time.Second
	// readTimeout bounds a read of limits or replicas on a request's path.
	readTimeout = 2 * time.Second
)

// Effective are the limits in force for a tenant on this replica. A zero
// field is no limit.
type Effective struct {
	// RequestsPerSecond and Burst are this replica's share of the tenant's
	// request rate and burst.
	RequestsPerSecond float64
	Burst             int
	// MaxRunningTurns is this replica's share of the turns the tenant may
	// run at once.
	MaxRunningTurns int
}

// MaxQueuedTurns is how many background turns the tenant may have waiting
// for a worker (0: no limit): the tenant's own limit, else the default.
// Unlike the others it is not shared among the replicas: the queue is in
// the database, which counts it whole (store.TurnBeginParams.MaxQueued).
func (l *Limits) MaxQueuedTurns(ctx context.Context, tenantID string) int {
	return pick(l.tenant(ctx, tenantID).MaxQueuedTurns, l.defaults.MaxQueuedTurns)
}

// Config configures Limits.
type Config struct {
	Source Source
	// Defaults apply to a tenant whose own limit is zero; a zero default is
	// no limit.
	Defaults store.TenantLimits
	Now      func() time.Time
	Logger   *slog.Logger
}

// Limits tells the limits in force for a tenant, from a per-process cache
// of the tenants' records.
type Limits struct {
	src      Source
	defaults store.TenantLimits
	now      func() time.Time
	log      *slog.Logger

	mu      sync.Mutex
	tenants map[string]cachedLimits
	// forgets counts forget calls: limits read before a tenant was
	// forgotten are not kept, even if their read ends after.
	forgets     uint64
	replicas    int
	countedAt   time.Time
	counting    bool
	everCounted bool
}

type cachedLimits struct {
	limits  store.TenantLimits
	expires time.Time
}

// New returns Limits over cfg.Source.
func New(cfg Config) *Limits {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Limits{src: cfg.Source, defaults: cfg.Defaults, now: cfg.Now, log: cfg.Logger,
		tenants: map[string]cachedLimits{}, replicas: 1}
}

// For returns the limits in force for the tenant on this replica. It never
// fails: limits that cannot be read are the last ones known, else the
// server's defaults, so that a database hiccup does not refuse requests
// the rest of the server could serve.
func (l *Limits) For(ctx context.Context, tenantID string) Effective {
	own := l.tenant(ctx, tenantID)
	rps := pick(own.RequestsPerSecond, l.defaults.RequestsPerSecond)
	burst := pick(own.Burst, l.defaults.Burst)
	maxRunning := pick(own.MaxRunningTurns, l.defaults.MaxRunningTurns)
	if rps == 0 && maxRunning == 0 {
		return Effective{}
	}
	n := l.liveReplicas(ctx)
	var e Effective
	if rps > 0 {
		if burst == 0 {
			burst = int(math.Ceil(rps))
		}
		e.RequestsPerSecond = rps / float64(n)
		e.Burst = ceilDiv(burst, n)
	}
	if maxRunning > 0 {
		e.MaxRunningTurns = ceilDiv(maxRunning, n)
	}
	return e
}

// MaxRunningTurns is For's MaxRunningTurns, for agents.RunnerConfig.
func (l *Limits) MaxRunningTurns(ctx context.Context, tenantID string) int {
	return l.For(ctx, tenantID).MaxRunningTurns
}

// Notify takes a notification from another process (see
// store.InstanceParams): a tenant whose limits changed is read again on
// its next request.
func (l *Limits) Notify(n store.Notification) {
	if n.Channel == store.LimitsChangedChannel {
		l.forget(n.Payload)
	}
}

func (l *Limits) forget(tenantID string) {
	l.mu.Lock()
	delete(l.tenants, tenantID)
	l.forgets++
	l.mu.Unlock()
}

// tenant returns the tenant's own limits, from the cache or the database.
func (l *Limits) tenant(ctx context.Context, tenantID string) store.TenantLimits {
	now := l.now()
	l.mu.Lock()
	e, ok := l.tenants[tenantID]
	forgets := l.forgets
	l.mu.Unlock()
	if ok && now.Before(e.expires) {
		return e.limits
	}
	readCtx, cancel := context.WithTimeout(ctx, readTimeout)
	t, err := l.src.TenantGet(readCtx, tenantID)
	cancel()
	ttl := limitsTTL
	switch {
	case errors.Is(err, store.ErrNotFound):
		// Deleted since it authenticated: its keys stop working shortly.
		t.Limits = store.TenantLimits{}
	case err != nil:
		if ctx.Err() != nil {
			return e.limits
		}
		l.log.Warn("read tenant limits; using the last known or the defaults", "tenant", tenantID, "err", err)
		t.Limits, ttl = e.limits, failedTTL
	}
	l.mu.Lock()
	if l.forgets == forgets {
		if len(l.tenants) >= limitsCacheMax {
			clear(l.tenants)
		}
		l.tenants[tenantID] = cachedLimits{limits: t.Limits, expires: now.Add(ttl)}
	}
	l.mu.Unlock()
	return t.Limits
}

// liveReplicas returns the number of live replicas, counted at most every
// replicasTTL by the request that finds the count stale; the others go on
// with the last count meanwhile.
func (l *Limits) liveReplicas(ctx context.Context) int {
	now := l.now()
	l.mu.Lock()
	n := l.replicas
	if l.counting || (l.everCounted && now.Sub(l.countedAt) < replicasTTL) {
		l.mu.Unlock()
		return n
	}
	l.counting = true
	l.mu.Unlock()

	readCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), readTimeout)
	count, err := l.src.InstanceCountLive(readCtx)
	cancel()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.counting, l.everCounted, l.countedAt = false, true, now
	if err != nil {
		l.log.Warn("count live replicas; keeping the last count", "replicas", l.replicas, "err", err)
		return l.replicas
	}
	// This process counts even while its own instance reconnects.
	l.replicas = max(count, 1)
	return l.replicas
}

// pick is own unless it is zero, else def.
func pick[T int | float64](own, def T) T {
	if own != 0 {
		return own
	}
	return def
}

// ceilDiv is a/b rounded up: a replica's share of a whole limit, at least 1.
func ceilDiv(a, b int) int { return max((a+b-1)/b, 1) }
