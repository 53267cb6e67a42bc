package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// APIKey is a stored API key: everything but the secret, of which only a
// hash is kept.
type APIKey struct {
	TenantID   string
	PublicID   string
	Hash       []byte
	Name       string
	Scopes     []string
	CreatedAt  time.Time
	ExpiresAt  *time.Time
	RevokedAt  *time.Time
	LastUsedAt *time.Time
}

// APIKeyCreateParams describes a new key.
type APIKeyCreateParams struct {
	TenantID  string
	PublicID  string
	Hash      []byte
	Name      string
	Scopes    []string
	ExpiresAt *time.Time
}

const apiKeyColumns = `tenant_id::text, public_id, hash, name, scopes, created_at, expires_at, revoked_at, last_used_at`

func scanAPIKey(row interface{ Scan(...any) error }) (APIKey, error) {
	var k APIKey
	err := row.Scan(&k.TenantID, &k.PublicID, &k.Hash, &k.Name, &k.Scopes, &k.CreatedAt, &k.ExpiresAt, &k.RevokedAt, &k.LastUsedAt)
	return k, err
}

// DefaultKeyScopes are the scopes of a key made without saying (nil
// Scopes): every scope, as keys had before scopes were enforced. An empty,
// non-nil list makes a key that can do nothing.
var DefaultKeyScopes = []string{"sessions:read", "sessions:write"}

// KeyCreatedChannel is the notification channel on which the public id of
// a new key is published, so that no process keeps it remembered as no
// key's (the servers' caches of unknown keys).
const KeyCreatedChannel = "aapd_key_created"

// APIKeyCreate stores a new key. Every process listening on
// KeyCreatedChannel is told when it commits.
func (s *Store) APIKeyCreate(ctx context.Context, p APIKeyCreateParams) (APIKey, error) {
	if p.Scopes == nil {
		p.Scopes = DefaultKeyScopes
	}
	var k APIKey
	err := s.inTx(ctx, p.TenantID, func(tx pgx.Tx) error {
		var err error
		k, err = scanAPIKey(tx.QueryRow(ctx, `
			INSERT INTO api_keys (tenant_id, public_id, hash, name, scopes, expires_at)
			VALUES ($1, $2, $3, $4, $5, $6)
			RETURNING `+apiKeyColumns,
			p.TenantID, p.PublicID, p.Hash, p.Name, p.Scopes, p.ExpiresAt))
		if err != nil {
			return interpretError(err)
		}
		_, err = tx.Exec(ctx, `SELECT pg_notify($1, $2)`, KeyCreatedChannel, p.PublicID)
		return interpretError(err)
	})
	if err != nil {
		return APIKey{}, fmt.Errorf("create api key: %w", err)
	}
	return k, nil
}

// APIKeyGetByPublicID finds a key by the public part of its secret. It is
// the one tenant-data query that runs before the tenant is known: it is how
// a request's tenant is found.
func (s *Store) APIKeyGetByPublicID(ctx context.Context, publicID string) (APIKey, error) {
	k, err := scanAPIKey(s.chores.QueryRow(ctx,
		`SELECT `+apiKeyColumns+` FROM api_keys WHERE public_id = $1`, publicID))
	if err != nil {
		return APIKey{}, fmt.Errorf("api key %s: %w", publicID, interpretError(err))
	}
	return k, nil
}

// APIKeyList lists a tenant's keys, newest first.
func (s *Store) APIKeyList(ctx context.Context, tenantID string) ([]APIKey, error) {
	rows, err := s.tenant(tenantID).Query(ctx,
		`SELECT `+apiKeyColumns+` FROM api_keys WHERE tenant_id = $1 ORDER BY created_at DESC, public_id`, tenantID)
	if err != nil {
		return nil, fmt.Errorf("list api keys: %w", interpretError(err))
	}
	defer rows.Close()
	var out []APIKey
	for rows.Next() {
		k, err := scanAPIKey(rows)
		if err != nil {
			return nil, fmt.Errorf("list api keys: %w", interpretError(err))
		}
		out = append(out, k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list api keys: %w", interpretError(err))
	}
	return out, nil
}

// KeyRevokedChannel is the notification channel on which the public id of
// a revoked key is published, so that every process forgets it at once.
const KeyRevokedChannel = "aapd_key_revoked"

// APIKeyRevoke revokes a key; revoking twice keeps the first time. Every
// process listening on KeyRevokedChannel is told.
func (s *Store) APIKeyRevoke(ctx context.Context, tenantID, publicID string) (APIKey, error) {
	var k APIKey
	err := s.inTx(ctx, tenantID, func(tx pgx.Tx) error {
		var err error
		k, err = scanAPIKey(tx.QueryRow(ctx, `
			UPDATE api_keys SET revoked_at = coalesce(revoked_at, $3)
			WHERE tenant_id = $1 AND public_id = $2
			RETURNING `+apiKeyColumns, tenantID, publicID, s.now()))
		if err != nil {
			return interpretError(err)
		}
		_, err = tx.Exec(ctx, `SELECT pg_notify($1, $2)`, KeyRevokedChannel, publicID)
		return interpretError(err)
	})
	if err != nil {
		return APIKey{}, fmt.Errorf("revoke api key %s: %w", publicID, err)
	}
	return k, nil
}

// APIKeyTouchEvery is how precisely last_used_at is kept: a key's use is
// written only once it is this much later than the one recorded, so that
// authentication does not turn every request into a write.
const APIKeyTouchEvery = time.Minute

// APIKeyUse is a use of a key, to record.
type APIKeyUse struct {
	TenantID string
	PublicID string
	At       time.Time
}

// APIKeyTouch records when keys were used, in one statement however many
// there are; give each key once. A key's last_used_at moves only forward,
// and only by APIKeyTouchEvery or more, so replicas that each remember
// their own writes still write a key about once a minute between them.
func (s *Store) APIKeyTouch(ctx context.Context, uses []APIKeyUse) error {
	if len(uses) == 0 {
		return nil
	}
	tenants := make([]string, len(uses))
	ids := make([]string, len(uses))
	ats := make([]time.Time, len(uses))
	// Each key's bound is computed here: Citus refuses a STABLE function
	// (timestamptz - interval) of a column in an UPDATE (docs/citus.md).
	before := make([]time.Time, len(uses))
	for i, u := range uses {
		tenants[i], ids[i], ats[i], before[i] = u.TenantID, u.PublicID, u.At, u.At.Add(-APIKeyTouchEvery)
	}
	_, err := s.chores.Exec(ctx, `
		UPDATE api_keys k SET last_used_at = u.at
		FROM unnest($1::text[], $2::text[], $3::timestamptz[], $4::timestamptz[]) AS u(tenant_id, public_id, at, before)
		WHERE k.tenant_id = u.tenant_id::uuid AND k.public_id = u.public_id
		  AND (k.last_used_at IS NULL OR k.last_used_at <= u.before)`,
		tenants, ids, ats, before)
	if err != nil {
		return fmt.Errorf("record the use of %d api keys: %w", len(uses), interpretError(err))
	}
	return nil
}
