// Command aapdload drives a running aapd server the way applications do:
// many sessions, each holding a conversation of several turns, concurrently.
// It reports turn throughput and latency percentiles (time to the first
// event and to the end of the turn), and every failure.
//
//	aapdload -url http://localhost:8080 -key $AAPD_KEY -sessions 200 -turns 5 -concurrency 32 -stream delta
//
// With -burst, it creates the sessions first, then sends one turn on every
// session at the same moment and reports how long it took until every turn
// had started (its first byte arrived): how fast the server takes on a
// sudden crowd of long turns.
//
// Results of reference runs are in docs/benchmarks.md.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"time"
)

func main() {
	var (
		url         = flag.String("url", "http://localhost:8080", "aapd base URL")
		key         = flag.String("key", os.Getenv("AAPD_KEY"), "API key [$AAPD_KEY]")
		agent       = flag.String("agent", "echo", "agent to talk to")
		sessions    = flag.Int("sessions", 100, "sessions to create")
		turns       = flag.Int("turns", 5, "turns per session")
		concurrency = flag.Int("concurrency", 16, "sessions talking at once")
		stream      = flag.String("stream", "delta", "stream mode: none, delta or message")
		message     = flag.String("message", "/words 50", "user message of every turn")
		burst       = flag.Bool("burst", false, "create every session first, then start one turn on each at once")
	)
	flag.Parse()
	if *key == "" {
		fmt.Fprintln(os.Stderr, "aapdload: no API key: set -key or $AAPD_KEY")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	l := &load{url: strings.TrimSuffix(*url, "/"), key: *key, agent: *agent, stream: *stream, message: *message,
		client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: *concurrency * 2}}}
	if *burst {
		res, elapsed := l.burst(ctx, *sessions, *concurrency)
		res.print(os.Stdout, elapsed, *sessions, 1, *sessions, *stream)
		if len(res.firstEvent) > 0 {
			fmt.Fprintf(os.Stdout, "burst: %d of %d turns started, the last %s after the burst began\n",
				len(res.firstEvent), *sessions, slices.Max(res.firstEvent).Round(time.Millisecond))
		}
		if len(res.errors) > 0 {
			os.Exit(1)
		}
		return
	}
	start := time.Now()
	res := l.run(ctx, *sessions, *turns, *concurrency)
	res.print(os.Stdout, time.Since(start), *sessions, *turns, *concurrency, *stream)
	if len(res.errors) > 0 {
		os.Exit(1)
	}
}

type load struct {
	url, key, agent, stream, message string
	client                           *http.Client
}

// result collects what the run measured.
type result struct {
	mu         sync.Mutex
	firstEvent []time.Duration
	turn       []time.Duration
	errors     []string
}

func (r *result) add(first, total time.Duration, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		r.errors = append(r.errors, err.Error())
		return
	}
	r.firstEvent = append(r.firstEvent, first)
	r.turn = append(r.turn, total)
}

func (l *load) run(ctx context.Context, sessions, turns, concurrency int) *result {
	res := &result{}
	work := make(chan int)
	var wg sync.WaitGroup
	for range concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range work {
				sid, err := l.createSession(ctx)
				if err != nil {
					res.add(0, 0, err)
					continue
				}
				for range turns {
					first, total, err := l.turn(ctx, sid)
					res.add(first, total, err)
				}
			}
		}()
	}
	for i := range sessions {
		select {
		case work <- i:
		case <-ctx.Done():
		}
	}
	close(work)
	wg.Wait()
	return res
}

// burst creates the sessions (concurrency at a time), then sends a turn on
// each at once; first-byte times count from that moment.
func (l *load) burst(ctx context.Context, sessions, concurrency int) (*result, time.Duration) {
	res := &result{}
	ids := make([]string, sessions)
	work := make(chan int)
	var wg sync.WaitGroup
	for range concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				var err error
				if ids[i], err = l.createSession(ctx); err != nil {
					res.add(0, 0, err)
				}
			}
		}()
	}
	for i := range sessions {
		work <- i
	}
	close(work)
	wg.Wait()
	start := time.Now()
	for _, sid := range ids {
		if sid == "" {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Times count from the burst's start, not the request's.
			sent := time.Since(start)
			first, total, err := l.turn(ctx, sid)
			res.add(sent+first, sent+total, err)
		}()
	}
	wg.Wait()
	return res, time.Since(start)
}

func (l *load) do(ctx context.Context, path string, body any) (*http.Response, error) {
	b, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, l.url+path, bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+l.key)
	req.Header.Set("Content-Type", "application/json")
	return l.client.Do(req)
}

func (l *load) createSession(ctx context.Context) (string, error) {
	res, err := l.do(ctx, "/sessions", map[string]any{"agent": map[string]any{"name": l.agent}})
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	var out struct{ SessionID string }
	if err := json.NewDecoder(res.Body).Decode(&out); err != nil || res.StatusCode != http.StatusCreated {
		return "", fmt.Errorf("create session: %s %v", res.Status, err)
	}
	return out.SessionID, nil
}

// turn sends one turn and reads its answer to the end, timing the first
// byte of the answer and the whole turn.
func (l *load) turn(ctx context.Context, sid string) (first, total time.Duration, err error) {
	start := time.Now()
	res, err := l.do(ctx, "/sessions/"+sid+"/turns", map[string]any{"stream": l.stream,
		"messages": []any{map[string]any{"role": "user", "content": l.message}}})
	if err != nil {
		return 0, 0, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(res.Body)
		return 0, 0, fmt.Errorf("turn: %s %s", res.Status, strings.TrimSpace(string(b)))
	}
	br := bufio.NewReader(res.Body)
	if _, err := br.Peek(1); err != nil {
		return 0, 0, err
	}
	first = time.Since(start)
	body, err := io.ReadAll(br)
	if err != nil {
		return 0, 0, err
	}
	total = time.Since(start)
	if l.stream != "none" && !bytes.Contains(body, []byte("event: turn_stop")) {
		return 0, 0, errors.New("turn: the stream ended without turn_stop")
	}
	if bytes.Contains(body, []byte(`"stopReason":"error"`)) {
		return 0, 0, errors.New("turn: stopReason error")
	}
	return first, total, nil
}

func (r *result) print(w io.Writer, elapsed time.Duration, sessions, turns, concurrency int, stream string) {
	fmt.Fprintf(w, "sessions %d × turns %d, concurrency %d, stream %s: %d turns in %s (%.1f turns/s), %d errors\n",
		sessions, turns, concurrency, stream, len(r.turn), elapsed.Round(time.Millisecond),
		float64(len(r.turn))/elapsed.Seconds(), len(r.errors))
	for _, row := range []struct {
		name string
		d    []time.Duration
	}{{"first byte", r.firstEvent}, {"whole turn", r.turn}} {
		if len(row.d) == 0 {
			continue
		}
		slices.Sort(row.d)
		fmt.Fprintf(w, "%-11s p50 %7s  p90 %7s  p99 %7s  max %7s\n", row.name,
			pct(row.d, 50), pct(row.d, 90), pct(row.d, 99), row.d[len(row.d)-1].Round(100*time.Microsecond))
	}
	for i, e := range r.errors {
		if i == 10 {
			fmt.Fprintf(w, "… and %d more errors\n", len(r.errors)-10)
			break
		}
		fmt.Fprintln(w, "error:", e)
	}
}

func pct(d []time.Duration, p int) time.Duration {
	return d[min(len(d)-1, len(d)*p/100)].Round(100 * time.Microsecond)
}
