package store

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
)

// Pages of a tenant's keys and issuers, for the operator's API
// (httpapi/admin). Both page by keyset, so keys or issuers added or removed
// between pages never make another appear twice or not at all.

// APIKeyPage is a page of a tenant's keys, newest first.
type APIKeyPage struct {
	Keys []APIKey
	// Next is the cursor of the next page; empty on the last page.
	Next string
}

// apiKeyPageSQL pages a tenant's keys ($1) newest first, after the key
// ($2 created_at, $3 public_id) that ended the previous page; $4 the limit.
const apiKeyPageSQL = `SELECT ` + apiKeyColumns + ` FROM api_keys
	WHERE tenant_id = $1 AND (created_at, public_id) < ($2, $3)
	ORDER BY created_at DESC, public_id DESC LIMIT $4`

// noKeyCursor sorts after every key: the first page's bound.
var noKeyCursor = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)

// APIKeyListPage pages through a tenant's keys, newest first: after is the
// Next of the previous page ("" for the first); ErrBadCursor if it is not
// one this store issued.
func (s *Store) APIKeyListPage(ctx context.Context, tenantID, after string, limit int) (APIKeyPage, error) {
	at, id := noKeyCursor, ""
	if after != "" {
		b, err := base64.RawURLEncoding.DecodeString(after)
		ts, pub, ok := strings.Cut(string(b), "|")
		if err != nil || !ok || pub == "" || !utf8.Valid(b) {
			return APIKeyPage{}, ErrBadCursor
		}
		if at, err = time.Parse(time.RFC3339Nano, ts); err != nil {
			return APIKeyPage{}, ErrBadCursor
		}
		id = pub
	}
	rows, err := s.tenant(tenantID).Query(ctx, apiKeyPageSQL, tenantID, at, id, limit+1)
	if err != nil {
		return APIKeyPage{}, fmt.Errorf("list api keys: %w", interpretError(err))
	}
	keys, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (APIKey, error) { return scanAPIKey(row) })
	if err != nil {
		return APIKeyPage{}, fmt.Errorf("list api keys: %w", interpretError(err))
	}
	page := APIKeyPage{Keys: keys}
	if len(keys) > limit {
		last := keys[limit-1]
		page.Keys = keys[:limit]
		page.Next = base64.RawURLEncoding.EncodeToString([]byte(last.CreatedAt.UTC().Format(time.RFC3339Nano) + "|" + last.PublicID))
	}
	return page, nil
}

// TokenIssuerPage is a page of a tenant's issuers, oldest first.
type TokenIssuerPage struct {
	Issuers []TokenIssuer
	// Next is the cursor of the next page; empty on the last page.
	Next string
}

// TokenIssuerListPage pages through a tenant's issuers, oldest first (their
// ids are time-ordered): after is the Next of the previous page ("" for the
// first); ErrBadCursor if it is not one this store issued.
func (s *Store) TokenIssuerListPage(ctx context.Context, tenantID, after string, limit int) (TokenIssuerPage, error) {
	var id string
	if after != "" {
		b, err := base64.RawURLEncoding.DecodeString(after)
		if err != nil || !strings.HasPrefix(string(b), "iss_") || !utf8.Valid(b) {
			return TokenIssuerPage{}, ErrBadCursor
		}
		id = string(b)
	}
	rows, err := s.tenant(tenantID).Query(ctx,
		`SELECT `+issuerColumns+` FROM token_issuers WHERE tenant_id = $1 AND id > $2 ORDER BY id LIMIT $3`,
		tenantID, id, limit+1)
	if err != nil {
		return TokenIssuerPage{}, fmt.Errorf("list issuers: %w", interpretError(err))
	}
	list, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (TokenIssuer, error) { return scanIssuer(row) })
	if err != nil {
		return TokenIssuerPage{}, fmt.Errorf("list issuers: %w", err)
	}
	page := TokenIssuerPage{Issuers: list}
	if len(list) > limit {
		page.Issuers = list[:limit]
		page.Next = base64.RawURLEncoding.EncodeToString([]byte(list[limit-1].ID))
	}
	return page, nil
}
