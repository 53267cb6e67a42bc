package httpapi

import (
	"fmt"
	"net/http"
	"net/netip"
	"strings"
)

// clientAddr is the address a request comes from, for what judges a client
// by its address (the throttle of failed authentications): the peer of
// the connection, unless that peer is one of the proxies the operator
// trusts (Config.TrustedProxies), in which case X-Forwarded-For is read
// from its right end, skipping the trusted proxies, and the first address
// that is not one is the client's. Whatever stands left of it was written
// by the client itself and is never believed; an entry that is not an
// address ends the walk at the last trusted hop, so a forged entry can
// name no one else.
//
// This is the "rightmost trusted range" rule of
// github.com/realclientip/realclientip-go, which does not decide whether
// the peer itself may be believed; with that gate it is these few lines
// over net/netip, so aapd takes no dependency for it.
func clientAddr(r *http.Request, trusted []netip.Prefix) netip.Addr {
	peer, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return netip.Addr{} // not a TCP peer (a test's recorder): one address for all
	}
	addr := peer.Addr().Unmap().WithZone("")
	if !trustedAddr(addr, trusted) {
		return addr
	}
	hops := r.Header.Values("X-Forwarded-For")
	for i := len(hops) - 1; i >= 0; i-- {
		entries := strings.Split(hops[i], ",")
		for j := len(entries) - 1; j >= 0; j-- {
			hop, err := netip.ParseAddr(strings.TrimSpace(entries[j]))
			if err != nil {
				return addr
			}
			addr = hop.Unmap().WithZone("")
			if !trustedAddr(addr, trusted) {
				return addr
			}
		}
	}
	return addr
}

func trustedAddr(a netip.Addr, trusted []netip.Prefix) bool {
	for _, p := range trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// ParseTrustedProxies reads a comma-separated list of addresses and CIDR
// prefixes (--trusted-proxies): "10.0.0.0/8, 192.0.2.7, fd00::/8". An
// address stands for itself alone.
func ParseTrustedProxies(list string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range strings.Split(list, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		if strings.Contains(s, "/") {
			p, err := netip.ParsePrefix(s)
			if err != nil {
				return nil, fmt.Errorf("trusted proxy %q: %w", s, err)
			}
			if p.Addr().Is4In6() && p.Bits() >= 96 {
				p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
			}
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" {
			return nil, fmt.Errorf("trusted proxy %q: not an address or a CIDR prefix", s)
		}
		a = a.Unmap()
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}
