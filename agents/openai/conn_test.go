package openai

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Many turns call one provider at once. Their connections must be kept for
// the next calls: Go's default transport keeps two idle connections per
// host, and every call past the second dialled anew.
func TestConcurrentCallsReuseConnections(t *testing.T) {
	const calls = 8
	var (
		dialled atomic.Int32
		arrived sync.WaitGroup
	)
	reply := sse(content("hi"), finish("stop"))
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Hold every call until all of them are in flight, so that each
		// holds a connection of its own.
		arrived.Done()
		waitGroup(t, &arrived, 10*time.Second)
		reply(w, r)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			dialled.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	m, err := New(Config{BaseURL: srv.URL + "/v1", DefaultModel: "test-model"})
	if err != nil {
		t.Fatal(err)
	}
	for round := 1; round <= 3; round++ {
		arrived.Add(calls)
		var done sync.WaitGroup
		for range calls {
			done.Add(1)
			go func() {
				defer done.Done()
				if _, err := m.Generate(context.Background(), userRequest("hello"), nil); err != nil {
					t.Error(err)
				}
			}()
		}
		done.Wait()
	}
	// One connection per call in flight, kept for the next rounds; a
	// connection the transport had not put back yet when the next round
	// began may be dialled again. Two idle connections per host (Go's
	// default) make it 20.
	if n := dialled.Load(); n > calls+calls/2 {
		t.Errorf("3 rounds of %d concurrent calls opened %d connections, want about %d (one per call in flight, kept for the next rounds)", calls, n, calls)
	}
}

// waitGroup waits for wg, failing the test after d.
func waitGroup(t *testing.T, wg *sync.WaitGroup, d time.Duration) {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(d):
		t.Error("not every call arrived")
	}
}
