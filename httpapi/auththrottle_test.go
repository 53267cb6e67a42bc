package httpapi

import (
	"net/netip"
	"testing"
	"time"
)

// An address has its burst of failures, then waits for each to be
// forgiven; another address is not held by it, and an IPv6 client counts
// by its /64.
func TestAuthThrottle(t *testing.T) {
	now := time.Unix(1000, 0)
	th := newAuthThrottle(AuthThrottle{Burst: 3, Rate: 0.5}, func() time.Time { return now })
	a, b := netip.MustParseAddr("198.51.100.1"), netip.MustParseAddr("198.51.100.2")
	for i := range 3 {
		if w := th.wait(a); w != 0 {
			t.Fatalf("failure %d: told to wait %s within the burst", i, w)
		}
		th.failed(a)
	}
	if w := th.wait(a); w != 2*time.Second {
		t.Errorf("after the burst: wait %s, want 2s (one failure forgiven each 2s)", w)
	}
	if w := th.wait(b); w != 0 {
		t.Errorf("another address waits %s", w)
	}
	now = now.Add(2 * time.Second)
	if w := th.wait(a); w != 0 {
		t.Errorf("after a failure was forgiven: wait %s", w)
	}
	v6, sameNet := netip.MustParseAddr("2001:db8:1:2::1"), netip.MustParseAddr("2001:db8:1:2:ffff::9")
	for range 3 {
		th.failed(v6)
	}
	if th.wait(sameNet) == 0 {
		t.Error("another address of the same /64 is not held")
	}
	if th.wait(netip.MustParseAddr("2001:db8:1:3::1")) != 0 {
		t.Error("an address of another /64 is held")
	}
	if newAuthThrottle(AuthThrottle{}, time.Now).wait(a) != 0 {
		t.Error("the zero throttle holds an address")
	}
}

// The addresses remembered are bounded: those forgiven every failure go
// first.
func TestAuthThrottleBoundsTheAddressesItRemembers(t *testing.T) {
	now := time.Unix(1000, 0)
	th := newAuthThrottle(AuthThrottle{Burst: 2, Rate: 1}, func() time.Time { return now })
	held := netip.MustParseAddr("198.51.100.1")
	for i := range authThrottleMax - 1 {
		th.failed(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}))
	}
	now = now.Add(time.Hour) // every one of them forgiven
	th.failed(held)
	th.failed(held)
	th.failed(netip.MustParseAddr("198.51.100.2")) // the map is full: prune
	if n := len(th.buckets); n != 2 {
		t.Errorf("%d addresses remembered after a prune, want 2", n)
	}
	if th.wait(held) == 0 {
		t.Error("an address still held was dropped")
	}
}
