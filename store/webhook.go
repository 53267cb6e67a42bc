package store

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
)

// WebhookEndpoint is one of a tenant's webhook endpoints: where its events
// of the listed types are sent. Its signing secrets are never in it: they
// are read only by the deliverer's claim (WebhookTarget).
type WebhookEndpoint struct {
	TenantID    string
	ID          string
	URL         string
	Description string
	Events      []string
	CreatedAt   time.Time
	// PreviousSecretUntil is, after a rotation, when the previous secret
	// stops (or stopped) signing beside the new one.
	PreviousSecretUntil *time.Time
	// FailingSince is the first failed attempt since the last success.
	FailingSince *time.Time
	// DisabledAt is when the endpoint was disabled (410 Gone, or failing for
	// too long), and DisabledReason why; nil while it is enabled.
	DisabledAt     *time.Time
	DisabledReason string
}

// WebhookEndpointCreateParams describes a new endpoint.
type WebhookEndpointCreateParams struct {
	TenantID    string
	URL         string
	Description string
	Events      []string
	// Secret is the signing secret (whsec_…), sealed before it is stored.
	Secret string
	// Max is how many endpoints the tenant may have; ErrWebhookLimit beyond.
	Max int
}

// ErrWebhookLimit: the tenant has as many endpoints as it may.
var ErrWebhookLimit = errors.New("the tenant has the most webhook endpoints it may have")

// NewWebhookEndpointID returns an opaque, time-ordered endpoint id.
func NewWebhookEndpointID() string { return "wh_" + mustV7() }

const webhookEndpointColumns = `tenant_id::text, id, url, description, events, created_at,
	previous_secret_until, failing_since, disabled_at, coalesce(disabled_reason, '')`

func scanWebhookEndpoint(row interface{ Scan(...any) error }, extra ...any) (WebhookEndpoint, error) {
	var e WebhookEndpoint
	err := row.Scan(append([]any{&e.TenantID, &e.ID, &e.URL, &e.Description, &e.Events, &e.CreatedAt,
		&e.PreviousSecretUntil, &e.FailingSince, &e.DisabledAt, &e.DisabledReason}, extra...)...)
	return e, interpretError(err)
}

// WebhookEndpointCreate stores a new endpoint with its sealed secret;
// ErrWebhookLimit if the tenant has p.Max already.
func (s *Store) WebhookEndpointCreate(ctx context.Context, p WebhookEndpointCreateParams) (WebhookEndpoint, error) {
	sealed, err := s.sealer.seal([]byte(p.Secret))
	if err != nil {
		return WebhookEndpoint{}, fmt.Errorf("seal webhook secret: %w", err)
	}
	e, err := scanWebhookEndpoint(s.tenant(p.TenantID).QueryRow(ctx, `
		INSERT INTO webhook_endpoints (tenant_id, id, url, description, events, secret)
		SELECT $1, $2, $3, $4, $5, $6
		WHERE (SELECT count(*) FROM webhook_endpoints WHERE tenant_id = $1) < $7
		RETURNING `+webhookEndpointColumns,
		p.TenantID, NewWebhookEndpointID(), p.URL, p.Description, p.Events, sealed, p.Max))
	if errors.Is(err, ErrNotFound) {
		return WebhookEndpoint{}, ErrWebhookLimit
	}
	if err != nil {
		return WebhookEndpoint{}, fmt.Errorf("create webhook endpoint: %w", err)
	}
	return e, nil
}

// WebhookEndpointGet loads an endpoint of the tenant.
func (s *Store) WebhookEndpointGet(ctx context.Context, tenantID, id string) (WebhookEndpoint, error) {
	e, err := scanWebhookEndpoint(s.tenant(tenantID).QueryRow(ctx,
		`SELECT `+webhookEndpointColumns+` FROM webhook_endpoints WHERE tenant_id = $1 AND id = $2`, tenantID, id))
	if err != nil {
		return WebhookEndpoint{}, fmt.Errorf("load webhook endpoint %s: %w", id, err)
	}
	return e, nil
}

// WebhookEndpointPage is a page of a tenant's endpoints, oldest first.
type WebhookEndpointPage struct {
	Endpoints []WebhookEndpoint
	// Next is the cursor of the next page; empty on the last page.
	Next string
}

// WebhookEndpointList pages through a tenant's endpoints, oldest first
// (their ids are time-ordered): after is the Next of the previous page (""
// for the first); ErrBadCursor if it is not one this store issued.
func (s *Store) WebhookEndpointList(ctx context.Context, tenantID, after string, limit int) (WebhookEndpointPage, error) {
	id, err := idCursor(after, "wh_")
	if err != nil {
		return WebhookEndpointPage{}, err
	}
	rows, err := s.tenant(tenantID).Query(ctx, `SELECT `+webhookEndpointColumns+` FROM webhook_endpoints
		WHERE tenant_id = $1 AND id > $2 ORDER BY id LIMIT $3`, tenantID, id, limit+1)
	if err != nil {
		return WebhookEndpointPage{}, fmt.Errorf("list webhook endpoints: %w", interpretError(err))
	}
	list, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (WebhookEndpoint, error) { return scanWebhookEndpoint(row) })
	if err != nil {
		return WebhookEndpointPage{}, fmt.Errorf("list webhook endpoints: %w", err)
	}
	page := WebhookEndpointPage{Endpoints: list}
	if len(list) > limit {
		page.Endpoints = list[:limit]
		page.Next = encodeCursor(list[limit-1].ID)
	}
	return page, nil
}

// idCursor reads a cursor of encodeCursor for ids with the prefix; "" for
// none.
func idCursor(cursor, prefix string) (string, error) {
	if cursor == "" {
		return "", nil
	}
	b, err := base64.RawURLEncoding.DecodeString(cursor)
	if err != nil || !strings.HasPrefix(string(b), prefix) || !utf8.Valid(b) || strings.ContainsRune(string(b), 0) {
		return "", ErrBadCursor
	}
	return string(b), nil
}

// WebhookEndpointDelete deletes an endpoint of the tenant and its
// deliveries; ErrNotFound if it has none with that id.
func (s *Store) WebhookEndpointDelete(ctx context.Context, tenantID, id string) error {
	tag, err := s.tenant(tenantID).Exec(ctx, `DELETE FROM webhook_endpoints WHERE tenant_id = $1 AND id = $2`, tenantID, id)
	switch {
	case err != nil:
		return fmt.Errorf("delete webhook endpoint %s: %w", id, interpretError(err))
	case tag.RowsAffected() == 0:
		return fmt.Errorf("delete webhook endpoint %s: %w", id, ErrNotFound)
	}
	return nil
}

// WebhookEndpointRotateSecret replaces an endpoint's secret with secret;
// the one it replaces keeps signing beside it until now + overlap.
func (s *Store) WebhookEndpointRotateSecret(ctx context.Context, tenantID, id, secret string, overlap time.Duration) (WebhookEndpoint, error) {
	sealed, err := s.sealer.seal([]byte(secret))
	if err != nil {
		return WebhookEndpoint{}, fmt.Errorf("seal webhook secret: %w", err)
	}
	e, err := scanWebhookEndpoint(s.tenant(tenantID).QueryRow(ctx, `
		UPDATE webhook_endpoints SET previous_secret = secret, secret = $3,
			previous_secret_until = now() + $4 * interval '1 millisecond'
		WHERE tenant_id = $1 AND id = $2
		RETURNING `+webhookEndpointColumns, tenantID, id, sealed, overlap.Milliseconds()))
	if err != nil {
		return WebhookEndpoint{}, fmt.Errorf("rotate the secret of webhook endpoint %s: %w", id, err)
	}
	return e, nil
}

// WebhookEndpointEnable enables an endpoint again after it was disabled,
// its failures forgotten. Deliveries that ended while it was disabled stay
// failed; redeliver them one by one.
func (s *Store) WebhookEndpointEnable(ctx context.Context, tenantID, id string) (WebhookEndpoint, error) {
	e, err := scanWebhookEndpoint(s.tenant(tenantID).QueryRow(ctx, `
		UPDATE webhook_endpoints SET disabled_at = NULL, disabled_reason = NULL, failing_since = NULL
		WHERE tenant_id = $1 AND id = $2
		RETURNING `+webhookEndpointColumns, tenantID, id))
	if err != nil {
		return WebhookEndpoint{}, fmt.Errorf("enable webhook endpoint %s: %w", id, err)
	}
	return e, nil
}
