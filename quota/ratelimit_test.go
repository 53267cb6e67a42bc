package quota

import (
	"fmt"
	"testing"
	"time"
)

// clock is a test's hand-driven time.
type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }

func newClock() *clock { return &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }

// size reports the buckets held, tenants' and principals'.
func (l *RateLimiter) size() (tenants, principals int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.tenants), l.principals
}

func TestRateLimiterBurstThenRate(t *testing.T) {
	c := newClock()
	l := NewRateLimiter(c.now)
	for i := range 5 {
		d := l.Allow("t", "k", 2, 5)
		if !d.Allowed {
			t.Fatalf("request %d of a burst of 5 refused", i)
		}
		if p := d.Policies[0]; p.Name != "tenant" || p.Remaining != 4-i || p.Burst != 5 || p.Rate != 2 {
			t.Fatalf("request %d: policy %+v", i, p)
		}
	}
	d := l.Allow("t", "k", 2, 5)
	if d.Allowed || d.RetryAfter != 500*time.Millisecond {
		t.Fatalf("sixth request: %+v, want refused for 500ms", d)
	}
	if p := d.Policies[0]; p.Remaining != 0 || p.UntilFull != 2500*time.Millisecond {
		t.Fatalf("refused: policy %+v", p)
	}
	// A refusal takes no token: half a second later one is there.
	c.advance(500 * time.Millisecond)
	if !l.Allow("t", "k", 2, 5).Allowed {
		t.Fatal("refused after the retry delay")
	}
}

// A tenant's budget is its own.
func TestRateLimiterTenantsApart(t *testing.T) {
	l := NewRateLimiter(newClock().now)
	if !l.Allow("a", "k1", 1, 1).Allowed || l.Allow("a", "k1", 1, 1).Allowed {
		t.Fatal("tenant a: want one allowed, then refused")
	}
	if !l.Allow("b", "k2", 1, 1).Allowed {
		t.Fatal("tenant b refused for tenant a's requests")
	}
}

// A lone principal uses the tenant's whole budget; once another is active,
// each is held to PrincipalShare of it, so the newcomer still gets through.
func TestRateLimiterPrincipalShare(t *testing.T) {
	c := newClock()
	l := NewRateLimiter(c.now)
	for i := range 10 {
		if d := l.Allow("t", "greedy", 10, 10); !d.Allowed || len(d.Policies) != 1 {
			t.Fatalf("lone principal, request %d: %+v", i, d)
		}
	}
	c.advance(time.Second) // the tenant's bucket is full again
	// Now two are active: the greedy one gets 5 of the 10.
	if d := l.Allow("t", "other", 10, 10); !d.Allowed || len(d.Policies) != 2 || d.Policies[1].Burst != 5 {
		t.Fatalf("second principal: %+v", d)
	}
	allowed := 0
	for range 10 {
		if l.Allow("t", "greedy", 10, 10).Allowed {
			allowed++
		}
	}
	if allowed != 5 {
		t.Fatalf("greedy principal got %d of the tenant's 9 left, want its share of 5", allowed)
	}
	for i := range 4 {
		if !l.Allow("t", "other", 10, 10).Allowed {
			t.Fatalf("the other principal refused at request %d while within its share", i)
		}
	}
}

// New figures apply at once to existing buckets.
func TestRateLimiterNewFigures(t *testing.T) {
	l := NewRateLimiter(newClock().now)
	if !l.Allow("t", "k", 1, 1).Allowed || l.Allow("t", "k", 1, 1).Allowed {
		t.Fatal("want one allowed, then refused")
	}
	d := l.Allow("t", "k", 100, 100)
	if p := d.Policies[0]; p.Rate != 100 || p.Burst != 100 {
		t.Fatalf("policy %+v after new figures", p)
	}
}

// Idle buckets go, so memory follows the active principals, not every one
// ever seen; a full bucket evicted is the same as a new one.
func TestRateLimiterEvictsIdleBuckets(t *testing.T) {
	c := newClock()
	l := NewRateLimiter(c.now)
	for i := range 1000 {
		l.Allow(fmt.Sprint("t", i%10), fmt.Sprint("k", i), 5, 10)
	}
	if tenants, principals := l.size(); tenants != 10 || principals != 1000 {
		t.Fatalf("%d tenants, %d principals", tenants, principals)
	}
	c.advance(idleAfter)
	l.Allow("t0", "fresh", 5, 10)
	if tenants, principals := l.size(); tenants != 1 || principals != 1 {
		t.Fatalf("after a minute idle: %d tenants, %d principals held", tenants, principals)
	}
	// A slow bucket is kept until it is full again, even past idleAfter.
	l.Allow("slow", "k", 0.01, 10)
	c.advance(2 * idleAfter)
	l.Allow("t0", "fresh", 5, 10)
	if tenants, _ := l.size(); tenants != 2 {
		t.Fatalf("a bucket not yet full was evicted: %d tenants held", tenants)
	}
}
