package httpapi

import (
	"net/http/httptest"
	"net/netip"
	"testing"
)

// X-Forwarded-For is believed only from a trusted proxy, and only as far
// as the first hop that is not one: what stands left of it the client
// wrote itself.
func TestClientAddrBelievesOnlyTrustedProxies(t *testing.T) {
	trusted, err := ParseTrustedProxies("10.0.0.0/8, 192.0.2.7, fd00::/8")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, peer string
		xff        []string
		trusted    []netip.Prefix
		want       string
	}{
		{"no proxy trusted: the peer, whatever the header", "198.51.100.1:4000", []string{"203.0.113.9"}, nil, "198.51.100.1"},
		{"an untrusted peer's header is ignored", "198.51.100.1:4000", []string{"203.0.113.9"}, trusted, "198.51.100.1"},
		{"a trusted peer: the hop left of it", "10.1.2.3:4000", []string{"203.0.113.9"}, trusted, "203.0.113.9"},
		{"through trusted proxies to the first untrusted hop", "10.1.2.3:4000", []string{"1.1.1.1, 203.0.113.9, 192.0.2.7"}, trusted, "203.0.113.9"},
		{"the client's own forgery on the left is not believed", "10.1.2.3:4000", []string{"10.9.9.9, 203.0.113.9"}, trusted, "203.0.113.9"},
		{"several header lines read as one list", "10.1.2.3:4000", []string{"203.0.113.9", "10.5.5.5"}, trusted, "203.0.113.9"},
		{"a hop that is no address stops at the last trusted one", "10.1.2.3:4000", []string{"203.0.113.9, junk, 10.5.5.5"}, trusted, "10.5.5.5"},
		{"no header: the trusted peer", "10.1.2.3:4000", nil, trusted, "10.1.2.3"},
		{"every hop trusted: the leftmost", "10.1.2.3:4000", []string{"10.7.7.7"}, trusted, "10.7.7.7"},
		{"IPv6 peer trusted", "[fd00::1]:4000", []string{"2001:db8::5"}, trusted, "2001:db8::5"},
		{"IPv4 in IPv6 is IPv4", "[::ffff:10.1.2.3]:4000", []string{"::ffff:203.0.113.9"}, trusted, "203.0.113.9"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/sessions", nil)
			r.RemoteAddr = tt.peer
			for _, v := range tt.xff {
				r.Header.Add("X-Forwarded-For", v)
			}
			if got := clientAddr(r, tt.trusted); got.String() != tt.want {
				t.Errorf("client address %s, want %s", got, tt.want)
			}
		})
	}
}

func TestParseTrustedProxies(t *testing.T) {
	got, err := ParseTrustedProxies(" 10.0.0.0/8 ,192.0.2.7,, 2001:db8::/32, ::ffff:172.16.0.0/108")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"10.0.0.0/8", "192.0.2.7/32", "2001:db8::/32", "172.16.0.0/12"}
	if len(got) != len(want) {
		t.Fatalf("%v, want %v", got, want)
	}
	for i := range want {
		if got[i].String() != want[i] {
			t.Errorf("entry %d: %s, want %s", i, got[i], want[i])
		}
	}
	for _, bad := range []string{"10.0.0.0/33", "proxy.internal", "fe80::1%eth0", "10.0.0"} {
		if _, err := ParseTrustedProxies(bad); err == nil {
			t.Errorf("%q was accepted", bad)
		}
	}
}
