package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/aapd/aapd/auth"
	"github.com/aapd/aapd/store"
	"github.com/aapd/aapd/store/storetest"
)

// APIKeyTouch writes many keys in one statement, only keys of the tenant
// given with each, only forward, and only by a minute or more.
func TestAPIKeyTouch(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t)
	ctx := context.Background()
	newKey := func(tenantID string) string {
		t.Helper()
		k, err := auth.GenerateKey()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.APIKeyCreate(ctx, store.APIKeyCreateParams{TenantID: tenantID, PublicID: k.PublicID, Hash: k.Hash}); err != nil {
			t.Fatal(err)
		}
		return k.PublicID
	}
	lastUsed := func(tenantID, publicID string) *time.Time {
		t.Helper()
		k, err := st.APIKeyGetByPublicID(ctx, publicID)
		if err != nil || k.TenantID != tenantID {
			t.Fatalf("key %s: %+v, %v", publicID, k, err)
		}
		return k.LastUsedAt
	}
	a, b := storetest.NewTenant(t, st), storetest.NewTenant(t, st)
	a1, a2, b1 := newKey(a.ID), newKey(a.ID), newKey(b.ID)
	t0 := time.Now().UTC().Truncate(time.Second)

	err := st.APIKeyTouch(ctx, []store.APIKeyUse{
		{TenantID: a.ID, PublicID: a1, At: t0},
		{TenantID: a.ID, PublicID: a2, At: t0},
		{TenantID: a.ID, PublicID: b1, At: t0}, // b's key, given as a's: not written
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{a1, a2} {
		if got := lastUsed(a.ID, id); got == nil || !got.Equal(t0) {
			t.Errorf("key %s last used %v, want %v", id, got, t0)
		}
	}
	if got := lastUsed(b.ID, b1); got != nil {
		t.Errorf("another tenant's key was written: %v", got)
	}

	steps := []struct {
		name string
		at   time.Time
		want time.Time
	}{
		{"within the minute", t0.Add(59 * time.Second), t0},
		{"backwards", t0.Add(-time.Hour), t0},
		{"a minute later", t0.Add(time.Minute), t0.Add(time.Minute)},
	}
	for _, s := range steps {
		if err := st.APIKeyTouch(ctx, []store.APIKeyUse{{TenantID: a.ID, PublicID: a1, At: s.at}}); err != nil {
			t.Fatal(err)
		}
		if got := lastUsed(a.ID, a1); got == nil || !got.Equal(s.want) {
			t.Errorf("%s: last used %v, want %v", s.name, got, s.want)
		}
	}
	if err := st.APIKeyTouch(ctx, nil); err != nil {
		t.Errorf("no uses: %v", err)
	}
}
