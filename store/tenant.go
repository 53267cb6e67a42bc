package store

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Tenant is a team: the unit of isolation.
type Tenant struct {
	ID        string
	Name      string
	CreatedAt time.Time
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
	t := Tenant{Name: name}
	err := s.pool.QueryRow(ctx,
		`SELECT id::text, created_at FROM tenants WHERE name = $1`, name,
	).Scan(&t.ID, &t.CreatedAt)
	if err != nil {
		return Tenant{}, fmt.Errorf("tenant %q: %w", name, interpretError(err))
	}
	return t, nil
}

// TenantList lists every tenant by name (administration only).
func (s *Store) TenantList(ctx context.Context) ([]Tenant, error) {
	rows, err := s.pool.Query(ctx, `SELECT id::text, name, created_at FROM tenants ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("list tenants: %w", interpretError(err))
	}
	defer rows.Close()
	var out []Tenant
	for rows.Next() {
		var t Tenant
		if err := rows.Scan(&t.ID, &t.Name, &t.CreatedAt); err != nil {
			return nil, fmt.Errorf("list tenants: %w", interpretError(err))
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list tenants: %w", interpretError(err))
	}
	return out, nil
}
