package openai

import (
	"context"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/agents"
)

// TestFailures covers failed calls: what is retried, what is returned and
// that nothing reaches out twice.
func TestFailures(t *testing.T) {
	const key = "sk-test-SECRET-0123456789"
	helloWorld := []agents.ModelDelta{text("Hello"), text(" world")}
	success := sse(roleChunk, content("Hello"), content(" world"), finish("stop"), usage(3, 2))
	tests := []struct {
		name       string
		replies    []reply
		maxRetries int
		requests   int             // requests the server must receive
		sleeps     []time.Duration // exact waits between attempts; nil for none
		backoffs   int             // or: this many exponential waits
		deltas     []agents.ModelDelta
		text       string // text of the returned message
		stop       aap.StopReason
		errParts   []string // nil: success
		errAs      func(error) bool
	}{
		{
			name:       "429 with Retry-After, then success: one retry, no duplicate output",
			replies:    []reply{status(429, map[string]string{"Retry-After": "3"}, `{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`), success},
			maxRetries: 2, requests: 2, sleeps: []time.Duration{3 * time.Second},
			deltas: helloWorld, text: "Hello world", stop: aap.StopEndTurn,
		},
		{
			name:       "retry-after-ms is preferred",
			replies:    []reply{status(429, map[string]string{"Retry-After": "3", "Retry-After-Ms": "120"}, `{}`), success},
			maxRetries: 1, requests: 2, sleeps: []time.Duration{120 * time.Millisecond},
			deltas: helloWorld, text: "Hello world", stop: aap.StopEndTurn,
		},
		{
			name:       "500 on every attempt: error after MaxRetries",
			replies:    []reply{status(500, nil, `{"error":{"message":"The server had an error","type":"server_error"}}`)},
			maxRetries: 2, requests: 3, backoffs: 2,
			stop:     aap.StopError,
			errParts: []string{"after 2 retries", "HTTP 500", "The server had an error"},
			errAs:    isStatus(500),
		},
		{
			name:       "502 from a proxy with an HTML body, then success",
			replies:    []reply{status(502, nil, "<html><body><h1>502 Bad Gateway</h1></body></html>"), success},
			maxRetries: 1, requests: 2, backoffs: 1,
			deltas: helloWorld, text: "Hello world", stop: aap.StopEndTurn,
		},
		{
			name:       "400 is not retried and keeps the provider's message (vLLM shape)",
			replies:    []reply{status(400, nil, `{"object":"error","message":"This model's maximum context length is 4096 tokens.","type":"BadRequestError","param":null,"code":400}`)},
			maxRetries: 3, requests: 1,
			stop:     aap.StopError,
			errParts: []string{"HTTP 400", "maximum context length is 4096"},
			errAs:    isStatus(400),
		},
		{
			name:       "a Retry-After beyond a minute fails at once",
			replies:    []reply{status(429, map[string]string{"Retry-After": "3600"}, `{"error":{"message":"quota"}}`), success},
			maxRetries: 3, requests: 1,
			stop:     aap.StopError,
			errParts: []string{"HTTP 429", "quota"},
			errAs:    isStatus(429),
		},
		{
			name:       "401 echoing the key: the key never appears in the error",
			replies:    []reply{status(401, nil, `{"error":{"message":"Incorrect API key provided: `+key+`.","type":"invalid_request_error","code":"invalid_api_key"}}`)},
			maxRetries: 2, requests: 1,
			stop:     aap.StopError,
			errParts: []string{"HTTP 401", "Incorrect API key provided: [redacted]"},
			errAs:    isStatus(401),
		},
		{
			name: "error object mid-stream: partial answer, no retry",
			replies: []reply{sseThen(func(w http.ResponseWriter, r *http.Request) {
				writeChunks(w, `{"error":{"message":"upstream overloaded while using `+key+`","type":"server_error","code":null}}`)
			}, roleChunk, content("Hello"), content(" world"))},
			maxRetries: 3, requests: 1,
			deltas: helloWorld, text: "Hello world", stop: aap.StopError,
			errParts: []string{"mid-stream", "upstream overloaded", "[redacted]"},
			errAs:    func(err error) bool { var e *StreamError; return errors.As(err, &e) },
		},
		{
			name:       "connection dropped mid-stream: partial answer, no retry",
			replies:    []reply{sseThen(drop, roleChunk, content("Hello")), success},
			maxRetries: 3, requests: 1,
			deltas: []agents.ModelDelta{text("Hello")}, text: "Hello", stop: aap.StopError,
			errParts: []string{"openai: the stream broke: unexpected EOF"},
		},
		{
			name:       "connection dropped before any output: retried",
			replies:    []reply{sseThen(drop, roleChunk), success},
			maxRetries: 1, requests: 2, backoffs: 1,
			deltas: helloWorld, text: "Hello world", stop: aap.StopEndTurn,
		},
		{
			name:       "tool call chunks are not output: a drop after them is retried",
			replies:    []reply{sseThen(drop, chunk(`{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"clock","arguments":"{\"tz"}}]}`)), success},
			maxRetries: 1, requests: 2, backoffs: 1,
			deltas: helloWorld, text: "Hello world", stop: aap.StopEndTurn,
		},
		{
			name:       "stream that ends without finish_reason or [DONE]",
			replies:    []reply{sseThen(func(http.ResponseWriter, *http.Request) {}, roleChunk, content("Hel"))},
			maxRetries: 2, requests: 1,
			deltas: []agents.ModelDelta{text("Hel")}, text: "Hel", stop: aap.StopError,
			errParts: []string{"ended before the answer was complete"},
			errAs:    func(err error) bool { return errors.Is(err, errIncomplete) },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t, tt.replies...)
			m, slept := f.model(Config{APIKey: key, MaxRetries: tt.maxRetries, Timeout: 5 * time.Second})
			var rec recorder
			resp, err := m.Generate(context.Background(), userRequest("hi"), rec.out)
			switch {
			case tt.errParts == nil && err != nil:
				t.Fatalf("Generate: %v", err)
			case tt.errParts != nil && err == nil:
				t.Fatalf("Generate succeeded, want an error with %q", tt.errParts)
			case err != nil:
				mustContain(t, err.Error(), tt.errParts...)
				if strings.Contains(err.Error(), key) {
					t.Errorf("error leaks the API key: %v", err)
				}
				if tt.errAs != nil && !tt.errAs(err) {
					t.Errorf("error %v (%T) is not of the expected kind", err, err)
				}
			}
			if n := f.requests(); n != tt.requests {
				t.Errorf("%d requests, want %d", n, tt.requests)
			}
			got := slept.all()
			switch {
			case tt.backoffs > 0:
				if len(got) != tt.backoffs {
					t.Errorf("waits %v, want %d backoffs", got, tt.backoffs)
				}
				for i, d := range got {
					if top := baseDelay << i; d < top/2 || d > top {
						t.Errorf("wait %d = %v, want within [%v, %v]", i, d, top/2, top)
					}
				}
			case !reflect.DeepEqual(got, tt.sleeps):
				t.Errorf("waits %v, want %v", got, tt.sleeps)
			}
			if d := rec.all(); !reflect.DeepEqual(d, tt.deltas) {
				t.Errorf("deltas %+v, want %+v", d, tt.deltas)
			}
			if got := resp.Message.Content.PlainText(); got != tt.text {
				t.Errorf("text %q, want %q", got, tt.text)
			}
			if resp.StopReason != tt.stop {
				t.Errorf("stop %q, want %q", resp.StopReason, tt.stop)
			}
		})
	}
}

func isStatus(code int) func(error) bool {
	return func(err error) bool {
		var e *StatusError
		return errors.As(err, &e) && e.StatusCode == code
	}
}

// TestIdleTimeoutMidStream: a server that stops sending is cut after the
// idle timeout, the partial answer is returned, and nothing is retried.
func TestIdleTimeoutMidStream(t *testing.T) {
	f := newFake(t, sseThen(stall, roleChunk, content("Hello")))
	m, _ := f.model(Config{Timeout: 100 * time.Millisecond, MaxRetries: 2})
	var rec recorder
	start := time.Now()
	resp, err := m.Generate(context.Background(), userRequest("hi"), rec.out)
	elapsed := time.Since(start)
	var idle *IdleTimeoutError
	if !errors.As(err, &idle) || idle.After != 100*time.Millisecond {
		t.Fatalf("error %v, want an idle timeout of 100ms", err)
	}
	if elapsed > 2*time.Second {
		t.Errorf("took %v", elapsed)
	}
	if resp.Message.Content.PlainText() != "Hello" || resp.StopReason != aap.StopError || f.requests() != 1 {
		t.Errorf("partial %q stop %q after %d requests", resp.Message.Content.PlainText(), resp.StopReason, f.requests())
	}
}

// TestIdleTimeoutBeforeResponse: a server that never answers is cut too,
// and since nothing was streamed the call is retried.
func TestIdleTimeoutBeforeResponse(t *testing.T) {
	f := newFake(t, stall)
	m, slept := f.model(Config{Timeout: 80 * time.Millisecond, MaxRetries: 1})
	_, err := m.Generate(context.Background(), userRequest("hi"), nil)
	var idle *IdleTimeoutError
	if !errors.As(err, &idle) {
		t.Fatalf("error %v, want an idle timeout", err)
	}
	mustContain(t, err.Error(), "after 1 retry:", "sent nothing for 80ms")
	if f.requests() != 2 || len(slept.all()) != 1 {
		t.Errorf("%d requests, %d waits; want 2 and 1", f.requests(), len(slept.all()))
	}
}

// TestKeepAlivesAreNotSilence: SSE comments (OpenRouter sends them while
// a model thinks) keep a slow stream alive past the timeout, which bounds
// silence, not the whole answer.
func TestKeepAlivesAreNotSilence(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		writeChunks(w, roleChunk)
		for range 6 {
			time.Sleep(30 * time.Millisecond)
			_, _ = w.Write([]byte(": OPENROUTER PROCESSING\n\n"))
			w.(http.Flusher).Flush()
		}
		writeChunks(w, content("late"), finish("stop"), "[DONE]")
	})
	m, _ := f.model(Config{Timeout: 100 * time.Millisecond})
	resp, err := m.Generate(context.Background(), userRequest("hi"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Message.Content.PlainText() != "late" {
		t.Errorf("text %q", resp.Message.Content.PlainText())
	}
}

// TestCancelMidStream: cancelling ctx returns promptly with the partial
// answer and ctx's error.
func TestCancelMidStream(t *testing.T) {
	f := newFake(t, sseThen(stall, roleChunk, content("Hello")))
	m, _ := f.model(Config{MaxRetries: 3})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := time.Now()
	resp, err := m.Generate(ctx, userRequest("hi"), func(d agents.ModelDelta) { cancel() })
	if !errors.Is(err, context.Canceled) || err != ctx.Err() {
		t.Fatalf("error %v, want ctx.Err()", err)
	}
	if time.Since(start) > time.Second {
		t.Errorf("took %v", time.Since(start))
	}
	if resp.Message.Content.PlainText() != "Hello" || resp.StopReason != aap.StopError || f.requests() != 1 {
		t.Errorf("partial %q stop %q after %d requests", resp.Message.Content.PlainText(), resp.StopReason, f.requests())
	}
}

// TestCancelDuringRetryWait: the wait between retries ends with ctx.
func TestCancelDuringRetryWait(t *testing.T) {
	f := newFake(t, status(503, map[string]string{"Retry-After": "30"}, `{}`))
	m, _ := f.model(Config{MaxRetries: 3})
	m.sleep = sleep // really wait, so that only ctx can end it
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := m.Generate(ctx, userRequest("hi"), nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("error %v, want the deadline", err)
	}
	if time.Since(start) > time.Second || f.requests() != 1 {
		t.Errorf("took %v and %d requests", time.Since(start), f.requests())
	}
}
