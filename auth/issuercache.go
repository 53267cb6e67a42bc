package auth

import (
	"context"
	"crypto"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/MicahParks/keyfunc/v3"
	"github.com/golang-jwt/jwt/v5"
)

// Bounds of the verifier's caches: beyond them, a cache starts over.
const (
	issuerLookupsMax = 10000
	issuerKeysMax    = 1000
	// negativeIssuerTTL is how long "no issuer is registered for this" is
	// remembered: long enough that garbage tokens do not each cost a
	// query, short enough that a newly registered issuer works at once.
	negativeIssuerTTL = 5 * time.Second
)

// issuerLookup is a remembered answer of IssuerFinder.
type issuerLookup struct {
	issuers []Issuer
	fetched time.Time
}

func lookupKey(iss string, audiences []string) string {
	sorted := slices.Clone(audiences)
	slices.Sort(sorted)
	return iss + "\x00" + strings.Join(sorted, "\x00")
}

// issuers returns the issuers registered for iss and the audiences, from
// the cache or from Find.
func (v *Verifier) issuers(ctx context.Context, iss string, audiences []string) ([]Issuer, error) {
	key := lookupKey(iss, audiences)
	now := v.cfg.Now()
	v.mu.Lock()
	e, ok := v.lookups[key]
	forgets := v.forgets
	v.mu.Unlock()
	ttl := v.cfg.IssuerTTL
	if ok && len(e.issuers) == 0 {
		ttl = min(ttl, negativeIssuerTTL)
	}
	if ok && now.Sub(e.fetched) < ttl {
		return e.issuers, nil
	}
	if v.cfg.Find == nil {
		return nil, nil
	}
	found, err := v.cfg.Find(ctx, iss, audiences)
	if err != nil {
		return nil, fmt.Errorf("find token issuers: %w", err)
	}
	v.mu.Lock()
	// An answer read while a tenant's issuers were being forgotten may be
	// stale: it is used once, not kept.
	if v.forgets == forgets {
		if len(v.lookups) >= issuerLookupsMax {
			clear(v.lookups)
		}
		v.lookups[key] = issuerLookup{issuers: found, fetched: now}
	}
	v.mu.Unlock()
	return found, nil
}

// ForgetTenant drops everything remembered of a tenant's issuers: called
// when one of them was removed, or the tenant was (store.IssuerChangedChannel).
func (v *Verifier) ForgetTenant(tenantID string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.forgets++
	for k, e := range v.lookups {
		for _, iss := range e.issuers {
			if iss.TenantID == tenantID {
				delete(v.lookups, k)
				break
			}
		}
	}
	for id, k := range v.keys {
		if k.issuer.TenantID == tenantID {
			k.stop()
			delete(v.keys, id)
		}
	}
}

// issuerKeys are the keys of one issuer: parsed PEM keys, or a key set
// fetched and kept fresh from its JWKS URL. They are made on first use.
type issuerKeys struct {
	issuer Issuer
	once   sync.Once
	static []crypto.PublicKey
	jwks   keyfunc.Keyfunc
	err    error
	// ctx lives as long as the keys are kept; stop ends it, and with it
	// the key set's refreshes.
	ctx  context.Context
	stop func()
}

// keysOf returns the keys of an issuer, made once per process (and again
// if its registration changed).
func (v *Verifier) keysOf(iss Issuer) *issuerKeys {
	v.mu.Lock()
	k, ok := v.keys[iss.ID]
	if ok && (k.issuer.JWKSURL != iss.JWKSURL || !slices.Equal(k.issuer.PublicKeys, iss.PublicKeys)) {
		k.stop()
		ok = false
	}
	if !ok {
		if len(v.keys) >= issuerKeysMax {
			for _, old := range v.keys {
				old.stop()
			}
			clear(v.keys)
		}
		ctx, stop := context.WithCancel(v.life)
		k = &issuerKeys{issuer: iss, ctx: ctx, stop: stop}
		v.keys[iss.ID] = k
	}
	v.mu.Unlock()
	// The first use loads them; uses at the same time wait for it.
	k.once.Do(func() { k.load(v) })
	return k
}

// load parses the issuer's keys or starts its key set.
func (k *issuerKeys) load(v *Verifier) {
	if k.issuer.JWKSURL != "" {
		k.jwks, k.err = v.newJWKS(k.ctx, k.issuer.JWKSURL)
		return
	}
	for i, text := range k.issuer.PublicKeys {
		key, err := ParsePublicKeyPEM(text)
		if err != nil {
			// Registration checks every key; one that fails here is
			// skipped, not fatal to the others.
			v.log.Warn("an issuer's public key does not parse", "issuer", k.issuer.ID, "key", i, "err", err)
			continue
		}
		k.static = append(k.static, key)
	}
}

// errNoKey: none of an issuer's keys fits the token.
var errNoKey = errors.New("no key of the issuer fits the token")

// verificationKeys returns the issuer's keys that may verify the token:
// those whose one algorithm is alg. For a key set, the token's kid picks
// the key (an unknown kid refreshes the set, at a bounded rate).
func (k *issuerKeys) verificationKeys(ctx context.Context, t *jwt.Token, alg string) (any, error) {
	if k.err != nil {
		return nil, k.err
	}
	var candidates []crypto.PublicKey
	if k.jwks == nil {
		candidates = k.static
	} else {
		found, err := k.jwks.KeyfuncCtx(ctx)(t)
		if err != nil {
			return nil, err
		}
		if set, ok := found.(jwt.VerificationKeySet); ok {
			for _, key := range set.Keys {
				candidates = append(candidates, key)
			}
		} else {
			candidates = []crypto.PublicKey{found}
		}
	}
	var set jwt.VerificationKeySet
	for _, key := range candidates {
		if a, err := AlgorithmFor(key); err == nil && a == alg {
			set.Keys = append(set.Keys, key)
		}
	}
	if len(set.Keys) == 0 {
		return nil, errNoKey
	}
	return set, nil
}
