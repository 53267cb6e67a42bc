package admin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"
	"unicode"

	"github.com/aapd/aapd/auth"
	"github.com/aapd/aapd/store"
)

// Bounds of an issuer registration.
const (
	maxIssuerField = 512 // issuer, audience, jwksUrl
	maxPublicKeys  = 10
	maxPEM         = 16 << 10
)

// IssuerRequest registers an issuer of end-user tokens: tokens whose iss is
// Issuer and whose aud holds Audience, signed by a key from JWKSURL or one
// of PublicKeys (PEM) — exactly one of the two.
type IssuerRequest struct {
	Issuer     string   `json:"issuer"`
	Audience   string   `json:"audience"`
	JWKSURL    string   `json:"jwksUrl"`
	PublicKeys []string `json:"publicKeys"`
}

// Issuer is a registered issuer.
type Issuer struct {
	ID         string    `json:"id"`
	Issuer     string    `json:"issuer"`
	Audience   string    `json:"audience"`
	JWKSURL    string    `json:"jwksUrl,omitempty"`
	PublicKeys []string  `json:"publicKeys,omitempty"`
	CreatedAt  time.Time `json:"createdAt"`
}

// IssuerPage is a page of a tenant's issuers, oldest first.
type IssuerPage struct {
	Issuers    []Issuer `json:"issuers"`
	NextCursor string   `json:"nextCursor,omitempty"`
}

func issuerOf(i store.TokenIssuer) Issuer {
	return Issuer{ID: i.ID, Issuer: i.Issuer, Audience: i.Audience, JWKSURL: i.JWKSURL, PublicKeys: i.PublicKeys, CreatedAt: i.CreatedAt.UTC()}
}

// checkText refuses an empty, overlong or control-character-laden value.
func checkText(field, v string) error {
	switch {
	case strings.TrimSpace(v) == "":
		return invalid(field, "is required")
	case len(v) > maxIssuerField:
		return invalid(field, "at most %d bytes", maxIssuerField)
	case strings.IndexFunc(v, unicode.IsControl) >= 0:
		return invalid(field, "must not hold control characters")
	}
	return nil
}

// validate checks a registration and returns it as stored: PEM trimmed.
func (r IssuerRequest) validate() (IssuerRequest, error) {
	if err := checkText("issuer", r.Issuer); err != nil {
		return r, err
	}
	if err := checkText("audience", r.Audience); err != nil {
		return r, err
	}
	switch {
	case r.JWKSURL != "" && len(r.PublicKeys) > 0:
		return r, invalid("jwksUrl", "give either jwksUrl or publicKeys, not both")
	case r.JWKSURL == "" && len(r.PublicKeys) == 0:
		return r, invalid("jwksUrl", "give jwksUrl (where the issuer publishes its keys) or publicKeys (PEM)")
	case r.JWKSURL != "":
		if len(r.JWKSURL) > maxIssuerField {
			return r, invalid("jwksUrl", "at most %d bytes", maxIssuerField)
		}
		if err := auth.ValidateJWKSURL(r.JWKSURL); err != nil {
			return r, invalid("jwksUrl", "%v", err)
		}
		return r, nil
	}
	if len(r.PublicKeys) > maxPublicKeys {
		return r, invalid("publicKeys", "at most %d keys", maxPublicKeys)
	}
	keys := make([]string, len(r.PublicKeys))
	for i, pem := range r.PublicKeys {
		field := fmt.Sprintf("publicKeys[%d]", i)
		if len(pem) > maxPEM {
			return r, invalid(field, "at most %d bytes", maxPEM)
		}
		if _, err := auth.ParsePublicKeyPEM(pem); err != nil {
			return r, invalid(field, "%v", err)
		}
		keys[i] = strings.TrimSpace(pem)
	}
	r.PublicKeys = keys
	return r, nil
}

// AddIssuer registers an issuer for a tenant; Conflict if the pair (issuer,
// audience) is already registered, by this tenant or another.
func (s *Service) AddIssuer(ctx context.Context, tenant string, req IssuerRequest) (Issuer, error) {
	req, err := req.validate()
	if err != nil {
		return Issuer{}, err
	}
	t, err := s.tenant(ctx, tenant)
	if err != nil {
		return Issuer{}, err
	}
	i, err := s.st.TokenIssuerCreate(ctx, store.TokenIssuerCreateParams{
		TenantID: t.ID, Issuer: req.Issuer, Audience: req.Audience, JWKSURL: req.JWKSURL, PublicKeys: req.PublicKeys,
	})
	if errors.Is(err, store.ErrConflict) {
		return Issuer{}, conflict("issuer %q with audience %q is already registered", req.Issuer, req.Audience)
	}
	if err != nil {
		return Issuer{}, err
	}
	s.audit(ctx, "issuer.add", t, i.ID, slogIssuer(i)...)
	return issuerOf(i), nil
}

// ListIssuers pages through a tenant's issuers, oldest first.
func (s *Service) ListIssuers(ctx context.Context, tenant, cursor string, limit int) (IssuerPage, error) {
	limit, err := checkLimit(limit)
	if err != nil {
		return IssuerPage{}, err
	}
	t, err := s.tenant(ctx, tenant)
	if err != nil {
		return IssuerPage{}, err
	}
	page, err := s.st.TokenIssuerListPage(ctx, t.ID, cursor, limit)
	if errors.Is(err, store.ErrBadCursor) {
		return IssuerPage{}, badCursor()
	}
	if err != nil {
		return IssuerPage{}, err
	}
	out := IssuerPage{Issuers: make([]Issuer, len(page.Issuers)), NextCursor: page.Next}
	for i, is := range page.Issuers {
		out.Issuers[i] = issuerOf(is)
	}
	return out, nil
}

// RemoveIssuer removes a tenant's issuer: its tokens stop working at once.
func (s *Service) RemoveIssuer(ctx context.Context, tenant, id string) error {
	t, err := s.tenant(ctx, tenant)
	if err != nil {
		return err
	}
	err = s.st.TokenIssuerDelete(ctx, t.ID, id)
	if errors.Is(err, store.ErrNotFound) {
		return notFound("tenant %q has no issuer %q", tenant, id)
	}
	if err != nil {
		return err
	}
	s.notify(store.Notification{Channel: store.IssuerChangedChannel, Payload: t.ID})
	s.audit(ctx, "issuer.remove", t, id)
	return nil
}

// slogIssuer describes an issuer for its audit line: its public keys by
// their number only, they are long.
func slogIssuer(i store.TokenIssuer) []slog.Attr {
	return []slog.Attr{slog.String("issuer", i.Issuer), slog.String("audience", i.Audience),
		slog.String("jwks_url", i.JWKSURL), slog.Int("public_keys", len(i.PublicKeys))}
}
