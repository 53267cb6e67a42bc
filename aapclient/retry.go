package aapclient

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// RetryPolicy says how requests a server refused for now are sent again:
// 409 (a turn is already running on the session), 429 and 503, and requests
// that got no answer when sending them again is safe (reads, and POSTs that
// carry an Idempotency-Key). Every other error is returned at once. The
// same policy bounds how often a dropped stream is resumed in a row.
type RetryPolicy struct {
	// MaxAttempts is how many times a request is sent at most; 1 turns
	// retries off.
	MaxAttempts int
	// MinDelay is the first wait when the server gave no Retry-After; each
	// further wait doubles, up to MaxDelay, with jitter.
	MinDelay time.Duration
	MaxDelay time.Duration
	// MaxRetryAfter is the longest Retry-After the client waits for: a
	// server asking for more gets its error returned instead.
	MaxRetryAfter time.Duration
}

// DefaultRetryPolicy is the policy of a client made without
// WithRetryPolicy: five attempts over a few seconds.
var DefaultRetryPolicy = RetryPolicy{
	MaxAttempts:   5,
	MinDelay:      200 * time.Millisecond,
	MaxDelay:      5 * time.Second,
	MaxRetryAfter: 30 * time.Second,
}

func (p RetryPolicy) withDefaults() RetryPolicy {
	if p.MaxAttempts <= 0 {
		p.MaxAttempts = DefaultRetryPolicy.MaxAttempts
	}
	if p.MinDelay <= 0 {
		p.MinDelay = DefaultRetryPolicy.MinDelay
	}
	if p.MaxDelay <= 0 {
		p.MaxDelay = max(DefaultRetryPolicy.MaxDelay, p.MinDelay)
	}
	if p.MaxRetryAfter <= 0 {
		p.MaxRetryAfter = DefaultRetryPolicy.MaxRetryAfter
	}
	return p
}

// next decides, after attempt number attempt failed with err, whether to
// send again and after how long. resend says whether a request that got no
// answer may be sent again.
func (p RetryPolicy) next(attempt int, err error, resend bool) (time.Duration, bool) {
	if attempt >= p.MaxAttempts {
		return 0, false
	}
	var (
		apiErr *Error
		te     *transportError
	)
	switch {
	case errors.As(err, &apiErr):
		if !apiErr.Temporary() {
			return 0, false
		}
		if apiErr.RetryAfter > 0 {
			return apiErr.RetryAfter, apiErr.RetryAfter <= p.MaxRetryAfter
		}
	case errors.As(err, &te):
		if !resend {
			return 0, false
		}
	default:
		return 0, false
	}
	return p.backoff(attempt), true
}

// backoff is the wait after the attempt-th failure without a Retry-After:
// exponential, capped, with "equal jitter" so that clients refused together
// do not come back together.
func (p RetryPolicy) backoff(attempt int) time.Duration {
	d := p.MinDelay
	for i := 1; i < attempt && d < p.MaxDelay; i++ {
		d *= 2
	}
	d = min(d, p.MaxDelay)
	return d/2 + rand.N(d/2+1)
}

// beforeReopen applies the policy to a stream that ended for the drops-th
// time in a row without bringing an event: past MaxAttempts it is an
// error; from the second drop on, it first waits the backoff.
func (c *Client) beforeReopen(ctx context.Context, drops int) error {
	p := c.retry
	if drops > p.MaxAttempts {
		return fmt.Errorf("the stream ended %d times in a row without an event", drops)
	}
	if drops > 1 {
		return c.sleep(ctx, p.backoff(drops-1))
	}
	return nil
}

// sleepContext waits for d, or until ctx is done.
func sleepContext(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		return nil
	}
}
