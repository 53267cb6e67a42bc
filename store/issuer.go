package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// TokenIssuer is an issuer of end-user tokens registered by a tenant: a JWT
// whose iss and aud match is one of the tenant's end users. Its keys come
// from JWKSURL or from PublicKeys (PEM), never both.
type TokenIssuer struct {
	TenantID   string
	ID         string
	Issuer     string
	Audience   string
	JWKSURL    string
	PublicKeys []string
	CreatedAt  time.Time
}

// TokenIssuerCreateParams describes a new issuer.
type TokenIssuerCreateParams struct {
	TenantID   string
	Issuer     string
	Audience   string
	JWKSURL    string
	PublicKeys []string
}

// IssuerChangedChannel is the notification channel on which the tenant id
// of an issuer that was removed is published, so that every process forgets
// it at once.
const IssuerChangedChannel = "aapd_issuer_changed"

// NewIssuerID returns an opaque, time-ordered issuer id.
func NewIssuerID() string { return "iss_" + mustV7() }

const issuerColumns = `tenant_id::text, id, issuer, audience, coalesce(jwks_url, ''), public_keys, created_at`

func scanIssuer(row interface{ Scan(...any) error }) (TokenIssuer, error) {
	var i TokenIssuer
	err := row.Scan(&i.TenantID, &i.ID, &i.Issuer, &i.Audience, &i.JWKSURL, &i.PublicKeys, &i.CreatedAt)
	return i, interpretError(err)
}

// TokenIssuerCreate registers an issuer; ErrConflict if the pair (issuer,
// audience) already belongs to a tenant (this one or another).
func (s *Store) TokenIssuerCreate(ctx context.Context, p TokenIssuerCreateParams) (TokenIssuer, error) {
	if p.PublicKeys == nil {
		p.PublicKeys = []string{}
	}
	i, err := scanIssuer(s.tenant(p.TenantID).QueryRow(ctx, `
		INSERT INTO token_issuers (tenant_id, id, issuer, audience, jwks_url, public_keys)
		VALUES ($1, $2, $3, $4, nullif($5, ''), $6)
		RETURNING `+issuerColumns,
		p.TenantID, NewIssuerID(), p.Issuer, p.Audience, p.JWKSURL, p.PublicKeys))
	if err != nil {
		return TokenIssuer{}, fmt.Errorf("register issuer %q for audience %q: %w", p.Issuer, p.Audience, err)
	}
	return i, nil
}

// TokenIssuerList lists a tenant's issuers, oldest first.
func (s *Store) TokenIssuerList(ctx context.Context, tenantID string) ([]TokenIssuer, error) {
	rows, err := s.tenant(tenantID).Query(ctx,
		`SELECT `+issuerColumns+` FROM token_issuers WHERE tenant_id = $1 ORDER BY created_at, id`, tenantID)
	if err != nil {
		return nil, fmt.Errorf("list issuers: %w", interpretError(err))
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (TokenIssuer, error) { return scanIssuer(row) })
	if err != nil {
		return nil, fmt.Errorf("list issuers: %w", err)
	}
	return out, nil
}

// TokenIssuerFind finds the issuers registered for iss and any of the
// audiences of a token. It is, like APIKeyGetByPublicID, a query that runs
// before the tenant is known: it is how a token's tenant is found. More than
// one result means the token names audiences of several tenants.
func (s *Store) TokenIssuerFind(ctx context.Context, issuer string, audiences []string) ([]TokenIssuer, error) {
	rows, err := s.chores.Query(ctx,
		`SELECT `+issuerColumns+` FROM token_issuers WHERE issuer = $1 AND audience = ANY($2) ORDER BY id`,
		issuer, audiences)
	if err != nil {
		return nil, fmt.Errorf("find issuer %q: %w", issuer, interpretError(err))
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (TokenIssuer, error) { return scanIssuer(row) })
	if err != nil {
		return nil, fmt.Errorf("find issuer %q: %w", issuer, err)
	}
	return out, nil
}

// TokenIssuerDelete removes an issuer of the tenant; ErrNotFound if it has
// none with that id. Every process listening on IssuerChangedChannel is told.
func (s *Store) TokenIssuerDelete(ctx context.Context, tenantID, id string) error {
	err := s.inTx(ctx, tenantID, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `DELETE FROM token_issuers WHERE tenant_id = $1 AND id = $2`, tenantID, id)
		if err != nil {
			return interpretError(err)
		}
		if tag.RowsAffected() == 0 {
			return ErrNotFound
		}
		_, err = tx.Exec(ctx, `SELECT pg_notify($1, $2)`, IssuerChangedChannel, tenantID)
		return interpretError(err)
	})
	if err != nil {
		return fmt.Errorf("delete issuer %s: %w", id, err)
	}
	return nil
}
