package anthropic

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/agents"
)

const secretKey = "sk-ant-secret-do-not-leak"

func hello() agents.ModelRequest {
	return agents.ModelRequest{Messages: agents.Messages(aap.UserMessage("hi"))}
}

// stallHeaders never starts its response.
func stallHeaders() responder {
	return func(w http.ResponseWriter, r *http.Request, release <-chan struct{}) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}
}

func TestRetries(t *testing.T) {
	tests := []struct {
		name       string
		responders []responder
		maxRetries int
		wantCalls  int
		wantDeltas string
		wantText   string
		wantErr    string // "" for success
		wantStatus int    // of the *anthropic.Error, when wantErr is set
		minWait    time.Duration
	}{{
		name:       "529 overloaded, then success: one retry, no duplicate output",
		responders: []responder{status(529, "overloaded_error"), sse(textStream("Hel", "lo")...)},
		wantCalls:  2, wantDeltas: "[Hel][lo]", wantText: "Hello",
	}, {
		name:       "429 honours retry-after-ms",
		responders: []responder{status(429, "rate_limit_error", "retry-after-ms", "150"), sse(textStream("ok")...)},
		wantCalls:  2, wantDeltas: "[ok]", wantText: "ok", minWait: 150 * time.Millisecond,
	}, {
		name:       "500 on every attempt",
		responders: []responder{status(500, "api_error")},
		wantCalls:  3, wantErr: "500", wantStatus: 500,
	}, {
		name:       "retries disabled",
		responders: []responder{status(529, "overloaded_error")},
		maxRetries: -1, wantCalls: 1, wantErr: "529", wantStatus: 529,
	}, {
		name:       "400 is not retried",
		responders: []responder{status(400, "invalid_request_error")},
		wantCalls:  1, wantErr: "invalid_request_error", wantStatus: 400,
	}, {
		name:       "401 is not retried",
		responders: []responder{status(401, "authentication_error")},
		wantCalls:  1, wantErr: "401", wantStatus: 401,
	}, {
		name:       "x-should-retry: false is obeyed",
		responders: []responder{status(503, "api_error", "x-should-retry", "false")},
		wantCalls:  1, wantErr: "503", wantStatus: 503,
	}, {
		name:       "retry-after beyond the limit is not waited for",
		responders: []responder{status(429, "rate_limit_error", "retry-after", "3600")},
		wantCalls:  1, wantErr: "wait longer", wantStatus: 429,
	}, {
		name:       "error event before any content is retried",
		responders: []responder{sse(messageStart(1, 0, 0), ping(), errorEvent("overloaded_error")), sse(textStream("ok")...)},
		wantCalls:  2, wantDeltas: "[ok]", wantText: "ok",
	}, {
		name:       "connection dropped before any content is retried",
		responders: []responder{drop(messageStart(1, 0, 0)), sse(textStream("ok")...)},
		wantCalls:  2, wantDeltas: "[ok]", wantText: "ok",
	}, {
		name:       "response that never starts times out, per attempt",
		responders: []responder{stallHeaders(), sse(textStream("late")...)},
		wantCalls:  2, wantDeltas: "[late]", wantText: "late", minWait: 100 * time.Millisecond,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t, tt.responders...)
			m := f.model(Config{APIKey: secretKey, MaxRetries: tt.maxRetries, Timeout: 100 * time.Millisecond})
			var c collector
			start := time.Now()
			resp, err := m.Generate(context.Background(), hello(), c.out)
			if n := len(f.calls()); n != tt.wantCalls {
				t.Errorf("%d requests, want %d", n, tt.wantCalls)
			}
			if got := c.String(); got != tt.wantDeltas {
				t.Errorf("deltas = %s, want %s", got, tt.wantDeltas)
			}
			if got := resp.Message.Content.PlainText(); got != tt.wantText {
				t.Errorf("text = %q, want %q", got, tt.wantText)
			}
			if time.Since(start) < tt.minWait {
				t.Errorf("returned after %s, want at least %s", time.Since(start), tt.minWait)
			}
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("err = %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want one mentioning %q", err, tt.wantErr)
			}
			if strings.Contains(err.Error(), secretKey) {
				t.Errorf("the error shows the API key: %v", err)
			}
			var apiErr *anthropic.Error
			if !errors.As(err, &apiErr) || apiErr.StatusCode != tt.wantStatus {
				t.Errorf("err = %v, want an *anthropic.Error with status %d", err, tt.wantStatus)
			}
		})
	}
}

// Once content has streamed, a failure is never retried: the response
// holds what came so far, with an error.
func TestStreamFailuresKeepPartial(t *testing.T) {
	started := flat(messageStart(9, 0, 0),
		thinkingStart(0), thinkingDelta(0, "Hmm"), signatureDelta(0, "sigP"), blockStop(0),
		textStart(1), textDelta(1, "Part"), textDelta(1, "ial"))
	tests := []struct {
		name     string
		respond  responder
		wantErr  func(error) bool
		wantMsg  string
		maxTotal time.Duration
	}{{
		name:    "error event mid-stream",
		respond: sse(flat(started, errorEvent("overloaded_error"))...),
		wantErr: func(err error) bool {
			var apiErr *anthropic.Error
			return errors.As(err, &apiErr) && apiErr.Type() == "overloaded_error"
		},
		wantMsg: `{"role":"assistant","content":[{"type":"thinking","thinking":"Hmm"},{"type":"text","text":"Partial"}]}`,
	}, {
		name:    "connection dropped mid-stream",
		respond: drop(started...),
		wantErr: func(err error) bool { return err != nil && !errors.Is(err, errIdleTimeout) },
		wantMsg: `{"role":"assistant","content":[{"type":"thinking","thinking":"Hmm"},{"type":"text","text":"Partial"}]}`,
	}, {
		name:    "stream closed before message_stop",
		respond: sse(started...),
		wantErr: func(err error) bool { return errors.Is(err, errStreamCut) },
		wantMsg: `{"role":"assistant","content":[{"type":"thinking","thinking":"Hmm"},{"type":"text","text":"Partial"}]}`,
	}, {
		name:     "stalled server: idle timeout",
		respond:  stall(started...),
		wantErr:  func(err error) bool { return errors.Is(err, errIdleTimeout) },
		wantMsg:  `{"role":"assistant","content":[{"type":"thinking","thinking":"Hmm"},{"type":"text","text":"Partial"}]}`,
		maxTotal: time.Second,
	}, {
		name: "a tool call cut short is not returned",
		respond: sse(flat(started, blockStop(1), toolStart(2, "toolu_1", "get_weather"),
			inputDelta(2, `{"location":`), errorEvent("api_error"))...),
		wantErr: func(err error) bool { return err != nil },
		wantMsg: `{"role":"assistant","content":[{"type":"thinking","thinking":"Hmm"},{"type":"text","text":"Partial"}]}`,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t, tt.respond, sse(textStream("retried")...))
			m := f.model(Config{APIKey: secretKey, Timeout: 150 * time.Millisecond})
			var c collector
			start := time.Now()
			resp, err := m.Generate(context.Background(), hello(), c.out)
			if !tt.wantErr(err) {
				t.Errorf("unexpected err: %v", err)
			}
			if err != nil && strings.Contains(err.Error(), secretKey) {
				t.Errorf("the error shows the API key: %v", err)
			}
			if n := len(f.calls()); n != 1 {
				t.Errorf("%d requests, want 1: output had started", n)
			}
			if got := c.String(); got != "~Hmm~[Part][ial]" {
				t.Errorf("deltas = %s", got)
			}
			if got := mustJSON(t, resp.Message.Message); got != tt.wantMsg {
				t.Errorf("partial =\n%s\nwant\n%s", got, tt.wantMsg)
			}
			if signatureOf(decodeExtra(resp.Message.Extra), 0, "Hmm") != "sigP" {
				t.Errorf("the completed thinking block lost its signature: extra %s", resp.Message.Extra)
			}
			if resp.Usage.InputTokens != 9 {
				t.Errorf("usage = %+v, want the input tokens reported", resp.Usage)
			}
			if tt.maxTotal > 0 && time.Since(start) > tt.maxTotal {
				t.Errorf("took %s", time.Since(start))
			}
		})
	}
}

func TestCancel(t *testing.T) {
	t.Run("mid-stream", func(t *testing.T) {
		f := newFake(t, stall(messageStart(1, 0, 0), textStart(0), textDelta(0, "first")))
		m := f.model(Config{Timeout: 10 * time.Second})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		start := time.Now()
		resp, err := m.Generate(ctx, hello(), func(d agents.ModelDelta) { cancel() })
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
		if took := time.Since(start); took > time.Second {
			t.Errorf("returned after %s", took)
		}
		if got := resp.Message.Content.PlainText(); got != "first" {
			t.Errorf("partial text = %q, want %q", got, "first")
		}
	})
	t.Run("while waiting to retry", func(t *testing.T) {
		f := newFake(t, status(529, "overloaded_error", "retry-after", "30"))
		m := f.model(Config{})
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := m.Generate(ctx, hello(), nil)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v, want context.DeadlineExceeded", err)
		}
		if took := time.Since(start); took > time.Second {
			t.Errorf("returned after %s", took)
		}
		if n := len(f.calls()); n != 1 {
			t.Errorf("%d requests, want 1", n)
		}
	})
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		header []string
		want   time.Duration
		ok     bool
	}{
		{nil, 0, false},
		{[]string{"retry-after", "2"}, 2 * time.Second, true},
		{[]string{"retry-after", "0.5"}, 500 * time.Millisecond, true},
		{[]string{"retry-after", now.Add(3 * time.Second).Format(http.TimeFormat)}, 3 * time.Second, true},
		{[]string{"retry-after", now.Add(-time.Minute).Format(http.TimeFormat)}, 0, true},
		{[]string{"retry-after-ms", "250", "retry-after", "9"}, 250 * time.Millisecond, true},
		{[]string{"retry-after", "soon"}, 0, false},
	}
	for _, tt := range tests {
		h := http.Header{}
		for i := 0; i+1 < len(tt.header); i += 2 {
			h.Set(tt.header[i], tt.header[i+1])
		}
		got, ok := retryAfter(h, now)
		if got != tt.want || ok != tt.ok {
			t.Errorf("retryAfter(%v) = %s, %v; want %s, %v", tt.header, got, ok, tt.want, tt.ok)
		}
	}
}

func TestBackoffGrows(t *testing.T) {
	m := &Model{backoff: 100 * time.Millisecond}
	for attempt, want := range []time.Duration{100, 200, 400, 800} {
		want *= time.Millisecond
		d, ok := m.retryDelay(errors.New("connection reset"), attempt)
		if !ok || d > want || d < want*3/4 {
			t.Errorf("attempt %d: delay %s, want within [%s, %s]", attempt, d, want*3/4, want)
		}
	}
	if d, _ := m.retryDelay(errors.New("x"), 30); d > maxBackoff {
		t.Errorf("delay %s exceeds %s", d, maxBackoff)
	}
}

// slow waits gap before its headers and before each of three pings, then
// sends events at once.
func slow(gap time.Duration, events ...event) responder {
	return func(w http.ResponseWriter, r *http.Request, release <-chan struct{}) {
		for i := range 4 {
			select {
			case <-time.After(gap):
			case <-r.Context().Done():
				return
			case <-release:
				return
			}
			if i == 0 {
				w.Header().Set("Content-Type", "text/event-stream")
				w.WriteHeader(http.StatusOK)
				w.(http.Flusher).Flush()
			} else {
				writeEvent(w, ping())
			}
		}
		writeEvents(w, events)
	}
}

// Timeout bounds gaps, not the whole response: a stream that keeps
// sending, if only pings, runs as long as it needs.
func TestSlowStreamIsNotIdle(t *testing.T) {
	// Each gap leaves a loaded machine 250 ms of slack; the four of them
	// outlast the timeout by half of it.
	gap, timeout := 150*time.Millisecond, 400*time.Millisecond
	f := newFake(t, slow(gap, textStream("slow")...))
	m := f.model(Config{Timeout: timeout, MaxRetries: -1})
	start := time.Now()
	resp, err := m.Generate(context.Background(), hello(), nil)
	if err != nil {
		t.Fatalf("err = %v after %s", err, time.Since(start))
	}
	if got := resp.Message.Content.PlainText(); got != "slow" {
		t.Errorf("text = %q", got)
	}
	if took := time.Since(start); took <= timeout {
		t.Errorf("took %s: the test did not outlast the timeout", took)
	}
}
