package httpapi

import (
	"fmt"
	"math"
	"net/http"
	"strings"

	"github.com/aapd/aapd/auth"
	"github.com/aapd/aapd/quota"
)

// The rate limit headers, as draft-ietf-httpapi-ratelimit-headers-10 writes
// them (docs/tenancy.md).
const (
	RateLimitHeader       = "RateLimit"
	RateLimitPolicyHeader = "RateLimit-Policy"
)

// limitRate holds an authenticated request to its tenant's request rate,
// and to its principal's share of it (quota.RateLimiter). A request over
// either is refused with 429, Retry-After and the RateLimit headers; a
// request within them carries the headers too, so a client can slow down
// before it is refused. A tenant without a rate limit pays one map lookup.
func (s *Server) limitRate(write ProblemWriter, next http.Handler) http.Handler {
	if s.cfg.Limits == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, _ := auth.FromContext(r.Context())
		lim := s.cfg.Limits.For(r.Context(), p.TenantID)
		if lim.RequestsPerSecond <= 0 {
			next.ServeHTTP(w, r)
			return
		}
		d := s.rates.Allow(p.TenantID, principalKey(p), lim.RequestsPerSecond, lim.Burst)
		setRateLimitHeaders(w.Header(), d.Policies)
		if !d.Allowed {
			prob := probRateLimited.with("this %s sends requests faster than its limit; retry after the delay in Retry-After", limitedBy(d))
			prob.retryAfter = max(1, int(math.Ceil(d.RetryAfter.Seconds())))
			s.failWith(write, w, r, prob)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// principalKey names the principal whose requests share a bucket: the end
// user a token acts for, else the API key.
func principalKey(p auth.Principal) string {
	if p.Subject != "" {
		return "sub:" + p.Subject
	}
	return "key:" + p.KeyID
}

// limitedBy names the limit that refused a request: the principal's when
// its own bucket is empty, else the tenant's.
func limitedBy(d quota.Decision) string {
	for _, p := range d.Policies {
		if p.Name == "principal" && p.Remaining == 0 {
			return "key or user"
		}
	}
	return "tenant"
}

// setRateLimitHeaders writes each bucket as a quota policy and its state.
// A token bucket of rate r and burst b is advertised as a policy of
// q = max(b, r·w) requests per window w = max(1, b/r) seconds (rounded):
// its sustained rate, never below its burst. The state's r is the whole
// tokens left and t the seconds until the bucket is full again.
func setRateLimitHeaders(h http.Header, policies []quota.Policy) {
	if len(policies) == 0 {
		return
	}
	var policy, state []string
	for _, p := range policies {
		window := max(1, math.Round(float64(p.Burst)/p.Rate))
		q := max(p.Burst, int(math.Round(p.Rate*window)))
		policy = append(policy, fmt.Sprintf("%q;q=%d;w=%d", p.Name, q, int(window)))
		state = append(state, fmt.Sprintf("%q;r=%d;t=%d", p.Name, p.Remaining, int(math.Ceil(p.UntilFull.Seconds()))))
	}
	h.Set(RateLimitPolicyHeader, strings.Join(policy, ", "))
	h.Set(RateLimitHeader, strings.Join(state, ", "))
}
