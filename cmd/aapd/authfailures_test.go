package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"testing"
	"time"

	"github.com/aapd/aapd/auth"
	"github.com/aapd/aapd/httpapi"
	"github.com/aapd/aapd/store"
	"github.com/aapd/aapd/store/storetest"
)

// unknownKeys makes n well-formed API keys that no tenant has.
func unknownKeys(t *testing.T, n int) []auth.NewKey {
	t.Helper()
	keys := make([]auth.NewKey, n)
	for i := range keys {
		k, err := auth.GenerateKey()
		if err != nil {
			t.Fatal(err)
		}
		keys[i] = k
	}
	return keys
}

// from is an HTTP client whose connections leave from the local address
// (a loopback address of its own: 127.0.0.2, …), as a second client
// machine would.
func from(t *testing.T, local string) *http.Client {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
	tr := &http.Transport{DialContext: d.DialContext}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// get sends GET path with the key (and headers, name then value) through
// hc, and returns the status, the Retry-After and the problem type.
func get(t *testing.T, hc *http.Client, base, path, key string, headers ...string) (status int, retryAfter, problem string) {
	t.Helper()
	req, err := http.NewRequest("GET", base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode >= 400 {
		var p struct{ Type string }
		if err := json.Unmarshal(b, &p); err != nil {
			t.Fatalf("GET %s: %d with a body that is no problem: %s", path, res.StatusCode, b)
		}
		problem = p.Type
	}
	return res.StatusCode, res.Header.Get("Retry-After"), problem
}

// 300 requests in a row with keys no tenant has: the first of them, up to
// the burst, are 401; then the address is refused with 429 and
// Retry-After, before any key is looked at. The database is asked about
// each unknown key once at most. Another address is not held, and a key
// made after it was looked up as unknown works at once.
func TestFailedAuthenticationIsThrottledPerAddressAndUnknownKeysAreReadOnce(t *testing.T) {
	const burst = 40
	s := startServer(t, func(c *Config) {
		c.Clients.AuthThrottle = httpapi.AuthThrottle{Burst: burst, Rate: 0.01}
	})
	good := s.newTenant(t)
	bad := unknownKeys(t, 5)
	before := readMetrics(t, s.base).sum("aapd_api_key_lookups_total", `result="unknown"`)

	here := http.DefaultClient // 127.0.0.1
	var unauthorized, throttled int
	for i := range 300 {
		status, retry, typ := get(t, here, s.base, "/sessions", bad[i%len(bad)].Secret)
		switch {
		case i < burst:
			if status != http.StatusUnauthorized || typ != problemType("unauthorized") {
				t.Fatalf("bad key %d, within the burst: %d %s, want 401 unauthorized", i, status, typ)
			}
			unauthorized++
		default:
			if status != http.StatusTooManyRequests || typ != problemType("auth-throttled") {
				t.Fatalf("bad key %d, past the burst of %d: %d %s, want 429 auth-throttled", i, burst, status, typ)
			}
			if n, err := fmt.Sscan(retry, new(int)); n != 1 || err != nil || retry == "0" {
				t.Fatalf("bad key %d: Retry-After %q, want whole seconds ≥ 1", i, retry)
			}
			throttled++
		}
	}
	lookups := readMetrics(t, s.base).sum("aapd_api_key_lookups_total", `result="unknown"`) - before
	t.Logf("300 bad-key requests: %d 401, %d 429; %v lookups of unknown keys", unauthorized, throttled, lookups)
	if lookups > float64(len(bad)) || lookups < 1 {
		t.Errorf("%v database lookups of %d distinct unknown keys, want between 1 and %d", lookups, len(bad), len(bad))
	}

	// The throttled address is refused whatever it sends, a good key too
	// (a guesser learns nothing while it waits)…
	if status, _, typ := get(t, here, s.base, "/sessions", good.key); status != http.StatusTooManyRequests {
		t.Errorf("a good key from the throttled address: %d %s, want 429", status, typ)
	}
	// …and X-Forwarded-For from a peer no one trusts changes nothing.
	if status, _, _ := get(t, here, s.base, "/sessions", good.key, "X-Forwarded-For", "198.51.100.9"); status != http.StatusTooManyRequests {
		t.Errorf("a forged X-Forwarded-For escaped the throttle: %d", status)
	}
	// Another address is served.
	other := from(t, "127.0.0.2")
	if status, _, typ := get(t, other, s.base, "/sessions", good.key); status != http.StatusOK {
		t.Errorf("a good key from another address: %d %s, want 200", status, typ)
	}
	// A key made with an id that was looked up as unknown works at once,
	// in every process: its creation is notified.
	k := unknownKeys(t, 1)[0]
	if status, _, _ := get(t, other, s.base, "/sessions", k.Secret); status != http.StatusUnauthorized {
		t.Fatalf("an unknown key from another address: %d, want 401", status)
	}
	tn := storetest.NewTenant(t, s.Store)
	if _, err := s.Store.APIKeyCreate(context.Background(), store.APIKeyCreateParams{TenantID: tn.ID, PublicID: k.PublicID, Hash: k.Hash, Name: "later"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the new key to be served", 10*time.Second, func() bool {
		status, _, _ := get(t, other, s.base, "/sessions", k.Secret)
		return status == http.StatusOK
	})
}

// Behind a proxy the operator trusts, the client is the address its
// X-Forwarded-For names: one client past its burst is throttled, another
// behind the same proxy is served.
func TestAuthThrottleBehindATrustedProxyCountsTheForwardedClient(t *testing.T) {
	const burst = 5
	s := startServer(t, func(c *Config) {
		c.Clients.AuthThrottle = httpapi.AuthThrottle{Burst: burst, Rate: 0.01}
		c.Clients.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
	})
	good := s.newTenant(t)
	bad := unknownKeys(t, 1)[0].Secret
	proxy := http.DefaultClient // 127.0.0.1, trusted
	for i := range burst {
		if status, _, _ := get(t, proxy, s.base, "/sessions", bad, "X-Forwarded-For", "203.0.113.7"); status != http.StatusUnauthorized {
			t.Fatalf("bad key %d: %d, want 401", i, status)
		}
	}
	if status, retry, typ := get(t, proxy, s.base, "/sessions", bad, "X-Forwarded-For", "203.0.113.7"); status != http.StatusTooManyRequests || retry == "" {
		t.Fatalf("past the burst: %d %s, Retry-After %q; want 429 with Retry-After", status, typ, retry)
	}
	if status, _, typ := get(t, proxy, s.base, "/sessions", good.key, "X-Forwarded-For", "203.0.113.8"); status != http.StatusOK {
		t.Errorf("another client behind the proxy: %d %s, want 200", status, typ)
	}
	// What the client wrote left of the proxy's own entry is not believed.
	if status, _, _ := get(t, proxy, s.base, "/sessions", good.key, "X-Forwarded-For", "203.0.113.8, 203.0.113.7"); status != http.StatusTooManyRequests {
		t.Errorf("a client that forged another address left of its own escaped the throttle: %d", status)
	}
	// A peer that is not the trusted proxy is judged by its own address,
	// whatever header it sends.
	if status, _, _ := get(t, from(t, "127.0.0.2"), s.base, "/sessions", good.key, "X-Forwarded-For", "203.0.113.7"); status != http.StatusOK {
		t.Errorf("an untrusted peer's X-Forwarded-For was believed: %d", status)
	}
}
