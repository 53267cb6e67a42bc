package admin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/aapd/aapd/auth"
	"github.com/aapd/aapd/store"
)

// Scopes are the scopes a key may hold (auth.AllScopes), in their
// canonical order. A key created without scopes gets all of them: the
// scopes of a key that can do everything a tenant can.
var Scopes = auth.AllScopes

// maxLabel bounds a key's label: a name for people, not a document.
const maxLabel = 100

// KeyRequest describes a key to create.
type KeyRequest struct {
	// Scopes the key holds; nil (omitted) for all of Scopes. An empty list
	// is refused: a key that may do nothing is a mistake.
	Scopes []string `json:"scopes"`
	// ExpiresAt, if set, is when the key stops working; it must be in the
	// future.
	ExpiresAt *time.Time `json:"expiresAt"`
	// Label names the key for people (which machine, which service).
	Label string `json:"label"`
}

// Key is a key as listed: never its secret, nor its hash.
type Key struct {
	ID string `json:"id"`
	// Prefix is how the key starts, to recognize it.
	Prefix     string     `json:"prefix"`
	Label      string     `json:"label"`
	Scopes     []string   `json:"scopes"`
	CreatedAt  time.Time  `json:"createdAt"`
	ExpiresAt  *time.Time `json:"expiresAt"`
	LastUsedAt *time.Time `json:"lastUsedAt"`
	RevokedAt  *time.Time `json:"revokedAt"`
	// State is "active", "expired" or "revoked".
	State string `json:"state"`
}

// CreatedKey is a new key with its secret: the one time it is shown.
type CreatedKey struct {
	Key
	Secret string `json:"key"`
}

// KeyPage is a page of a tenant's keys, newest first.
type KeyPage struct {
	Keys       []Key  `json:"keys"`
	NextCursor string `json:"nextCursor,omitempty"`
}

func (s *Service) keyOf(k store.APIKey) Key {
	out := Key{
		ID: k.PublicID, Prefix: auth.KeyPrefix + k.PublicID + "_", Label: k.Name, Scopes: k.Scopes,
		CreatedAt: k.CreatedAt.UTC(), ExpiresAt: utc(k.ExpiresAt), LastUsedAt: utc(k.LastUsedAt), RevokedAt: utc(k.RevokedAt),
		State: "active",
	}
	if out.Scopes == nil {
		out.Scopes = []string{}
	}
	switch {
	case k.RevokedAt != nil:
		out.State = "revoked"
	case k.ExpiresAt != nil && !s.now().Before(*k.ExpiresAt):
		out.State = "expired"
	}
	return out
}

func utc(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// ParseScopes reads a comma-separated list of scopes (the CLI's --scopes);
// it does not check them (CreateKey does).
func ParseScopes(list string) []string { return ParseList(list) }

// ParseList reads a comma-separated list (the CLI's --scopes, --events),
// its items trimmed, empty ones left out.
func ParseList(list string) []string {
	out := []string{}
	for _, s := range strings.Split(list, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// checkScopes returns scopes in canonical order without duplicates, or
// refuses an unknown one.
func checkScopes(scopes []string) ([]string, error) {
	if scopes == nil {
		return slices.Clone(Scopes), nil
	}
	if len(scopes) == 0 {
		return nil, invalid("scopes", "a key needs at least one scope (%s); omit scopes for all of them", strings.Join(Scopes, ", "))
	}
	for i, sc := range scopes {
		if !slices.Contains(Scopes, sc) {
			return nil, invalid(fmt.Sprintf("scopes[%d]", i), "unknown scope %q: the scopes are %s", sc, strings.Join(Scopes, ", "))
		}
	}
	var out []string
	for _, sc := range Scopes {
		if slices.Contains(scopes, sc) {
			out = append(out, sc)
		}
	}
	return out, nil
}

func checkLabel(label string) error {
	if len([]rune(label)) > maxLabel {
		return invalid("label", "at most %d characters", maxLabel)
	}
	if strings.IndexFunc(label, unicode.IsControl) >= 0 {
		return invalid("label", "must not hold control characters")
	}
	return nil
}

// CreateKey makes a key for a tenant. Its secret is in the result and
// nowhere else: the store keeps only a hash.
func (s *Service) CreateKey(ctx context.Context, tenant string, req KeyRequest) (CreatedKey, error) {
	scopes, err := checkScopes(req.Scopes)
	if err != nil {
		return CreatedKey{}, err
	}
	if err := checkLabel(req.Label); err != nil {
		return CreatedKey{}, err
	}
	if req.ExpiresAt != nil && !req.ExpiresAt.After(s.now()) {
		return CreatedKey{}, invalid("expiresAt", "%s is not in the future", req.ExpiresAt.UTC().Format(time.RFC3339))
	}
	t, err := s.tenant(ctx, tenant)
	if err != nil {
		return CreatedKey{}, err
	}
	nk, err := auth.GenerateKey()
	if err != nil {
		return CreatedKey{}, fmt.Errorf("generate key: %w", err)
	}
	k, err := s.st.APIKeyCreate(ctx, store.APIKeyCreateParams{
		TenantID: t.ID, PublicID: nk.PublicID, Hash: nk.Hash, Name: req.Label, Scopes: scopes, ExpiresAt: req.ExpiresAt,
	})
	if err != nil {
		return CreatedKey{}, fmt.Errorf("create a key for tenant %q: %w", tenant, err)
	}
	attrs := []slog.Attr{slog.Any("scopes", scopes), slog.String("label", req.Label)}
	if req.ExpiresAt != nil {
		attrs = append(attrs, slog.Time("expires_at", req.ExpiresAt.UTC()))
	}
	s.audit(ctx, "key.create", t, k.PublicID, attrs...)
	s.notify(store.Notification{Channel: store.KeyCreatedChannel, Payload: k.PublicID})
	return CreatedKey{Key: s.keyOf(k), Secret: nk.Secret}, nil
}

// ListKeys pages through a tenant's keys, newest first, revoked and
// expired ones included.
func (s *Service) ListKeys(ctx context.Context, tenant, cursor string, limit int) (KeyPage, error) {
	limit, err := checkLimit(limit)
	if err != nil {
		return KeyPage{}, err
	}
	t, err := s.tenant(ctx, tenant)
	if err != nil {
		return KeyPage{}, err
	}
	page, err := s.st.APIKeyListPage(ctx, t.ID, cursor, limit)
	if errors.Is(err, store.ErrBadCursor) {
		return KeyPage{}, badCursor()
	}
	if err != nil {
		return KeyPage{}, err
	}
	out := KeyPage{Keys: make([]Key, len(page.Keys)), NextCursor: page.Next}
	for i, k := range page.Keys {
		out.Keys[i] = s.keyOf(k)
	}
	return out, nil
}

// RevokeKey revokes a tenant's key at once: in this process before it
// returns, in the others when the database's notification reaches them.
// Revoking a revoked key changes nothing. Another tenant's key is NotFound.
func (s *Service) RevokeKey(ctx context.Context, tenant, id string) (Key, error) {
	t, err := s.tenant(ctx, tenant)
	if err != nil {
		return Key{}, err
	}
	k, err := s.st.APIKeyRevoke(ctx, t.ID, id)
	if errors.Is(err, store.ErrNotFound) {
		return Key{}, notFound("tenant %q has no API key %q", tenant, id)
	}
	if err != nil {
		return Key{}, err
	}
	s.notify(store.Notification{Channel: store.KeyRevokedChannel, Payload: k.PublicID})
	s.audit(ctx, "key.revoke", t, k.PublicID)
	return s.keyOf(k), nil
}

// KeyTenant returns the name of the tenant a key belongs to: the CLI's
// `keys revoke ID` is given no tenant.
func (s *Service) KeyTenant(ctx context.Context, id string) (string, error) {
	k, err := s.st.APIKeyGetByPublicID(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return "", notFound("no API key with id %q", id)
	}
	if err != nil {
		return "", err
	}
	t, err := s.st.TenantGet(ctx, k.TenantID)
	if err != nil {
		return "", err
	}
	return t.Name, nil
}
