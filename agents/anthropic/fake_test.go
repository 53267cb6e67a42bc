package anthropic

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aapd/aapd/agents"
)

// A fake Messages API on 127.0.0.1 speaking Anthropic's wire format:
// POST /v1/messages answered with text/event-stream, one responder per
// attempt (the last one repeats).

// responder answers one request.
type responder func(w http.ResponseWriter, r *http.Request, release <-chan struct{})

type recorded struct {
	header http.Header
	body   []byte
}

type fake struct {
	t          *testing.T
	srv        *httptest.Server
	responders []responder
	release    chan struct{} // closed when the test ends: stalled handlers return

	mu       sync.Mutex
	requests []recorded
}

func newFake(t *testing.T, responders ...responder) *fake {
	t.Helper()
	f := &fake{t: t, responders: responders, release: make(chan struct{})}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	t.Cleanup(func() { close(f.release) }) // runs first: handlers stop stalling
	return f
}

func (f *fake) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/messages" {
		http.Error(w, "unexpected "+r.Method+" "+r.URL.Path, http.StatusNotFound)
		return
	}
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	n := len(f.requests)
	f.requests = append(f.requests, recorded{header: r.Header.Clone(), body: body})
	f.mu.Unlock()
	f.responders[min(n, len(f.responders)-1)](w, r, f.release)
}

func (f *fake) calls() []recorded {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]recorded(nil), f.requests...)
}

// body returns request i's JSON body decoded.
func (f *fake) body(i int) map[string]any {
	f.t.Helper()
	calls := f.calls()
	if i >= len(calls) {
		f.t.Fatalf("request %d was not made (%d made)", i, len(calls))
	}
	var v map[string]any
	if err := json.Unmarshal(calls[i].body, &v); err != nil {
		f.t.Fatalf("request %d body is not JSON: %v\n%s", i, err, calls[i].body)
	}
	return v
}

// model returns a Model pointed at the fake, fast to retry.
func (f *fake) model(cfg Config) *Model {
	f.t.Helper()
	cfg.BaseURL = f.srv.URL
	if cfg.APIKey == "" && cfg.APIKeyOption == "" {
		cfg.APIKey = "sk-test-default"
	}
	if cfg.DefaultModel == "" {
		cfg.DefaultModel = "claude-test"
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 2 * time.Second
	}
	m, err := New(cfg)
	if err != nil {
		f.t.Fatal(err)
	}
	m.backoff = time.Millisecond
	return m
}

// event is one server-sent event.
type event struct{ name, data string }

// sse answers with a complete event stream.
func sse(events ...event) responder {
	return func(w http.ResponseWriter, r *http.Request, _ <-chan struct{}) {
		writeEvents(w, events)
	}
}

// stall sends events, then nothing until the client goes away.
func stall(events ...event) responder {
	return func(w http.ResponseWriter, r *http.Request, release <-chan struct{}) {
		writeEvents(w, events)
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}
}

// drop sends events, then closes the connection mid-stream.
func drop(events ...event) responder {
	return func(w http.ResponseWriter, r *http.Request, _ <-chan struct{}) {
		writeEvents(w, events)
		conn, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			panic(err)
		}
		buf.Flush()
		conn.Close()
	}
}

// status answers with an API error response.
func status(code int, errType string, header ...string) responder {
	return func(w http.ResponseWriter, r *http.Request, _ <-chan struct{}) {
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Set(header[i], header[i+1])
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("request-id", "req_011CTest")
		w.WriteHeader(code)
		fmt.Fprintf(w, `{"type":"error","error":{"type":%q,"message":"fake %d"},"request_id":"req_011CTest"}`, errType, code)
	}
}

// writeEvents starts the response if it has not started, and sends events.
func writeEvents(w http.ResponseWriter, events []event) {
	if w.Header().Get("Content-Type") == "" {
		w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
		w.Header().Set("Cache-Control", "no-cache")
		w.Header().Set("request-id", "req_011CTest")
		w.WriteHeader(http.StatusOK)
	}
	for _, e := range events {
		writeEvent(w, e)
	}
}

func writeEvent(w http.ResponseWriter, e event) {
	fmt.Fprintf(w, "event: %s\ndata: %s\n\n", e.name, e.data)
	w.(http.Flusher).Flush()
}

// Events exactly as the API sends them.

func q(s string) string { b, _ := json.Marshal(s); return string(b) }

func messageStart(input, cacheRead, cacheWrite int) event {
	return event{"message_start", fmt.Sprintf(`{"type":"message_start","message":{"id":"msg_01XFDUDYJgAACzvnptvVoYEL","type":"message","role":"assistant","content":[],"model":"claude-test","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":%d,"cache_creation_input_tokens":%d,"cache_read_input_tokens":%d,"output_tokens":1,"service_tier":"standard"}}}`, input, cacheWrite, cacheRead)}
}

func ping() event { return event{"ping", `{"type": "ping"}`} }

func textStart(i int) event {
	return event{"content_block_start", fmt.Sprintf(`{"type":"content_block_start","index":%d,"content_block":{"type":"text","text":""}}`, i)}
}

func textDelta(i int, s string) event {
	return event{"content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":{"type":"text_delta","text":%s}}`, i, q(s))}
}

func thinkingStart(i int) event {
	return event{"content_block_start", fmt.Sprintf(`{"type":"content_block_start","index":%d,"content_block":{"type":"thinking","thinking":"","signature":""}}`, i)}
}

func thinkingDelta(i int, s string) event {
	return event{"content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":{"type":"thinking_delta","thinking":%s}}`, i, q(s))}
}

func signatureDelta(i int, s string) event {
	return event{"content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":{"type":"signature_delta","signature":%s}}`, i, q(s))}
}

func redactedStart(i int, data string) event {
	return event{"content_block_start", fmt.Sprintf(`{"type":"content_block_start","index":%d,"content_block":{"type":"redacted_thinking","data":%s}}`, i, q(data))}
}

func toolStart(i int, id, name string) event {
	return event{"content_block_start", fmt.Sprintf(`{"type":"content_block_start","index":%d,"content_block":{"type":"tool_use","id":%s,"name":%s,"input":{}}}`, i, q(id), q(name))}
}

func inputDelta(i int, s string) event {
	return event{"content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":{"type":"input_json_delta","partial_json":%s}}`, i, q(s))}
}

// inputDeltas splits JSON into pieces of n bytes, as the API does at
// arbitrary places.
func inputDeltas(i int, s string, n int) []event {
	var out []event
	for len(s) > 0 {
		k := min(n, len(s))
		out = append(out, inputDelta(i, s[:k]))
		s = s[k:]
	}
	return out
}

func blockStop(i int) event {
	return event{"content_block_stop", fmt.Sprintf(`{"type":"content_block_stop","index":%d}`, i)}
}

func messageDelta(reason string, output int) event {
	return event{"message_delta", fmt.Sprintf(`{"type":"message_delta","delta":{"stop_reason":%s,"stop_sequence":null},"usage":{"output_tokens":%d}}`, q(reason), output)}
}

func messageStop() event { return event{"message_stop", `{"type":"message_stop"}`} }

func errorEvent(errType string) event {
	return event{"error", fmt.Sprintf(`{"type":"error","error":{"type":%q,"message":"Overloaded"},"request_id":"req_011CTest"}`, errType)}
}

// flat joins events and lists of events into one script.
func flat(parts ...any) []event {
	var out []event
	for _, p := range parts {
		switch p := p.(type) {
		case event:
			out = append(out, p)
		case []event:
			out = append(out, p...)
		default:
			panic(fmt.Sprintf("flat: %T", p))
		}
	}
	return out
}

// textStream is a complete answer of one text block.
func textStream(pieces ...string) []event {
	evs := []event{messageStart(10, 0, 0), textStart(0)}
	for _, p := range pieces {
		evs = append(evs, textDelta(0, p))
	}
	return append(evs, blockStop(0), messageDelta("end_turn", 5), messageStop())
}

// collector records the deltas a Generate call streams.
type collector struct {
	deltas []agents.ModelDelta
}

func (c *collector) out(d agents.ModelDelta) { c.deltas = append(c.deltas, d) }

// String renders the deltas compactly: thinking as ~text~.
func (c *collector) String() string {
	var b strings.Builder
	for _, d := range c.deltas {
		if d.Thinking {
			fmt.Fprintf(&b, "~%s~", d.Text)
		} else {
			fmt.Fprintf(&b, "[%s]", d.Text)
		}
	}
	return b.String()
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// sameJSON reports whether two JSON texts hold the same value.
func sameJSON(t *testing.T, got, want string) bool {
	t.Helper()
	var g, w any
	if err := json.Unmarshal([]byte(got), &g); err != nil {
		t.Fatalf("got is not JSON: %v: %s", err, got)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("want is not JSON: %v: %s", err, want)
	}
	return mustJSON(t, g) == mustJSON(t, w)
}
