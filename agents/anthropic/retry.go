package anthropic

import (
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
)

// Failures of a stream that are not errors of the API.
var (
	// errIdleTimeout: the response did not start, or its stream went
	// quiet, for longer than Config.Timeout.
	errIdleTimeout = errors.New("the response stalled")
	// errStreamCut: the connection closed cleanly before message_stop.
	errStreamCut = errors.New("the stream ended before message_stop")
)

// protocolError is a stream this package cannot make sense of. Sending the
// same request again would not help, so it is never retried.
type protocolError struct{ msg string }

func (e *protocolError) Error() string { return "unexpected stream: " + e.msg }

// retryable reports whether err is worth sending the request again for:
// rate limiting, server errors (529 overloaded included), error events of
// those kinds and connection failures. Whether anything was already
// received is the caller's concern.
func retryable(err error) bool {
	var pe *protocolError
	if errors.As(err, &pe) {
		return false
	}
	var apiErr *anthropic.Error
	if errors.As(err, &apiErr) {
		if apiErr.Response != nil {
			switch apiErr.Response.Header.Get("x-should-retry") {
			case "true":
				return true
			case "false":
				return false
			}
		}
		if apiErr.StatusCode == http.StatusTooManyRequests || apiErr.StatusCode >= 500 {
			return true
		}
		// An error event inside a 200 stream carries its kind in the body.
		switch apiErr.Type() {
		case "overloaded_error", "api_error", "rate_limit_error":
			return true
		}
		return false
	}
	if errors.Is(err, errIdleTimeout) || errors.Is(err, errStreamCut) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return true
	}
	var netErr net.Error // includes *url.Error from the HTTP client
	return errors.As(err, &netErr)
}

// retryDelay is how long to wait before retry number attempt+1: what the
// server asked for in retry-after-ms or retry-after, else exponential
// backoff with jitter. ok is false when the server asks for more than
// maxRetryAfter.
func (m *Model) retryDelay(err error, attempt int) (d time.Duration, ok bool) {
	var apiErr *anthropic.Error
	if errors.As(err, &apiErr) && apiErr.Response != nil {
		if d, found := retryAfter(apiErr.Response.Header, time.Now()); found {
			if d > maxRetryAfter {
				return 0, false
			}
			return d, true
		}
	}
	d = m.backoff
	for range attempt {
		d *= 2
		if d >= maxBackoff {
			d = maxBackoff
			break
		}
	}
	if q := int64(d / 4); q > 0 {
		d -= time.Duration(rand.Int64N(q))
	}
	return d, true
}

// retryAfter reads the wait a response asks for: retry-after-ms in
// milliseconds, or retry-after in seconds or as an HTTP date.
func retryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	if v := h.Get("retry-after-ms"); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 {
			return time.Duration(ms * float64(time.Millisecond)), true
		}
	}
	v := h.Get("retry-after")
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil && s >= 0 {
		return time.Duration(s * float64(time.Second)), true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}
