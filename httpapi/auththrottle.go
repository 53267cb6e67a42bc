package httpapi

import (
	"net/netip"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// AuthThrottle bounds the failed authentications a client address may make
// (docs/operations.md): a burst of them, then one more each 1/Rate seconds.
// A request from an address past its burst is refused with 429
// auth-throttled before its credential is looked at, so a guesser or a
// misconfigured client costs the server no lookup, and learns nothing.
type AuthThrottle struct {
	// Burst is the failures an address may make in a row; 0 turns the
	// throttle off.
	Burst int
	// Rate is the failures per second an address is forgiven.
	Rate float64
}

// Defaults of aapd serve's throttle (--auth-failure-burst, --auth-failure-rate):
// a client that keeps failing is held to one attempt each 5 s after 20.
const (
	DefaultAuthFailureBurst = 20
	DefaultAuthFailureRate  = 0.2
)

// authThrottleMax bounds the addresses remembered. Past it, the addresses
// that have been forgiven every failure are dropped; if that is not
// enough, all are (every address starts over with a full burst).
const authThrottleMax = 100_000

// authThrottle counts failed authentications by client address, a token
// bucket each. IPv6 addresses are counted by /64, the least a host is
// given: an address of its own each costs a client nothing.
type authThrottle struct {
	cfg AuthThrottle
	now func() time.Time

	mu      sync.Mutex
	buckets map[netip.Addr]*rate.Limiter
}

func newAuthThrottle(cfg AuthThrottle, now func() time.Time) *authThrottle {
	if cfg.Burst <= 0 || cfg.Rate <= 0 {
		return nil
	}
	return &authThrottle{cfg: cfg, now: now, buckets: map[netip.Addr]*rate.Limiter{}}
}

// throttleKey is what an address is counted by.
func throttleKey(a netip.Addr) netip.Addr {
	if a.Is6() {
		p, _ := a.Prefix(64)
		return p.Addr()
	}
	return a
}

// wait says how long the address must wait before its next attempt: zero
// when it may try now.
func (t *authThrottle) wait(a netip.Addr) time.Duration {
	if t == nil {
		return 0
	}
	t.mu.Lock()
	lim := t.buckets[throttleKey(a)]
	t.mu.Unlock()
	if lim == nil {
		return 0
	}
	tokens := lim.TokensAt(t.now())
	if tokens >= 1 {
		return 0
	}
	return time.Duration((1 - tokens) / t.cfg.Rate * float64(time.Second))
}

// failed counts a failed authentication of the address.
func (t *authThrottle) failed(a netip.Addr) {
	if t == nil {
		return
	}
	now := t.now()
	key := throttleKey(a)
	t.mu.Lock()
	lim := t.buckets[key]
	if lim == nil {
		if len(t.buckets) >= authThrottleMax {
			t.prune(now)
		}
		lim = rate.NewLimiter(rate.Limit(t.cfg.Rate), t.cfg.Burst)
		t.buckets[key] = lim
	}
	t.mu.Unlock()
	lim.AllowN(now, 1)
}

// prune drops the addresses whose every failure is forgiven, or all of
// them if none is. t.mu is held.
func (t *authThrottle) prune(now time.Time) {
	for k, lim := range t.buckets {
		if lim.TokensAt(now) >= float64(t.cfg.Burst) {
			delete(t.buckets, k)
		}
	}
	if len(t.buckets) >= authThrottleMax {
		clear(t.buckets)
	}
}
