package httpapi

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/aapd/aapd/store"
)

// keyCacheTTL is how long a key's record is used without reading it again.
// A revocation reaches every process at once (store.KeyRevokedChannel); the
// TTL bounds how long a missed notification can keep a revoked key working.
const keyCacheTTL = 30 * time.Second

// keyCacheMax bounds the keys remembered; beyond it the cache starts over.
const keyCacheMax = 10000

// unknownKeyTTL is how long a public id no key has is remembered as
// unknown, so that a misconfigured client or a guesser repeating it costs
// the database one lookup. Creating a key forgets its id at once in every
// process (store.KeyCreatedChannel), though a new key's id is random and
// no one can have sent it before: the TTL is only a bound on memory held
// for an id nobody sends any more.
const unknownKeyTTL = time.Minute

// unknownKeyMax bounds the unknown ids remembered; beyond it they start
// over (the throttle of failed authentications, auththrottle.go, bounds
// how fast one address can send new ones).
const unknownKeyMax = 10000

// keyCache remembers API key records, so that authenticating a request
// costs no database round trip. Every request still verifies its secret
// against the record's hash, and its revocation and expiry against the
// clock. It remembers too the public ids no key has (unknownKeyTTL).
type keyCache struct {
	mu      sync.Mutex
	entries map[string]cachedKey
	unknown map[string]time.Time // public id → when it was found to be no key's
	now     func() time.Time
	// forgets counts forget calls: a record read before a key was forgotten
	// is not kept, even if its read ends after.
	forgets uint64
}

type cachedKey struct {
	rec     store.APIKey
	fetched time.Time
}

func newKeyCache(now func() time.Time) *keyCache {
	return &keyCache{entries: map[string]cachedKey{}, unknown: map[string]time.Time{}, now: now}
}

// get returns the record of the key with the public id, from the cache or
// from load (which is cached if it succeeds, and remembered as unknown if
// it fails with store.ErrNotFound).
func (c *keyCache) get(ctx context.Context, publicID string, load func(context.Context, string) (store.APIKey, error)) (store.APIKey, error) {
	now := c.now()
	c.mu.Lock()
	e, ok := c.entries[publicID]
	missed, unknown := c.unknown[publicID]
	forgets := c.forgets
	c.mu.Unlock()
	if ok && now.Sub(e.fetched) < keyCacheTTL {
		return e.rec, nil
	}
	if unknown && now.Sub(missed) < unknownKeyTTL {
		return store.APIKey{}, fmt.Errorf("api key %s: %w (remembered)", publicID, store.ErrNotFound)
	}
	rec, err := load(ctx, publicID)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return rec, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.forgets != forgets {
		return rec, err // forgotten meanwhile: what was read may be stale
	}
	if err != nil {
		if len(c.unknown) >= unknownKeyMax {
			clear(c.unknown)
		}
		c.unknown[publicID] = now
		return rec, err
	}
	if len(c.entries) >= keyCacheMax {
		clear(c.entries)
	}
	c.entries[publicID] = cachedKey{rec: rec, fetched: now}
	return rec, nil
}

// forget drops a key, or what was remembered of its id being no key's, so
// its next use reads it again.
func (c *keyCache) forget(publicID string) {
	c.mu.Lock()
	delete(c.entries, publicID)
	delete(c.unknown, publicID)
	c.forgets++
	c.mu.Unlock()
}

// Notify takes a notification from another process (see
// store.InstanceParams): a revoked key is forgotten at once, and so is a
// new key's id remembered as unknown, and so are the
// issuers of a tenant that removed one (or was removed).
func (s *Server) Notify(n store.Notification) {
	switch n.Channel {
	case store.KeyRevokedChannel, store.KeyCreatedChannel:
		s.keys.forget(n.Payload)
	case store.IssuerChangedChannel:
		s.tokens.ForgetTenant(n.Payload)
	}
}
