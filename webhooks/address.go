package webhooks

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
)

// No server-side request forgery: a tenant's webhook URL must not reach
// the server's own network. The check is made on the address actually
// dialled, in the dialer (publicOnly), so a name that resolves to a public
// address when the endpoint is registered and to a private one when it is
// called (DNS rebinding) is refused all the same. AllowPrivate (the
// --webhook-allow-private flag) lifts it, for tests and on-premises
// receivers.

// notPublic are the ranges, besides loopback, private, link-local,
// multicast and unspecified addresses, that are not the public internet,
// or may lead back into a private network (NAT64, 6to4, Teredo).
var notPublic = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"), // carrier-grade NAT
	netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("192.0.2.0/24"),
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("198.51.100.0/24"),
	netip.MustParsePrefix("203.0.113.0/24"),
	netip.MustParsePrefix("240.0.0.0/4"),
	netip.MustParsePrefix("64:ff9b::/96"),
	netip.MustParsePrefix("64:ff9b:1::/48"),
	netip.MustParsePrefix("2001::/32"),
	netip.MustParsePrefix("2001:db8::/32"),
	netip.MustParsePrefix("2002::/16"),
	netip.MustParsePrefix("fec0::/10"),
}

// Public reports whether addr is an address of the public internet.
func Public(addr netip.Addr) bool {
	addr = addr.Unmap()
	if !addr.IsGlobalUnicast() || addr.IsPrivate() {
		return false
	}
	for _, p := range notPublic {
		if p.Contains(addr) {
			return false
		}
	}
	return true
}

// ErrNotPublic is an address the dialer refused: not a public one.
var ErrNotPublic = errors.New("not a public address (--webhook-allow-private admits loopback and private addresses)")

// publicOnly is a net.Dialer's Control: it refuses to connect to an
// address that is not public. It sees the address the connection is made
// to, after the name was resolved.
func publicOnly(_, address string, _ syscall.RawConn) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return fmt.Errorf("dial %s: %w", address, err)
	}
	addr, err := netip.ParseAddr(host)
	if err != nil {
		return fmt.Errorf("dial %s: %w", address, err)
	}
	if !Public(addr) {
		return fmt.Errorf("%s: %w", addr, ErrNotPublic)
	}
	return nil
}

// MaxURLLength bounds an endpoint's URL.
const MaxURLLength = 2048

// CheckURL refuses a URL webhooks may not be sent to: one that is not
// https (http is admitted with allowPrivate, for tests and on-premises
// receivers), has no host, carries credentials or a fragment, or names a
// loopback or private address (a literal one, or localhost) when
// allowPrivate is off. A name is resolved only when it is dialled.
func CheckURL(raw string, allowPrivate bool) error {
	if len(raw) > MaxURLLength {
		return fmt.Errorf("at most %d bytes", MaxURLLength)
	}
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() || u.Opaque != "" {
		return errors.New("must be an absolute URL: https://host/path")
	}
	switch {
	case u.Scheme == "https":
	case u.Scheme == "http" && allowPrivate:
	case u.Scheme == "http":
		return errors.New("must be https (http is admitted only with --webhook-allow-private)")
	default:
		return fmt.Errorf("must be https, not %s", u.Scheme)
	}
	host := u.Hostname()
	switch {
	case host == "":
		return errors.New("has no host")
	case u.User != nil:
		return errors.New("must not carry credentials: receivers check the signature instead")
	case u.Fragment != "" || strings.Contains(raw, "#"):
		return errors.New("must not have a fragment (#…)")
	case allowPrivate:
		return nil
	}
	if addr, err := netip.ParseAddr(host); err == nil && !Public(addr) {
		return fmt.Errorf("names %s, which is %w", addr, ErrNotPublic)
	}
	if h := strings.ToLower(strings.TrimSuffix(host, ".")); h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return fmt.Errorf("names %s, which is %w", host, ErrNotPublic)
	}
	return nil
}
