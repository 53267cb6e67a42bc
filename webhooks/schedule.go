package webhooks

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/aapd/aapd/store"
)

// Schedule is how long a delivery waits after each failed attempt before
// the next: ten attempts over about three days, then it fails.
var Schedule = []time.Duration{
	5 * time.Second, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour, 5 * time.Hour,
	10 * time.Hour, 14 * time.Hour, 20 * time.Hour, 24 * time.Hour,
}

// Bounds of a receiver's Retry-After.
const (
	MinRetryAfter = time.Second
	MaxRetryAfter = 24 * time.Hour
)

// FailingLimit is how long an endpoint may fail every attempt before it is
// disabled.
const FailingLimit = 5 * 24 * time.Hour

// jitter is the most a delay of the schedule is moved, up or down, as a
// fraction of it: deliveries that failed together do not all come back at
// once.
const jitter = 0.1

// answer is what an attempt got: a status and its Retry-After, or an error.
type answer struct {
	status     int
	retryAfter string
	err        error
}

// verdict is what an attempt decides for its delivery and its endpoint.
type verdict struct {
	state   string    // store.WebhookDelivered, WebhookPending or WebhookFailed
	next    time.Time // when pending: the next attempt
	disable string    // when set: disable the endpoint, for this reason
}

// decide judges attempt number n (from 1) of a delivery, made at now, to an
// endpoint failing since failingSince (nil if its last attempt succeeded).
// rnd returns a number in [0, 1). Only a 2xx succeeds; 410 Gone disables
// the endpoint, and so do failures that have lasted FailingLimit; a 429 or
// 503 with Retry-After sets the next delay (bounded by MinRetryAfter and
// MaxRetryAfter) instead of the schedule.
func decide(a answer, n int, now time.Time, failingSince *time.Time, rnd func() float64) verdict {
	switch {
	case a.err == nil && a.status >= 200 && a.status < 300:
		return verdict{state: store.WebhookDelivered}
	case a.err == nil && a.status == http.StatusGone:
		return verdict{state: store.WebhookFailed, disable: "the endpoint answered 410 Gone"}
	case failingSince != nil && now.Sub(*failingSince) >= FailingLimit:
		return verdict{state: store.WebhookFailed, disable: "every attempt failed for 5 days"}
	case n > len(Schedule):
		return verdict{state: store.WebhookFailed}
	}
	delay, ok := time.Duration(0), false
	if a.err == nil && (a.status == http.StatusTooManyRequests || a.status == http.StatusServiceUnavailable) {
		delay, ok = retryAfter(a.retryAfter, now)
	}
	if !ok {
		step := Schedule[n-1]
		delay = step + time.Duration((rnd()*2-1)*jitter*float64(step))
	}
	return verdict{state: store.WebhookPending, next: now.Add(delay)}
}

// retryAfter reads a Retry-After header (seconds, or an HTTP date), bounded
// by MinRetryAfter and MaxRetryAfter; false if there is none to read.
func retryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	var d time.Duration
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs < 0 {
			return 0, false
		}
		d = time.Duration(min(secs, int64(MaxRetryAfter/time.Second))) * time.Second
	} else if at, err := http.ParseTime(v); err == nil {
		d = at.Sub(now)
	} else {
		return 0, false
	}
	return min(max(d, MinRetryAfter), MaxRetryAfter), true
}
