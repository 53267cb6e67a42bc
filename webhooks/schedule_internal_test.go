package webhooks

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/aapd/aapd/store"
)

// The verdict of an attempt, rule by rule.
func TestWebhookAttemptVerdicts(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	recently, longAgo := now.Add(-time.Hour), now.Add(-FailingLimit)
	low, high := func() float64 { return 0 }, func() float64 { return 0.999999 }
	cases := []struct {
		name         string
		a            answer
		n            int
		failingSince *time.Time
		rnd          func() float64
		state        string
		min, max     time.Duration // of the next attempt's delay
		disable      bool
	}{
		{"2xx delivers", answer{status: 204}, 1, nil, low, store.WebhookDelivered, 0, 0, false},
		{"299 delivers", answer{status: 299}, 3, &longAgo, low, store.WebhookDelivered, 0, 0, false},
		{"500 waits 5 s, less a tenth at most", answer{status: 500}, 1, nil, low, store.WebhookPending, 4500 * time.Millisecond, 4500 * time.Millisecond, false},
		{"500 waits 5 s, plus a tenth at most", answer{status: 500}, 1, nil, high, store.WebhookPending, 5499 * time.Millisecond, 5500 * time.Millisecond, false},
		{"a 3xx is a failure", answer{status: 302}, 2, nil, low, store.WebhookPending, 270 * time.Second, 270 * time.Second, false},
		{"a network error is a failure", answer{err: errors.New("connection refused")}, 9, &recently, low, store.WebhookPending, 1296 * time.Minute, 1296 * time.Minute, false},
		{"the tenth failure ends it", answer{status: 500}, 10, &recently, low, store.WebhookFailed, 0, 0, false},
		{"410 disables", answer{status: 410}, 1, nil, low, store.WebhookFailed, 0, 0, true},
		{"5 days of failures disable", answer{status: 500}, 2, &longAgo, low, store.WebhookFailed, 0, 0, true},
		{"429 with Retry-After", answer{status: 429, retryAfter: "120"}, 1, nil, low, store.WebhookPending, 2 * time.Minute, 2 * time.Minute, false},
		{"503 with Retry-After 0 waits 1 s", answer{status: 503, retryAfter: "0"}, 1, nil, low, store.WebhookPending, time.Second, time.Second, false},
		{"503 with a huge Retry-After waits 24 h", answer{status: 503, retryAfter: "9999999999999"}, 1, nil, low, store.WebhookPending, 24 * time.Hour, 24 * time.Hour, false},
		{"429 with an HTTP date", answer{status: 429, retryAfter: now.Add(time.Hour).Format(http.TimeFormat)}, 1, nil, low, store.WebhookPending, time.Hour, time.Hour, false},
		{"429 with a date past waits 1 s", answer{status: 429, retryAfter: now.Add(-time.Hour).Format(http.TimeFormat)}, 1, nil, low, store.WebhookPending, time.Second, time.Second, false},
		{"429 with a bad Retry-After follows the schedule", answer{status: 429, retryAfter: "soon"}, 1, nil, low, store.WebhookPending, 4500 * time.Millisecond, 4500 * time.Millisecond, false},
		{"500 with Retry-After follows the schedule", answer{status: 500, retryAfter: "120"}, 1, nil, low, store.WebhookPending, 4500 * time.Millisecond, 4500 * time.Millisecond, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := decide(c.a, c.n, now, c.failingSince, c.rnd)
			if v.state != c.state || (v.disable != "") != c.disable {
				t.Fatalf("verdict %+v, want %s (disable %v)", v, c.state, c.disable)
			}
			if c.state != store.WebhookPending {
				return
			}
			if d := v.next.Sub(now); d < c.min || d > c.max {
				t.Errorf("next attempt in %v, want %v to %v", d, c.min, c.max)
			}
		})
	}
}

// The schedule: ten attempts, the last about three days after the first.
func TestWebhookScheduleIsTenAttemptsOverThreeDays(t *testing.T) {
	var total time.Duration
	for _, d := range Schedule {
		total += d
	}
	if len(Schedule) != 9 || total != 75*time.Hour+35*time.Minute+5*time.Second {
		t.Errorf("%d retries over %v", len(Schedule), total)
	}
}
