package admin

import (
	"context"
	"encoding/json"
	"log/slog"
	"math"

	"github.com/aapd/aapd/store"
)

// Retention is a tenant's retention policy (docs/lifecycle.md,
// "Retention"): how many days an idle session, and a full-history message
// a compaction has summarised, are kept. A null field is the server's
// default (--retention-idle-session-days, --retention-full-history-days),
// and with no default, forever. Effective says which applies and where it
// comes from.
type Retention struct {
	// IdleSessionDays is the tenant's own: a session with no turn and no
	// change for longer is deleted, with every row of it.
	IdleSessionDays *int `json:"idleSessionDays"`
	// FullHistoryDays is the tenant's own: full-history messages older
	// than this that a compaction has already summarised may be dropped;
	// the compacted history stays whole.
	FullHistoryDays *int `json:"fullHistoryDays"`
	// Effective is the policy in force: the tenant's value, else the
	// server's default (read-only).
	Effective EffectiveRetention `json:"effective"`
}

// EffectiveRetention is the retention in force for a tenant: null days
// keep forever. Each From says where its value comes from: "tenant", the
// server's "default", or "none" (kept forever).
type EffectiveRetention struct {
	IdleSessionDays     *int   `json:"idleSessionDays"`
	IdleSessionDaysFrom string `json:"idleSessionDaysFrom"`
	FullHistoryDays     *int   `json:"fullHistoryDays"`
	FullHistoryDaysFrom string `json:"fullHistoryDaysFrom"`
}

// RetentionRequest sets a tenant's retention policy: each field a whole
// number of days, or null (or absent) for the server's default.
type RetentionRequest struct {
	IdleSessionDays *float64 `json:"idleSessionDays"`
	FullHistoryDays *float64 `json:"fullHistoryDays"`
	// Effective is read-only, accepted (and ignored) so that what a GET
	// returned can be sent back edited.
	Effective json.RawMessage `json:"effective,omitempty"`
}

// MaxRetentionDays bounds a retention period: beyond a century a value is
// a typo, not a policy.
const MaxRetentionDays = 36500

// Where a retention value comes from (EffectiveRetention).
const (
	fromTenant  = "tenant"
	fromDefault = "default"
	fromNone    = "none"
)

// retentionDays checks one field of a request: 0 when null.
func retentionDays(field string, v *float64) (int, error) {
	if v == nil {
		return 0, nil
	}
	if *v != math.Trunc(*v) || *v < 1 || *v > MaxRetentionDays {
		return 0, invalid(field, "must be a whole number of days from 1 to %d, or null for the server's default; got %v", MaxRetentionDays, *v)
	}
	return int(*v), nil
}

// validate checks a request and returns the policy as stored (0 for the
// default).
func (r RetentionRequest) validate() (store.TenantRetention, error) {
	var out store.TenantRetention
	var err error
	if out.IdleSessionDays, err = retentionDays("idleSessionDays", r.IdleSessionDays); err != nil {
		return out, err
	}
	if out.FullHistoryDays, err = retentionDays("fullHistoryDays", r.FullHistoryDays); err != nil {
		return out, err
	}
	return out, nil
}

// retentionOf is a tenant's stored policy as the API shows it, with the
// server's defaults.
func retentionOf(r, def store.TenantRetention) Retention {
	days := func(own, dflt int) (mine *int, eff *int, from string) {
		switch {
		case own > 0:
			return &own, &own, fromTenant
		case dflt > 0:
			return nil, &dflt, fromDefault
		}
		return nil, nil, fromNone
	}
	var out Retention
	out.IdleSessionDays, out.Effective.IdleSessionDays, out.Effective.IdleSessionDaysFrom = days(r.IdleSessionDays, def.IdleSessionDays)
	out.FullHistoryDays, out.Effective.FullHistoryDays, out.Effective.FullHistoryDaysFrom = days(r.FullHistoryDays, def.FullHistoryDays)
	return out
}

// GetRetention returns a tenant's retention policy and the one in force.
func (s *Service) GetRetention(ctx context.Context, name string) (Retention, error) {
	t, err := s.tenant(ctx, name)
	if err != nil {
		return Retention{}, err
	}
	return retentionOf(t.Retention, s.retention), nil
}

// SetRetention replaces a tenant's retention policy (a null field restores
// the server's default) and returns it. The sweeper applies it at its next
// sweep.
func (s *Service) SetRetention(ctx context.Context, name string, r RetentionRequest) (Retention, error) {
	want, err := r.validate()
	if err != nil {
		return Retention{}, err
	}
	t, err := s.tenant(ctx, name)
	if err != nil {
		return Retention{}, err
	}
	t, err = s.st.TenantSetRetention(ctx, t.ID, want)
	if err != nil {
		return Retention{}, err
	}
	s.audit(ctx, "retention.set", t, t.ID,
		slog.Int("idle_session_days", t.Retention.IdleSessionDays), slog.Int("full_history_days", t.Retention.FullHistoryDays))
	return retentionOf(t.Retention, s.retention), nil
}
