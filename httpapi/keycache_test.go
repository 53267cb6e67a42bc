package httpapi

import (
	"context"
	"errors"
	"fmt"
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

// An id no key has is read once, then answered from memory until its TTL
// ends or a key is made with it (forget, on store.KeyCreatedChannel).
func TestKeyCacheRemembersUnknownKeysUntilOneIsCreated(t *testing.T) {
	now := time.Unix(1000, 0)
	c := newKeyCache(func() time.Time { return now })
	loads, exists := 0, false
	load := func(context.Context, string) (store.APIKey, error) {
		loads++
		if exists {
			return store.APIKey{PublicID: "k"}, nil
		}
		return store.APIKey{}, store.ErrNotFound
	}
	ctx := context.Background()
	for range 300 {
		if _, err := c.get(ctx, "k", load); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("an unknown key: %v, want ErrNotFound", err)
		}
	}
	if loads != 1 {
		t.Errorf("%d loads for 300 uses of one unknown key, want 1", loads)
	}
	now = now.Add(unknownKeyTTL)
	c.get(ctx, "k", load)
	if loads != 2 {
		t.Errorf("an unknown key past its TTL was not read again (%d loads)", loads)
	}
	exists = true
	c.forget("k") // the key is created
	if _, err := c.get(ctx, "k", load); err != nil || loads != 3 {
		t.Errorf("a key created after it was unknown: %v after %d loads, want found after 3", err, loads)
	}
	// A failed read is not remembered: the key may well exist.
	c.forget("k")
	failing := func(context.Context, string) (store.APIKey, error) {
		loads++
		return store.APIKey{}, store.ErrUnavailable
	}
	c.get(ctx, "k", failing)
	c.get(ctx, "k", failing)
	if loads != 5 {
		t.Errorf("a failed read was remembered (%d loads, want 5)", loads)
	}
}

// The unknown ids remembered are bounded: past unknownKeyMax they start
// over.
func TestKeyCacheBoundsTheUnknownKeysItRemembers(t *testing.T) {
	c := newKeyCache(time.Now)
	load := func(context.Context, string) (store.APIKey, error) { return store.APIKey{}, store.ErrNotFound }
	for i := range unknownKeyMax + 10 {
		c.get(context.Background(), fmt.Sprint("k", i), load)
	}
	if n := len(c.unknown); n > unknownKeyMax {
		t.Errorf("%d unknown ids remembered, more than %d", n, unknownKeyMax)
	}
}
