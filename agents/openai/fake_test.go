package openai

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/agents"
)

// fake is an OpenAI-compatible server on 127.0.0.1. It answers the n-th
// POST /v1/chat/completions with the n-th reply (the last one repeats) and
// records what it received.
type fake struct {
	t       *testing.T
	srv     *httptest.Server
	replies []reply

	mu       sync.Mutex
	received []received
}

type received struct {
	header http.Header
	body   map[string]any
}

// reply writes one response.
type reply func(w http.ResponseWriter, r *http.Request)

func newFake(t *testing.T, replies ...reply) *fake {
	t.Helper()
	f := &fake{t: t, replies: replies}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fake) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		f.t.Errorf("fake server: unexpected %s %s", r.Method, r.URL.Path)
		http.NotFound(w, r)
		return
	}
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		f.t.Errorf("fake server: read body: %v", err)
		return
	}
	var body map[string]any
	if err := json.Unmarshal(raw, &body); err != nil {
		f.t.Errorf("fake server: body is not JSON: %v", err)
	}
	f.mu.Lock()
	n := len(f.received)
	f.received = append(f.received, received{header: r.Header.Clone(), body: body})
	f.mu.Unlock()
	f.replies[min(n, len(f.replies)-1)](w, r)
}

// requests is the number of requests received so far.
func (f *fake) requests() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.received)
}

func (f *fake) last() received {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.received) == 0 {
		f.t.Fatal("fake server received no request")
	}
	return f.received[len(f.received)-1]
}

// model returns a Model talking to the fake, with retries recorded rather
// than slept.
func (f *fake) model(cfg Config) (*Model, *sleeps) {
	f.t.Helper()
	cfg.BaseURL = f.srv.URL + "/v1"
	if cfg.DefaultModel == "" {
		cfg.DefaultModel = "test-model"
	}
	m, err := New(cfg)
	if err != nil {
		f.t.Fatal(err)
	}
	s := &sleeps{}
	m.sleep = s.sleep
	return m, s
}

// sleeps records the waits between retries without waiting.
type sleeps struct {
	mu sync.Mutex
	d  []time.Duration
}

func (s *sleeps) sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	s.d = append(s.d, d)
	s.mu.Unlock()
	return ctx.Err()
}

func (s *sleeps) all() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.d...)
}

// sse streams chunks as data lines and ends with [DONE], as OpenAI does.
func sse(chunks ...string) reply {
	return func(w http.ResponseWriter, r *http.Request) {
		writeChunks(w, chunks...)
		writeChunks(w, "[DONE]")
	}
}

// sseThen streams chunks, then lets then end the response its own way.
func sseThen(then func(w http.ResponseWriter, r *http.Request), chunks ...string) reply {
	return func(w http.ResponseWriter, r *http.Request) {
		writeChunks(w, chunks...)
		then(w, r)
	}
}

func writeChunks(w http.ResponseWriter, chunks ...string) {
	if w.Header().Get("Content-Type") == "" {
		w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
		w.Header().Set("Cache-Control", "no-cache")
	}
	for _, c := range chunks {
		fmt.Fprintf(w, "data: %s\n\n", c)
	}
	w.(http.Flusher).Flush()
}

// drop cuts the connection without ending the chunked body.
func drop(http.ResponseWriter, *http.Request) { panic(http.ErrAbortHandler) }

// stall sends nothing more until the client goes away.
func stall(_ http.ResponseWriter, r *http.Request) { <-r.Context().Done() }

// status answers with an HTTP error.
func status(code int, header map[string]string, body string) reply {
	return func(w http.ResponseWriter, r *http.Request) {
		for k, v := range header {
			w.Header().Set(k, v)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		io.WriteString(w, body)
	}
}

// chunk is a recorded-style chat.completion.chunk with one choice.
func chunk(delta string) string {
	return `{"id":"chatcmpl-AbC123","object":"chat.completion.chunk","created":1730000000,"model":"test-model",` +
		`"system_fingerprint":"fp_1","choices":[{"index":0,"delta":` + delta + `,"logprobs":null,"finish_reason":null}]}`
}

// finish is the chunk that ends a choice.
func finish(reason string) string {
	return `{"id":"chatcmpl-AbC123","object":"chat.completion.chunk","created":1730000000,"model":"test-model",` +
		`"system_fingerprint":"fp_1","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"` + reason + `"}]}`
}

// usage is the usage-only last chunk of stream_options.include_usage.
func usage(in, out int) string {
	return fmt.Sprintf(`{"id":"chatcmpl-AbC123","object":"chat.completion.chunk","created":1730000000,"model":"test-model",`+
		`"system_fingerprint":"fp_1","choices":[],"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}}`, in, out, in+out)
}

// content is a text delta chunk.
func content(s string) string { return chunk(`{"content":` + quote(s) + `}`) }

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// roleChunk is the first chunk OpenAI sends.
var roleChunk = chunk(`{"role":"assistant","content":"","refusal":null}`)

// recorder collects the deltas a model streams.
type recorder struct {
	mu     sync.Mutex
	deltas []agents.ModelDelta
}

func (r *recorder) out(d agents.ModelDelta) {
	r.mu.Lock()
	r.deltas = append(r.deltas, d)
	r.mu.Unlock()
}

func (r *recorder) all() []agents.ModelDelta {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]agents.ModelDelta(nil), r.deltas...)
}

func text(s string) agents.ModelDelta  { return agents.ModelDelta{Text: s} }
func think(s string) agents.ModelDelta { return agents.ModelDelta{Thinking: true, Text: s} }

// userRequest is a one-message conversation.
func userRequest(s string) agents.ModelRequest {
	return agents.ModelRequest{Messages: agents.Messages(aap.UserMessage(s))}
}

// messageJSON is a message as AAP writes it, for comparisons.
func messageJSON(t *testing.T, m aap.Message) string {
	t.Helper()
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func mustContain(t *testing.T, s string, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if !strings.Contains(s, p) {
			t.Errorf("%q does not contain %q", s, p)
		}
	}
}
