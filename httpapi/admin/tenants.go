package admin

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/aapd/aapd/store"
)

// Tenant is a tenant as the operator sees it.
type Tenant struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"createdAt"`
	Limits    Limits    `json:"limits"`
}

func tenantOf(t store.Tenant) Tenant {
	return Tenant{ID: t.ID, Name: t.Name, CreatedAt: t.CreatedAt.UTC(), Limits: limitsOf(t.Limits)}
}

// TenantPage is a page of tenants by name.
type TenantPage struct {
	Tenants []Tenant `json:"tenants"`
	// NextCursor fetches the next page; empty on the last.
	NextCursor string `json:"nextCursor,omitempty"`
}

// tenantName is what a tenant may be called: it is a path segment of the
// admin API and a CLI argument, so letters, digits, '.', '_' and '-' only,
// starting with a letter or a digit.
var tenantName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)

// CreateTenant creates a tenant; Conflict if the name is taken.
func (s *Service) CreateTenant(ctx context.Context, name string) (Tenant, error) {
	if name == "" {
		return Tenant{}, invalid("name", "a tenant needs a name")
	}
	if !tenantName.MatchString(name) {
		return Tenant{}, invalid("name", "%q is not a tenant name: 1 to 63 letters, digits, '.', '_' or '-', starting with a letter or a digit", name)
	}
	t, err := s.st.TenantCreate(ctx, name)
	if errors.Is(err, store.ErrConflict) {
		return Tenant{}, conflict("tenant %q already exists", name)
	}
	if err != nil {
		return Tenant{}, err
	}
	s.audit(ctx, "tenant.create", t, t.ID)
	return tenantOf(t), nil
}

// GetTenant finds a tenant by name.
func (s *Service) GetTenant(ctx context.Context, name string) (Tenant, error) {
	t, err := s.tenant(ctx, name)
	if err != nil {
		return Tenant{}, err
	}
	return tenantOf(t), nil
}

// ListTenants pages through tenants by name; cursor is the NextCursor of
// the previous page ("" for the first), limit 0 the default page size.
func (s *Service) ListTenants(ctx context.Context, cursor string, limit int) (TenantPage, error) {
	limit, err := checkLimit(limit)
	if err != nil {
		return TenantPage{}, err
	}
	page, err := s.st.TenantListPage(ctx, cursor, limit)
	if errors.Is(err, store.ErrBadCursor) {
		return TenantPage{}, badCursor()
	}
	if err != nil {
		return TenantPage{}, err
	}
	out := TenantPage{Tenants: make([]Tenant, len(page.Tenants)), NextCursor: page.Next}
	for i, t := range page.Tenants {
		out.Tenants[i] = tenantOf(t)
	}
	return out, nil
}

// DeleteTenant deletes a tenant with its sessions, keys and issuers. Its
// keys stop working at once in this process, and in every other one when
// the database's notification reaches it.
func (s *Service) DeleteTenant(ctx context.Context, name string) error {
	t, err := s.tenant(ctx, name)
	if err != nil {
		return err
	}
	keys, err := s.st.APIKeyList(ctx, t.ID)
	if err != nil {
		return fmt.Errorf("delete tenant %q: %w", name, err)
	}
	if err := s.st.TenantDelete(ctx, t.ID); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return notFound("no tenant named %q", name) // deleted meanwhile
		}
		return err
	}
	for _, k := range keys {
		s.notify(store.Notification{Channel: store.KeyRevokedChannel, Payload: k.PublicID})
	}
	s.notify(store.Notification{Channel: store.IssuerChangedChannel, Payload: t.ID})
	s.audit(ctx, "tenant.delete", t, t.ID)
	return nil
}
