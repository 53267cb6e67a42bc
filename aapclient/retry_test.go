package aapclient

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeServer is a RoundTripper answering from a script, one answer per
// request, and recording what it was sent.
type fakeServer struct {
	mu      sync.Mutex
	answers []func(*http.Request) (*http.Response, error)
	sent    []*http.Request
	bodies  []string
}

func (f *fakeServer) RoundTrip(req *http.Request) (*http.Response, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var body string
	if req.Body != nil {
		b, _ := io.ReadAll(req.Body)
		body = string(b)
	}
	f.sent, f.bodies = append(f.sent, req), append(f.bodies, body)
	if len(f.answers) == 0 {
		return nil, errors.New("fake server: no answer left")
	}
	a := f.answers[0]
	f.answers = f.answers[1:]
	return a(req)
}

// answer returns a scripted answer of the status, headers (name, value…)
// and body.
func answer(status int, body string, headers ...string) func(*http.Request) (*http.Response, error) {
	return func(req *http.Request) (*http.Response, error) {
		h := http.Header{}
		for i := 0; i+1 < len(headers); i += 2 {
			h.Set(headers[i], headers[i+1])
		}
		return &http.Response{StatusCode: status, Status: http.StatusText(status), Header: h,
			Body: io.NopCloser(strings.NewReader(body)), Request: req}, nil
	}
}

func refuse(err error) func(*http.Request) (*http.Response, error) {
	return func(*http.Request) (*http.Response, error) { return nil, err }
}

const problemJSON = "application/problem+json"

// fakeClient returns a client of a fake server whose waits are recorded,
// not slept.
func fakeClient(t *testing.T, f *fakeServer, opts ...Option) (*Client, *[]time.Duration) {
	t.Helper()
	c, err := New("http://aap.test/v1/", append([]Option{WithHTTPClient(&http.Client{Transport: f}), WithAPIKey("k")}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	var waits []time.Duration
	c.now = func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }
	c.sleep = func(ctx context.Context, d time.Duration) error {
		waits = append(waits, d)
		return ctx.Err()
	}
	return c, &waits
}

// 503 and 429 are retried after the server's Retry-After, in seconds or as
// a date; every attempt sends the same body and Idempotency-Key.
func TestRetryAfterHonoured(t *testing.T) {
	f := &fakeServer{answers: []func(*http.Request) (*http.Response, error){
		answer(503, `{"type":"https://aapd.dev/problems/overloaded","title":"Server busy","status":503}`, "Content-Type", problemJSON, "Retry-After", "2"),
		answer(429, ``, "Retry-After", "Fri, 02 Jan 2026 03:04:12 GMT"),
		answer(409, `{"type":"https://aapd.dev/problems/turn-running","title":"A turn is already running","status":409,"turnId":"turn_1"}`, "Content-Type", problemJSON),
		answer(201, `{"sessionId":"sess_1"}`, "Content-Type", "application/json"),
	}}
	c, waits := fakeClient(t, f)
	out, err := c.CreateSession(context.Background(), createEcho)
	if err != nil {
		t.Fatal(err)
	}
	if out.SessionID != "sess_1" {
		t.Fatalf("session %q", out.SessionID)
	}
	if len(*waits) != 3 || (*waits)[0] != 2*time.Second || (*waits)[1] != 7*time.Second {
		t.Fatalf("waits %v, want 2s (Retry-After: 2), 7s (a date 7s ahead), then a backoff", *waits)
	}
	// The third failure's backoff: 4 × MinDelay, jittered down to half.
	if b, hi := (*waits)[2], 4*DefaultRetryPolicy.MinDelay; b < hi/2 || b > hi {
		t.Errorf("backoff without Retry-After %v, want within [%v, %v]", b, hi/2, hi)
	}
	key := f.sent[0].Header.Get("Idempotency-Key")
	if len(key) < 16 {
		t.Fatalf("generated Idempotency-Key %q", key)
	}
	for i, r := range f.sent {
		if r.Header.Get("Idempotency-Key") != key || f.bodies[i] != f.bodies[0] {
			t.Fatalf("attempt %d sent key %q body %q; the first sent %q %q", i+1, r.Header.Get("Idempotency-Key"), f.bodies[i], key, f.bodies[0])
		}
		if r.URL.String() != "http://aap.test/v1/sessions" || r.Header.Get("Authorization") != "Bearer k" {
			t.Fatalf("attempt %d: %s, Authorization %q", i+1, r.URL, r.Header.Get("Authorization"))
		}
	}
}

// The caller's key is sent as given.
func TestIdempotencyKeyGiven(t *testing.T) {
	f := &fakeServer{answers: []func(*http.Request) (*http.Response, error){answer(201, `{"sessionId":"sess_1"}`)}}
	c, _ := fakeClient(t, f)
	if _, err := c.CreateSession(context.Background(), createEcho, WithIdempotencyKey("mine-1")); err != nil {
		t.Fatal(err)
	}
	if got := f.sent[0].Header.Get("Idempotency-Key"); got != "mine-1" {
		t.Fatalf("Idempotency-Key %q", got)
	}
}

// Retries are bounded: the last refusal is returned as an *Error with its
// problem details and Retry-After.
func TestRetryGivesUp(t *testing.T) {
	busy := answer(503, `{"type":"https://aapd.dev/problems/unavailable","title":"Service unavailable","status":503,"detail":"the database is unavailable; retry shortly","requestId":"r1"}`,
		"Content-Type", problemJSON, "Retry-After", "5")
	f := &fakeServer{answers: []func(*http.Request) (*http.Response, error){busy, busy, busy}}
	c, waits := fakeClient(t, f, WithRetryPolicy(RetryPolicy{MaxAttempts: 3}))
	_, err := c.Meta(context.Background())
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v", err)
	}
	if e.Status != 503 || e.Type != "https://aapd.dev/problems/unavailable" || e.Title != "Service unavailable" ||
		e.Detail != "the database is unavailable; retry shortly" || e.RequestID != "r1" || e.RetryAfter != 5*time.Second ||
		e.Method != "GET" || e.Path != "/meta" {
		t.Fatalf("error %+v", e)
	}
	if !strings.Contains(e.Error(), "503 Service unavailable: the database is unavailable") {
		t.Errorf("message %q", e.Error())
	}
	if len(f.sent) != 3 || len(*waits) != 2 {
		t.Fatalf("%d attempts, %d waits; want 3 and 2", len(f.sent), len(*waits))
	}
}

// A Retry-After longer than the policy allows is not waited for.
func TestRetryAfterTooLong(t *testing.T) {
	f := &fakeServer{answers: []func(*http.Request) (*http.Response, error){answer(429, "slow down", "Retry-After", "3600")}}
	c, waits := fakeClient(t, f)
	_, err := c.Meta(context.Background())
	var e *Error
	if !errors.As(err, &e) || e.Status != 429 || e.RetryAfter != time.Hour || e.Body != "slow down" || e.Type != "about:blank" {
		t.Fatalf("error %#v", err)
	}
	if len(f.sent) != 1 || len(*waits) != 0 {
		t.Fatalf("%d attempts, waits %v", len(f.sent), *waits)
	}
}

// Client errors are returned at once.
func TestNoRetryOfClientErrors(t *testing.T) {
	f := &fakeServer{answers: []func(*http.Request) (*http.Response, error){
		answer(400, `{"type":"https://aapd.dev/problems/invalid-request","title":"Invalid request","status":400,"detail":"agent.name: required","field":"agent.name"}`, "Content-Type", problemJSON),
	}}
	c, _ := fakeClient(t, f)
	_, err := c.CreateSession(context.Background(), createEcho)
	var e *Error
	if !errors.As(err, &e) || e.Status != 400 || e.Field != "agent.name" || e.Temporary() {
		t.Fatalf("error %#v", err)
	}
	if len(f.sent) != 1 {
		t.Fatalf("%d attempts", len(f.sent))
	}
}

// A request that got no answer is sent again when that is safe (a read, a
// POST with an Idempotency-Key), and not otherwise (a DELETE).
func TestTransportErrors(t *testing.T) {
	lost := refuse(errors.New("connection reset by peer"))
	f := &fakeServer{answers: []func(*http.Request) (*http.Response, error){
		lost, answer(200, `{"version":3,"agents":[]}`),
		lost, answer(200, `{"stopReason":"end_turn","messages":[]}`, "Aapd-Turn-Id", "turn_1"),
		lost,
	}}
	c, waits := fakeClient(t, f)
	ctx := context.Background()
	if m, err := c.Meta(ctx); err != nil || m.Version != 3 {
		t.Fatalf("meta %+v, %v", m, err)
	}
	res, err := c.SendTurn(ctx, "sess_1", turnHi)
	if err != nil || res.TurnID != "turn_1" {
		t.Fatalf("turn %+v, %v", res, err)
	}
	if f.sent[2].Header.Get("Idempotency-Key") == "" || f.sent[2].Header.Get("Idempotency-Key") != f.sent[3].Header.Get("Idempotency-Key") {
		t.Fatal("the turn was resent without its key")
	}
	if err := c.DeleteSession(ctx, "sess_1"); err == nil || !strings.Contains(err.Error(), "connection reset") {
		t.Fatalf("delete: %v", err)
	}
	if len(f.sent) != 5 || len(*waits) != 2 {
		t.Fatalf("%d requests, %d waits", len(f.sent), len(*waits))
	}
}

// Cancelling the context ends a wait for Retry-After at once.
func TestRetryWaitCancelled(t *testing.T) {
	f := &fakeServer{answers: []func(*http.Request) (*http.Response, error){answer(503, "", "Retry-After", "20")}}
	c, err := New("http://aap.test", WithHTTPClient(&http.Client{Transport: f}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err = c.Meta(ctx)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("error %v, want the context's", err)
	}
	if !strings.Contains(err.Error(), "503") {
		t.Errorf("error %q does not say what was retried", err)
	}
}

func TestNewChecksBaseURL(t *testing.T) {
	for _, u := range []string{"", "localhost:8080", "ftp://x", "http://x/?a=1", "http://"} {
		if _, err := New(u); err == nil {
			t.Errorf("New(%q) took it", u)
		}
	}
	c, err := New("https://api.example.com/v1/")
	if err != nil || c.base != "https://api.example.com/v1" {
		t.Fatalf("base %q, %v", c.base, err)
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for v, want := range map[string]time.Duration{
		"": 0, "0": 0, "-3": 0, "x": 0, "7": 7 * time.Second, " 2 ": 2 * time.Second,
		"Fri, 02 Jan 2026 03:04:15 GMT": 10 * time.Second, "Fri, 02 Jan 2026 03:04:00 GMT": 0,
	} {
		if got := parseRetryAfter(v, now); got != want {
			t.Errorf("parseRetryAfter(%q) = %v, want %v", v, got, want)
		}
	}
}
