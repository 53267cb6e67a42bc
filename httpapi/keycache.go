package httpapi

import (
	"context"
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

// keyCache remembers API key records, so that authenticating a request
// costs no database round trip. Every request still verifies its secret
// against the record's hash, and its revocation and expiry against the
// clock.
type keyCache struct {
	mu      sync.Mutex
	entries map[string]cachedKey
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
	return &keyCache{entries: map[string]cachedKey{}, now: now}
}

// get returns the record of the key with the public id, from the cache or
// from load (which is cached if it succeeds).
func (c *keyCache) get(ctx context.Context, publicID string, load func(context.Context, string) (store.APIKey, error)) (store.APIKey, error) {
	now := c.now()
	c.mu.Lock()
	e, ok := c.entries[publicID]
	forgets := c.forgets
	c.mu.Unlock()
	if ok && now.Sub(e.fetched) < keyCacheTTL {
		return e.rec, nil
	}
	rec, err := load(ctx, publicID)
	if err != nil {
		return rec, err
	}
	c.mu.Lock()
	if c.forgets == forgets {
		if len(c.entries) >= keyCacheMax {
			clear(c.entries)
		}
		c.entries[publicID] = cachedKey{rec: rec, fetched: now}
	}
	c.mu.Unlock()
	return rec, nil
}

// forget drops a key, so its next use reads it again.
func (c *keyCache) forget(publicID string) {
	c.mu.Lock()
	delete(c.entries, publicID)
	c.forgets++
	c.mu.Unlock()
}

// Notify takes a notification from another process (see
// store.InstanceParams): a revoked key is forgotten at once, and so are the
// issuers of a tenant that removed one (or was removed).
func (s *Server) Notify(n store.Notification) {
	switch n.Channel {
	case store.KeyRevokedChannel:
		s.keys.forget(n.Payload)
	case store.IssuerChangedChannel:
		s.tokens.ForgetTenant(n.Payload)
	}
}
