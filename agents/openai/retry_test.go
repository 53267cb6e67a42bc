package openai

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name   string
		header map[string]string
		want   time.Duration
		ok     bool
	}{
		{"none", nil, 0, false},
		{"seconds", map[string]string{"Retry-After": "7"}, 7 * time.Second, true},
		{"fractional seconds", map[string]string{"Retry-After": "1.5"}, 1500 * time.Millisecond, true},
		{"zero", map[string]string{"Retry-After": "0"}, 0, true},
		{"milliseconds first", map[string]string{"Retry-After-Ms": "250", "Retry-After": "9"}, 250 * time.Millisecond, true},
		{"bad milliseconds fall back", map[string]string{"Retry-After-Ms": "soon", "Retry-After": "2"}, 2 * time.Second, true},
		{"HTTP date", map[string]string{"Retry-After": "Wed, 01 Jan 2025 12:00:30 GMT"}, 30 * time.Second, true},
		{"HTTP date in the past", map[string]string{"Retry-After": "Wed, 01 Jan 2025 11:00:00 GMT"}, 0, true},
		{"negative", map[string]string{"Retry-After": "-3"}, 0, false},
		{"garbage", map[string]string{"Retry-After": "later"}, 0, false},
		{"absurd is clamped, not overflowed", map[string]string{"Retry-After": "1e300"}, 24 * time.Hour, true},
	}
	for _, tt := range tests {
		h := http.Header{}
		for k, v := range tt.header {
			h.Set(k, v)
		}
		got, ok := parseRetryAfter(h, now)
		if got != tt.want || ok != tt.ok {
			t.Errorf("%s: got %v, %v; want %v, %v", tt.name, got, ok, tt.want, tt.ok)
		}
	}
}

func TestRetryable(t *testing.T) {
	opErr := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	tests := []struct {
		err  error
		want bool
	}{
		{&StatusError{StatusCode: 429}, true},
		{&StatusError{StatusCode: 500}, true},
		{&StatusError{StatusCode: 503}, true},
		{&StatusError{StatusCode: 400}, false},
		{&StatusError{StatusCode: 401}, false},
		{&StatusError{StatusCode: 404}, false},
		{&StatusError{StatusCode: 408}, false},
		{&IdleTimeoutError{After: time.Second}, true},
		{fmt.Errorf("Post: %w", opErr), true},
		{fmt.Errorf("the stream broke: %w", io.ErrUnexpectedEOF), true},
		{io.EOF, true},
		{errIncomplete, true},
		{syscall.ECONNRESET, true},
		{&StreamError{Message: "overloaded"}, false},
		{context.Canceled, false},
		{errors.New("invalid character 'x' looking for beginning of value"), false},
	}
	for _, tt := range tests {
		if got := retryable(tt.err); got != tt.want {
			t.Errorf("retryable(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}

func TestBackoff(t *testing.T) {
	for attempt := range 12 {
		top := min(baseDelay<<min(attempt, 10), maxDelay)
		for range 50 {
			if d := backoff(attempt); d < top/2 || d > top {
				t.Fatalf("backoff(%d) = %v, want within [%v, %v]", attempt, d, top/2, top)
			}
		}
	}
	if d, ok := retryDelay(&StatusError{StatusCode: 429, retryAfter: 2 * time.Minute, hasRetryAfter: true}, 0); ok {
		t.Errorf("a 2 minute Retry-After was accepted (%v)", d)
	}
}

func TestErrorMessage(t *testing.T) {
	long := strings.Repeat("é", 400)
	tests := []struct{ body, want string }{
		{`{"error":{"message":"Rate limit reached","type":"requests"}}`, "Rate limit reached"},
		{`{"error":"model 'llama9' not found"}`, "model 'llama9' not found"},
		{`{"object":"error","message":"context too long","code":400}`, "context too long"},
		{`{"detail":"Not authenticated"}`, "Not authenticated"},
		{`{"detail":[{"loc":["body","messages"],"msg":"field required"}]}`, `[{"loc":["body","messages"],"msg":"field required"}]`},
		{"<html>\n<h1>502   Bad Gateway</h1>\n</html>", "<html> <h1>502 Bad Gateway</h1> </html>"},
		{"", ""},
		{`{"error":{"message":"` + long + `"}}`, long[:500] + "…"},
	}
	for _, tt := range tests {
		if got := errorMessage([]byte(tt.body)); got != tt.want {
			t.Errorf("errorMessage(%.40q) = %.60q, want %.60q", tt.body, got, tt.want)
		}
	}
}

func TestScrub(t *testing.T) {
	base := fmt.Errorf("wrapped: %w", io.ErrUnexpectedEOF)
	err := scrub(fmt.Errorf("GET https://x/?key=sk-1 failed: %w", base), "sk-1", "")
	if strings.Contains(err.Error(), "sk-1") || !strings.Contains(err.Error(), "[redacted]") {
		t.Errorf("scrub: %v", err)
	}
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("scrub broke the error chain")
	}
	if scrub(base, "", "absent") != base {
		t.Errorf("scrub wrapped an error with nothing to remove")
	}
}

func TestImageNote(t *testing.T) {
	tests := []struct{ url, want string }{
		{"https://example.com/a.png", "[image not shown: X cannot carry images (https://example.com/a.png)]"},
		{"data:image/webp;base64,AAAA", "[image not shown: X cannot carry images (inline image/webp data)]"},
		{"data:,AAAA", "[image not shown: X cannot carry images (inline unknown type data)]"},
	}
	for _, tt := range tests {
		if got := imageNote(tt.url, "X"); got != tt.want {
			t.Errorf("imageNote(%q) = %q, want %q", tt.url, got, tt.want)
		}
	}
}
