package quota

import (
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

const (
	// PrincipalShare is the part of its tenant's rate and burst each
	// principal (an API key, an end user) may use while more than one
	// principal of the tenant is active: no one of them can starve the
	// others. A principal alone uses the tenant's whole budget, so a tenant
	// served by one backend key gets the limit it was given.
	PrincipalShare = 0.5
	// idleAfter is how long a principal stays active (and its bucket kept)
	// after its last request. A bucket is also kept until it is full again:
	// a bucket evicted then is the same as a new one, so eviction never
	// hands out tokens.
	idleAfter = time.Minute
	// sweepEvery is how often idle buckets are looked for.
	sweepEvery = 30 * time.Second
	// maxPrincipals bounds the principal buckets held. Beyond it, a new
	// principal is held to its tenant's bucket alone until idle ones go.
	maxPrincipals = 100_000
)

// RateLimiter holds requests to their tenant's rate, and, while a tenant
// has several active principals, each principal to PrincipalShare of it.
// Its memory is bounded: idle buckets are evicted.
type RateLimiter struct {
	now func() time.Time

	mu         sync.Mutex
	tenants    map[string]*tenantBuckets
	principals int // buckets in all tenants
	sweptAt    time.Time
}

type tenantBuckets struct {
	bucket
	principals map[string]*bucket
}

type bucket struct {
	lim  *rate.Limiter
	used time.Time
}

// Decision is what Allow decided, with the state of the limits that apply.
type Decision struct {
	Allowed bool
	// RetryAfter is, for a refused request, when it would be allowed.
	RetryAfter time.Duration
	// Policies are the limits applied: the tenant's, then the principal's
	// while it is held to its share.
	Policies []Policy
}

// Policy is a token bucket's figures and what is left in it.
type Policy struct {
	// Name is "tenant" or "principal".
	Name  string
	Rate  float64 // tokens per second
	Burst int
	// Remaining is the whole tokens left.
	Remaining int
	// UntilFull is how long until the bucket is full again.
	UntilFull time.Duration
}

// NewRateLimiter returns a rate limiter; now is its clock (nil for
// time.Now).
func NewRateLimiter(now func() time.Time) *RateLimiter {
	if now == nil {
		now = time.Now
	}
	return &RateLimiter{now: now, tenants: map[string]*tenantBuckets{}}
}

// Allow decides whether a request of the principal of the tenant may go,
// the tenant's limit being rps requests per second with a burst (both
// above zero). A refused request takes no token.
func (l *RateLimiter) Allow(tenantID, principal string, rps float64, burst int) Decision {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.sweptAt) >= sweepEvery {
		l.sweep(now)
	}
	tb := l.tenants[tenantID]
	if tb == nil {
		tb = &tenantBuckets{bucket: bucket{lim: rate.NewLimiter(rate.Limit(rps), burst)}, principals: map[string]*bucket{}}
		l.tenants[tenantID] = tb
	}
	tb.set(now, rps, burst)
	tb.used = now
	pb := tb.principals[principal]
	if pb == nil && l.principals < maxPrincipals {
		pb = &bucket{}
		tb.principals[principal] = pb
		l.principals++
	}
	prps, pburst := rps*PrincipalShare, max(1, int(math.Ceil(float64(burst)*PrincipalShare)))
	if pb != nil {
		if pb.lim == nil {
			pb.lim = rate.NewLimiter(rate.Limit(prps), pburst)
		}
		pb.set(now, prps, pburst)
		pb.used = now
	}
	shared := pb != nil && len(tb.principals) > 1

	r := tb.lim.ReserveN(now, 1)
	wait := r.DelayFrom(now)
	var pr *rate.Reservation
	if shared {
		pr = pb.lim.ReserveN(now, 1)
		wait = max(wait, pr.DelayFrom(now))
	}
	if wait > 0 {
		r.CancelAt(now)
		if pr != nil {
			pr.CancelAt(now)
		}
	}
	d := Decision{Allowed: wait == 0, RetryAfter: wait, Policies: []Policy{tb.policy("tenant", now)}}
	if shared {
		d.Policies = append(d.Policies, pb.policy("principal", now))
	}
	return d
}

// set gives the bucket new figures, when its tenant's limits changed.
func (b *bucket) set(now time.Time, rps float64, burst int) {
	if b.lim.Limit() != rate.Limit(rps) {
		b.lim.SetLimitAt(now, rate.Limit(rps))
	}
	if b.lim.Burst() != burst {
		b.lim.SetBurstAt(now, burst)
	}
}

func (b *bucket) policy(name string, now time.Time) Policy {
	rps, burst := float64(b.lim.Limit()), b.lim.Burst()
	tokens := b.lim.TokensAt(now)
	return Policy{
		Name: name, Rate: rps, Burst: burst,
		Remaining: max(0, int(math.Floor(tokens))),
		UntilFull: time.Duration(max(0, float64(burst)-tokens) / rps * float64(time.Second)),
	}
}

// idle reports whether the bucket may go: unused for idleAfter and full.
func (b *bucket) idle(now time.Time) bool {
	full := time.Duration(float64(b.lim.Burst()) / float64(b.lim.Limit()) * float64(time.Second))
	return now.Sub(b.used) >= max(idleAfter, full)
}

// sweep evicts idle buckets. l.mu is held.
func (l *RateLimiter) sweep(now time.Time) {
	l.sweptAt = now
	for id, tb := range l.tenants {
		for p, pb := range tb.principals {
			if pb.idle(now) {
				delete(tb.principals, p)
				l.principals--
			}
		}
		if len(tb.principals) == 0 && tb.idle(now) {
			delete(l.tenants, id)
		}
	}
}
