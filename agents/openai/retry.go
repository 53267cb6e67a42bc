package openai

import (
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Backoff bounds. A retry waits about baseDelay, then twice that, and so
// on up to maxDelay, with jitter so that many sessions hit by the same
// outage do not come back in lockstep.
const (
	baseDelay = 500 * time.Millisecond
	maxDelay  = 8 * time.Second
	// maxRetryAfter is the longest wait a provider may ask for. A longer
	// Retry-After (a quota reset in an hour, say) fails the call at once:
	// a turn that silently waits that long looks hung to the client.
	maxRetryAfter = time.Minute
)

// retryable reports whether err is worth another attempt: the provider is
// rate limiting or failing (429, 5xx), or the connection failed, went
// silent or was cut. Everything else (a rejected request, a bad key, an
// error the provider reported in the stream) would fail the same way again.
func retryable(err error) bool {
	var status *StatusError
	if errors.As(err, &status) {
		return status.StatusCode == http.StatusTooManyRequests || status.StatusCode >= 500
	}
	var idle *IdleTimeoutError
	var opErr *net.OpError
	switch {
	case errors.As(err, &idle), errors.As(err, &opErr):
		return true
	case errors.Is(err, errIncomplete), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return true
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.EPIPE):
		return true
	}
	return false
}

// retryDelay is how long to wait before retry number attempt+1. It is false
// when the provider asked for a wait longer than maxRetryAfter.
func retryDelay(err error, attempt int) (time.Duration, bool) {
	var status *StatusError
	if errors.As(err, &status) && status.hasRetryAfter {
		return status.retryAfter, status.retryAfter <= maxRetryAfter
	}
	return backoff(attempt), true
}

// backoff is the exponential delay of a retry, between half and all of
// baseDelay·2^attempt (capped at maxDelay).
func backoff(attempt int) time.Duration {
	d := maxDelay
	if attempt < 10 {
		d = min(baseDelay<<attempt, maxDelay)
	}
	return d/2 + rand.N(d/2+1)
}

// parseRetryAfter reads the wait a provider asks for: OpenAI's
// retry-after-ms (milliseconds) or the standard Retry-After (seconds or an
// HTTP date).
func parseRetryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 {
			return seconds(ms / 1000), true
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil && s >= 0 {
		return seconds(s), true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}

// seconds converts a wait in seconds, clamped so that absurd values stay
// absurd (and are refused) instead of overflowing into negative ones.
func seconds(s float64) time.Duration {
	const ceiling = 24 * 60 * 60
	return time.Duration(min(s, ceiling) * float64(time.Second))
}
