package httpapi

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/store/storetest"
)

// flushRecorder is a ResponseWriter that records what each flush sent.
type flushRecorder struct {
	mu      sync.Mutex
	header  http.Header
	buf     bytes.Buffer
	flushes []string
}

func (f *flushRecorder) Header() http.Header { return f.header }
func (f *flushRecorder) WriteHeader(int)     {}
func (f *flushRecorder) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.buf.Write(p)
}
func (f *flushRecorder) Flush() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.flushes = append(f.flushes, f.buf.String())
	f.buf.Reset()
}

// delayedSource has a whole turn's events after a delay.
type delayedSource struct {
	delay  time.Duration
	events []aap.Event
}

func (s delayedSource) Read(ctx context.Context, after int) ([]aap.Event, bool, error) {
	if s.delay == 0 {
		return s.events[after:], true, nil
	}
	select {
	case <-ctx.Done():
		return nil, false, ctx.Err()
	case <-time.After(s.delay):
	}
	return s.events[after:], true, nil
}

// A stream's headers go out with its first events when they are at hand —
// a new turn's turn_start always is — and at once, alone, when they are
// not, so that a client following a quiet turn knows the stream is open.
func TestStreamHeadersGoOutWithTheFirstEventsAtHand(t *testing.T) {
	t.Parallel()
	s := newTestServer(t, storetest.Open(t))
	turn := []aap.Event{aap.TurnStart(), {Type: aap.EventText, Text: "hi"}, aap.TurnStop(aap.StopEndTurn)}
	for _, tc := range []struct {
		name  string
		delay time.Duration
		want  []string // what each flush sends, in order: an event type, or "" for the headers alone
	}{
		{"events at hand", 0, []string{"turn_start"}},
		{"a quiet turn", 50 * time.Millisecond, []string{"", "turn_start"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &flushRecorder{header: http.Header{}}
			r := httptest.NewRequest("GET", "/", nil)
			if err := s.streamEvents(w, r, delayedSource{delay: tc.delay, events: turn}, 0, false); err != nil {
				t.Fatal(err)
			}
			if len(w.flushes) != len(tc.want) {
				t.Fatalf("%d flushes %q, want %d", len(w.flushes), w.flushes, len(tc.want))
			}
			for i, want := range tc.want {
				got := w.flushes[i]
				if (want == "" && got != "") || (want != "" && !strings.HasPrefix(got, "id: 1\nevent: "+want+"\n")) {
					t.Errorf("flush %d sent %q, want %s", i+1, got, map[bool]string{true: "the headers alone", false: "them with " + want}[want == ""])
				}
			}
			if ct := w.header.Get("Content-Type"); ct != "text/event-stream" {
				t.Errorf("Content-Type %q", ct)
			}
		})
	}
}
