package httpapi

import (
	"context"
	"testing"
	"time"

	"github.com/aapd/aapd/store"
)

func TestKeyCacheRemembersUntilForgottenOrStale(t *testing.T) {
	now := time.Unix(1000, 0)
	c := newKeyCache(func() time.Time { return now })
	loads := 0
	load := func(context.Context, string) (store.APIKey, error) {
		loads++
		return store.APIKey{PublicID: "k"}, nil
	}
	ctx := context.Background()
	for range 3 {
		if _, err := c.get(ctx, "k", load); err != nil {
			t.Fatal(err)
		}
	}
	if loads != 1 {
		t.Errorf("%d loads for three uses within the TTL, want 1", loads)
	}
	c.forget("k")
	c.get(ctx, "k", load)
	if loads != 2 {
		t.Errorf("a forgotten key was not read again (%d loads)", loads)
	}
	now = now.Add(keyCacheTTL)
	c.get(ctx, "k", load)
	if loads != 3 {
		t.Errorf("a key past its TTL was not read again (%d loads)", loads)
	}
}

// A revocation's notice that arrives while a request reads the key must
// win: the record read before it is not kept.
func TestKeyCacheDropsARecordReadAcrossAForget(t *testing.T) {
	c := newKeyCache(time.Now)
	ctx := context.Background()
	stale := func(context.Context, string) (store.APIKey, error) {
		c.forget("k") // the notice arrives mid-read
		return store.APIKey{PublicID: "k"}, nil
	}
	if _, err := c.get(ctx, "k", stale); err != nil {
		t.Fatal(err)
	}
	revoked := time.Now()
	fresh := func(context.Context, string) (store.APIKey, error) {
		return store.APIKey{PublicID: "k", RevokedAt: &revoked}, nil
	}
	if rec, _ := c.get(ctx, "k", fresh); rec.RevokedAt == nil {
		t.Error("the record read before the revocation's notice was kept")
	}
}
