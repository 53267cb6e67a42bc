package auth

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/MicahParks/keyfunc/v3"
	"golang.org/x/time/rate"
)

// JWKS defaults (VerifierConfig).
const (
	// DefaultJWKSRefreshInterval is how often a key set in use is fetched
	// again, whatever happens.
	DefaultJWKSRefreshInterval = time.Hour
	// DefaultJWKSMinRefresh bounds the fetches a token with an unknown kid
	// causes: at most one per issuer per this interval. Tokens with made-up
	// kids cannot turn aapd into a flood of requests to an issuer.
	DefaultJWKSMinRefresh = time.Minute
	// DefaultJWKSTimeout bounds one fetch of a key set, and how long a
	// request waits for one.
	DefaultJWKSTimeout = 5 * time.Second
	// DefaultJWKSMaxBytes bounds the size of a key set: real ones are a few
	// kilobytes.
	DefaultJWKSMaxBytes = 256 << 10
)

// maxJWKSRedirects bounds the redirects a key set fetch follows; each is
// checked like the registered URL.
const maxJWKSRedirects = 3

// newJWKSClient returns the HTTP client key sets are fetched with: every
// phase of a fetch has a deadline, bodies are cut at maxBytes, and every
// URL it requests (redirects too) is checked with ValidateJWKSURL again, at
// fetch time, so that no registered URL reaches anything else.
func newJWKSClient(timeout time.Duration, maxBytes int64) *http.Client {
	base := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: timeout}).DialContext,
		TLSHandshakeTimeout:   timeout,
		ResponseHeaderTimeout: timeout,
		MaxIdleConnsPerHost:   2,
		IdleConnTimeout:       90 * time.Second,
	}
	return &http.Client{
		Timeout:   timeout,
		Transport: jwksTransport{base: base, maxBytes: maxBytes},
		CheckRedirect: func(_ *http.Request, via []*http.Request) error {
			if len(via) > maxJWKSRedirects {
				return fmt.Errorf("more than %d redirects", maxJWKSRedirects)
			}
			return nil
		},
	}
}

// jwksTransport checks where a request goes and how much comes back.
type jwksTransport struct {
	base     http.RoundTripper
	maxBytes int64
}

// RoundTrip implements http.RoundTripper.
func (t jwksTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := ValidateJWKSURL(req.URL.String()); err != nil {
		return nil, err
	}
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	if resp.ContentLength > t.maxBytes {
		resp.Body.Close()
		return nil, fmt.Errorf("key set of %d bytes: at most %d are read", resp.ContentLength, t.maxBytes)
	}
	resp.Body = &limitedBody{rc: resp.Body, left: t.maxBytes}
	return resp, nil
}

// errJWKSTooLarge: a key set's body went on beyond the limit.
var errJWKSTooLarge = errors.New("key set larger than the limit")

// limitedBody fails a read that goes beyond left bytes, rather than
// quietly cutting the body (which would only fail later, as bad JSON).
type limitedBody struct {
	rc   io.ReadCloser
	left int64
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		// One byte more tells a body that ends exactly at the limit from
		// one that goes on.
		var one [1]byte
		if n, _ := b.rc.Read(one[:]); n > 0 {
			return 0, errJWKSTooLarge
		}
		return 0, io.EOF
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *limitedBody) Close() error { return b.rc.Close() }

// newJWKS starts the key set of one issuer: fetched now (a failure is
// logged and the set starts empty), again every refresh interval, and again
// when a token names a kid the set lacks, at most once per min refresh. Its
// refreshing stops when ctx ends.
func (v *Verifier) newJWKS(ctx context.Context, url string) (keyfunc.Keyfunc, error) {
	if err := ValidateJWKSURL(url); err != nil {
		return nil, err
	}
	tolerateFirstFailure := true
	kf, err := keyfunc.NewDefaultOverrideCtx(ctx, []string{url}, keyfunc.Override{
		Client:                    v.jwksClient,
		HTTPTimeout:               v.cfg.JWKSTimeout,
		NoErrorReturnFirstHTTPReq: &tolerateFirstFailure,
		// A request waits for a refresh only if one is due within this;
		// beyond, the unknown kid is refused at once.
		RateLimitWaitMax:  v.cfg.JWKSTimeout,
		RefreshInterval:   v.cfg.JWKSRefreshInterval,
		RefreshUnknownKID: rate.NewLimiter(rate.Every(v.cfg.JWKSMinRefresh), 1),
		RefreshErrorHandlerFunc: func(u string) func(context.Context, error) {
			return func(ctx context.Context, err error) {
				v.log.WarnContext(ctx, "fetch an issuer's key set", "url", u, "err", err)
			}
		},
	})
	if err != nil {
		return nil, fmt.Errorf("key set %s: %w", url, err)
	}
	return kf, nil
}
