package admin

import (
	"context"
	"log/slog"

	"github.com/aapd/aapd/store"
)

// Limits are a tenant's quotas. A null (or 0) field is the server's
// default, set by the flags of aapd serve; the response always says null
// for it, so a tenant's own limits are told apart from the defaults.
type Limits struct {
	// RequestsPerSecond is the sustained request rate.
	RequestsPerSecond *float64 `json:"requestsPerSecond"`
	// Burst is how many requests may come at once above the rate.
	Burst *int `json:"burst"`
	// MaxRunningTurns bounds the tenant's turns running at once.
	MaxRunningTurns *int `json:"maxRunningTurns"`
	// MaxQueuedTurns bounds the tenant's background turns waiting for a
	// worker (docs/background.md); past it a background turn is a 429.
	MaxQueuedTurns *int `json:"maxQueuedTurns"`
}

// Upper bounds of limits: beyond them a value is a typo, not a quota.
const (
	maxRequestsPerSecond = 1_000_000
	maxBurst             = 1_000_000
	maxRunningTurns      = 100_000
	maxQueuedTurns       = 10_000_000
)

func limitsOf(l store.TenantLimits) Limits {
	var out Limits
	if l.RequestsPerSecond > 0 {
		out.RequestsPerSecond = &l.RequestsPerSecond
	}
	if l.Burst > 0 {
		out.Burst = &l.Burst
	}
	if l.MaxRunningTurns > 0 {
		out.MaxRunningTurns = &l.MaxRunningTurns
	}
	if l.MaxQueuedTurns > 0 {
		out.MaxQueuedTurns = &l.MaxQueuedTurns
	}
	return out
}

// validate checks limits and returns them as stored (0 for the default).
func (l Limits) validate() (store.TenantLimits, error) {
	var out store.TenantLimits
	if l.RequestsPerSecond != nil {
		out.RequestsPerSecond = *l.RequestsPerSecond
	}
	if l.Burst != nil {
		out.Burst = *l.Burst
	}
	if l.MaxRunningTurns != nil {
		out.MaxRunningTurns = *l.MaxRunningTurns
	}
	if l.MaxQueuedTurns != nil {
		out.MaxQueuedTurns = *l.MaxQueuedTurns
	}
	switch {
	case out.RequestsPerSecond < 0 || out.RequestsPerSecond > maxRequestsPerSecond:
		return out, invalid("requestsPerSecond", "must be from 0 to %d (0 or null: the server's default)", maxRequestsPerSecond)
	case out.Burst < 0 || out.Burst > maxBurst:
		return out, invalid("burst", "must be a whole number from 0 to %d (0 or null: the server's default)", maxBurst)
	case out.RequestsPerSecond > 0 && out.Burst < 1:
		return out, invalid("burst", "must be at least 1 when requestsPerSecond is set: it is how many requests may come at once")
	case out.MaxRunningTurns < 0 || out.MaxRunningTurns > maxRunningTurns:
		return out, invalid("maxRunningTurns", "must be a whole number from 0 to %d (0 or null: the server's default)", maxRunningTurns)
	case out.MaxQueuedTurns < 0 || out.MaxQueuedTurns > maxQueuedTurns:
		return out, invalid("maxQueuedTurns", "must be a whole number from 0 to %d (0 or null: the server's default)", maxQueuedTurns)
	}
	return out, nil
}

// SetLimits replaces a tenant's limits (a null or 0 field restores the
// server's default) and returns them. Every process applies them at once.
func (s *Service) SetLimits(ctx context.Context, name string, l Limits) (Limits, error) {
	want, err := l.validate()
	if err != nil {
		return Limits{}, err
	}
	t, err := s.tenant(ctx, name)
	if err != nil {
		return Limits{}, err
	}
	t, err = s.st.TenantSetLimits(ctx, t.ID, want)
	if err != nil {
		return Limits{}, err
	}
	s.audit(ctx, "limits.set", t, t.ID,
		slog.Float64("requests_per_second", t.Limits.RequestsPerSecond),
		slog.Int("burst", t.Limits.Burst), slog.Int("max_running_turns", t.Limits.MaxRunningTurns),
		slog.Int("max_queued_turns", t.Limits.MaxQueuedTurns))
	return limitsOf(t.Limits), nil
}
