package store

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
)

// Tenant is a team: the unit of isolation.
type Tenant struct {
	ID        string
	Name      string
	CreatedAt time.Time
	// Limits are the tenant's own; a zero field is the server's default.
	Limits TenantLimits
	// Retention is the tenant's own retention policy; a zero field is the
	// server's default (retention.go).
	Retention TenantRetention
}

// TenantLimits are a tenant's quotas. A zero field means "the server's
// default" (flags of aapd serve), not "no limit".
type TenantLimits struct {
	RequestsPerSecond float64
	Burst             int
	MaxRunningTurns   int
	// MaxQueuedTurns bounds the tenant's background turns waiting for a
	// worker, across every process (docs/background.md).
	MaxQueuedTurns int
}

// LimitsChangedChannel is the notification channel on which the id of a
// tenant whose limits changed is published, so that every process applies
// them at once.
const LimitsChangedChannel = "aapd_limits_changed"

const tenantColumns = `id::text, name, created_at, coalesce(requests_per_second, 0), coalesce(burst, 0), coalesce(max_running_turns, 0),
	coalesce(max_queued_turns, 0), coalesce(retention_idle_session_days, 0), coalesce(retention_full_history_days, 0)`

func scanTenant(row interface{ Scan(...any) error }) (Tenant, error) {
	var t Tenant
	err := row.Scan(&t.ID, &t.Name, &t.CreatedAt, &t.Limits.RequestsPerSecond, &t.Limits.Burst, &t.Limits.MaxRunningTurns, &t.Limits.MaxQueuedTurns,
		&t.Retention.IdleSessionDays, &t.Retention.FullHistoryDays)
	return t, interpretError(err)
}

// TenantCreate creates a tenant; ErrConflict if the name is taken.
func (s *Store) TenantCreate(ctx context.Context, name string) (Tenant, error) {
	t := Tenant{Name: name}
	err := s.pool.QueryRow(ctx,
		`INSERT INTO tenants (name) VALUES ($1) RETURNING id::text, created_at`, name,
	).Scan(&t.ID, &t.CreatedAt)
	if err != nil {
		err = interpretError(err)
		if errors.Is(err, ErrConflict) {
			return Tenant{}, fmt.Errorf("tenant %q: %w", name, ErrConflict)
		}
		return Tenant{}, fmt.Errorf("create tenant %q: %w", name, err)
	}
	return t, nil
}

// TenantGetByName finds a tenant by its unique name (administration only).
func (s *Store) TenantGetByName(ctx context.Context, name string) (Tenant, error) {
	t, err := scanTenant(s.pool.QueryRow(ctx, `SELECT `+tenantColumns+` FROM tenants WHERE name = $1`, name))
	if err != nil {
		return Tenant{}, fmt.Errorf("tenant %q: %w", name, err)
	}
	return t, nil
}

// TenantGet finds a tenant by id.
func (s *Store) TenantGet(ctx context.Context, id string) (Tenant, error) {
	t, err := scanTenant(s.pool.QueryRow(ctx, `SELECT `+tenantColumns+` FROM tenants WHERE id = $1`, id))
	if err != nil {
		return Tenant{}, fmt.Errorf("tenant %s: %w", id, err)
	}
	return t, nil
}

// TenantList lists every tenant by name (administration only).
func (s *Store) TenantList(ctx context.Context) ([]Tenant, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+tenantColumns+` FROM tenants ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("list tenants: %w", interpretError(err))
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Tenant, error) { return scanTenant(row) })
	if err != nil {
		return nil, fmt.Errorf("list tenants: %w", err)
	}
	return out, nil
}

// TenantPage is a page of tenants by name.
type TenantPage struct {
	Tenants []Tenant
	// Next is the cursor of the next page; empty on the last page.
	Next string
}

// TenantListPage pages through tenants by name: after is the cursor of the
// previous page ("" for the first).
func (s *Store) TenantListPage(ctx context.Context, after string, limit int) (TenantPage, error) {
	var name string
	if after != "" {
		b, err := base64.RawURLEncoding.DecodeString(after)
		// A name holds valid UTF-8 and no NUL: PostgreSQL refuses
		// either as a text parameter (a 500, where a bad cursor is a 400).
		if err != nil || len(b) == 0 || !utf8.Valid(b) || bytes.IndexByte(b, 0) >= 0 {
			return TenantPage{}, ErrBadCursor
		}
		name = string(b)
	}
	rows, err := s.pool.Query(ctx,
		`SELECT `+tenantColumns+` FROM tenants WHERE name > $1 ORDER BY name LIMIT $2`, name, limit+1)
	if err != nil {
		return TenantPage{}, fmt.Errorf("list tenants: %w", interpretError(err))
	}
	list, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Tenant, error) { return scanTenant(row) })
	if err != nil {
		return TenantPage{}, fmt.Errorf("list tenants: %w", err)
	}
	page := TenantPage{Tenants: list}
	if len(list) > limit {
		page.Tenants = list[:limit]
		page.Next = base64.RawURLEncoding.EncodeToString([]byte(list[limit-1].Name))
	}
	return page, nil
}

// TenantSetLimits replaces a tenant's limits (a zero field restores the
// server's default) and tells every process listening on
// LimitsChangedChannel.
func (s *Store) TenantSetLimits(ctx context.Context, id string, l TenantLimits) (Tenant, error) {
	var t Tenant
	err := s.inTx(ctx, id, func(tx pgx.Tx) error {
		var err error
		t, err = scanTenant(tx.QueryRow(ctx, `
			UPDATE tenants SET requests_per_second = nullif($2, 0::float8), burst = nullif($3, 0), max_running_turns = nullif($4, 0),
				max_queued_turns = nullif($5, 0)
			WHERE id = $1 RETURNING `+tenantColumns, id, l.RequestsPerSecond, l.Burst, l.MaxRunningTurns, l.MaxQueuedTurns))
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `SELECT pg_notify($1, $2)`, LimitsChangedChannel, id)
		return interpretError(err)
	})
	if err != nil {
		return Tenant{}, fmt.Errorf("set the limits of tenant %s: %w", id, err)
	}
	return t, nil
}

// TenantDelete deletes a tenant with everything it owns: sessions,
// histories, turns, keys and issuers. Its keys are published on
// KeyRevokedChannel and the tenant on IssuerChangedChannel, so that no
// process keeps authenticating them from its cache.
func (s *Store) TenantDelete(ctx context.Context, id string) error {
	err := s.inTx(ctx, id, func(tx pgx.Tx) error {
		var keys []string
		err := tx.QueryRow(ctx, `
			WITH gone AS (DELETE FROM tenants WHERE id = $1 RETURNING id)
			SELECT coalesce(array_agg(k.public_id) FILTER (WHERE k.public_id IS NOT NULL), '{}')
			FROM gone LEFT JOIN api_keys k ON k.tenant_id = gone.id
			HAVING count(gone.id) > 0`, id).Scan(&keys)
		if err != nil {
			return interpretError(err)
		}
		_, err = tx.Exec(ctx, `SELECT pg_notify($1, k) FROM unnest($2::text[]) AS k`, KeyRevokedChannel, keys)
		if err != nil {
			return interpretError(err)
		}
		_, err = tx.Exec(ctx, `SELECT pg_notify($1, $2)`, IssuerChangedChannel, id)
		return interpretError(err)
	})
	if err != nil {
		return fmt.Errorf("delete tenant %s: %w", id, err)
	}
	return nil
}
