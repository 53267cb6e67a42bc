// Command aapdload drives a running aapd server the way applications do:
// many sessions, each holding a conversation of several turns, concurrently.
// It reports turn throughput and latency percentiles (time to the first
// event and to the end of the turn), and every failure.
//
//	aapdload -url http://localhost:8080 -key $AAPD_KEY -sessions 200 -turns 5 -concurrency 32 -stream delta
//
// While it runs, a line on stderr shows the turns done, the throughput of
// the last second and its median latency.
//
// With -burst, it creates the sessions first, then sends one turn on every
// session at the same moment and reports how long it took until every turn
// had started (its first byte arrived): how fast the server takes on a
// sudden crowd of long turns.
//
// With -background, every turn is a background turn (Prefer: respond-async):
// the first latency is then the 202 answer's, and the turn's end is waited
// for (aapclient.WaitTurn) before the session's next turn.
//
// With -import N, -export SESSION or -fork SESSION it measures the
// lifecycle of a session instead (lifecycle.go): a generated session of N
// messages imported, a session's document read to its end, a session
// forked again and again.
//
// Results of reference runs are in docs/benchmarks.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptrace"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/aapclient"
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
		background  = flag.Bool("background", false, "send background turns (Prefer: respond-async) and wait for each one's end")
		think       = flag.Duration("think", 0, "pause a random time below this before each turn of a session, as a user reading the last answer does, so that clients do not send in lockstep")
		// The lifecycle modes (lifecycle.go).
		importN   = flag.Int("import", 0, "import a generated session of this many messages, and report the rate")
		msgBytes  = flag.Int("message-bytes", 1200, "-import: about how many bytes each message holds")
		exportID  = flag.String("export", "", "export this session to its end, and report the rate")
		forkID    = flag.String("fork", "", "fork this session -forks times, one after the other, and report the latency")
		forks     = flag.Int("forks", 20, "-fork: how many forks")
		serverPID = flag.Int("server-pid", 0, "-import, -export: the server's process id, to report how much it grew")
	)
	flag.Parse()
	if *key == "" {
		fmt.Fprintln(os.Stderr, "aapdload: no API key: set -key or $AAPD_KEY")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	switch aap.StreamMode(*stream) {
	case aap.StreamNone, aap.StreamDelta, aap.StreamMessage:
	default:
		fmt.Fprintf(os.Stderr, "aapdload: -stream %q: want none, delta or message\n", *stream)
		os.Exit(2)
	}
	// Refusals (409, 429, 503) are errors of the run, not retried: they are
	// what a load test is for.
	client, err := aapclient.New(*url, aapclient.WithAPIKey(*key),
		aapclient.WithHTTPClient(&http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: *concurrency * 2}}),
		aapclient.WithRetryPolicy(aapclient.RetryPolicy{MaxAttempts: 1}), aapclient.WithUserAgent("aapdload"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "aapdload:", err)
		os.Exit(2)
	}
	if *importN > 0 || *exportID != "" || *forkID != "" {
		var err error
		switch {
		case *importN > 0:
			err = importSession(ctx, client, *importN, *msgBytes, *serverPID)
		case *exportID != "":
			err = exportSession(ctx, client, *exportID, *serverPID)
		default:
			err = forkSession(ctx, client, *forkID, *forks)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "aapdload:", err)
			os.Exit(1)
		}
		return
	}
	l := &load{client: client, agent: *agent, stream: aap.StreamMode(*stream), message: *message, background: *background, think: *think}
	if *burst {
		res, elapsed := l.burst(ctx, *sessions, *concurrency)
		res.print(os.Stdout, elapsed, *sessions, 1, *sessions, l.mode())
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
	res := &result{}
	stopProgress := res.progress(os.Stderr, start, *sessions**turns, time.Second)
	l.run(ctx, res, *sessions, *turns, *concurrency)
	stopProgress()
	res.print(os.Stdout, time.Since(start), *sessions, *turns, *concurrency, l.mode())
	if len(res.errors) > 0 {
		os.Exit(1)
	}
}

type load struct {
	client         *aapclient.Client
	agent, message string
	stream         aap.StreamMode
	background     bool
	// think is the bound of the random pause before each turn: clients whose
	// turns all take the model's same second otherwise send their next
	// turns together, as no real users do.
	think time.Duration
}

// mode names the turns' mode in the report.
func (l *load) mode() string {
	if l.background {
		return string(l.stream) + " (background)"
	}
	return string(l.stream)
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

func (l *load) run(ctx context.Context, res *result, sessions, turns, concurrency int) {
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
					if !l.pause(ctx) {
						return
					}
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
}

// pause waits a random time below l.think; false when ctx ended first.
func (l *load) pause(ctx context.Context) bool {
	if l.think <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(rand.N(l.think))
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
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
	fmt.Fprintf(os.Stderr, "burst: %d sessions created; sending a turn on each\n", sessions)
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

func (l *load) createSession(ctx context.Context) (string, error) {
	out, err := l.client.CreateSession(ctx, aap.CreateSessionRequest{Agent: aap.AgentConfig{Name: l.agent}})
	if err != nil {
		return "", fmt.Errorf("create session: %w", err)
	}
	return out.SessionID, nil
}

// turn sends one turn and reads its answer to the end, timing the first
// byte of the answer (the first event of a stream) and the whole turn.
func (l *load) turn(ctx context.Context, sid string) (first, total time.Duration, err error) {
	start := time.Now()
	req := aap.TurnRequest{Stream: l.stream, Messages: []aap.Message{aap.UserMessage(l.message)}}
	if l.background {
		return l.backgroundTurn(ctx, sid, req, start)
	}
	if l.stream == aap.StreamNone {
		var firstByte time.Duration
		ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
			GotFirstResponseByte: func() { firstByte = time.Since(start) },
		})
		res, err := l.client.SendTurn(ctx, sid, req)
		if err != nil {
			return 0, 0, fmt.Errorf("turn: %w", err)
		}
		if res.StopReason == aap.StopError {
			return 0, 0, errors.New("turn: stopReason error")
		}
		return firstByte, time.Since(start), nil
	}
	s, err := l.client.StreamTurn(ctx, sid, req)
	if err != nil {
		return 0, 0, fmt.Errorf("turn: %w", err)
	}
	var stop aap.StopReason
	for e, err := range s.Events() {
		if err != nil {
			return 0, 0, fmt.Errorf("turn: %w", err)
		}
		if first == 0 {
			first = time.Since(start)
		}
		stop = e.StopReason
	}
	total = time.Since(start)
	if stop == aap.StopError {
		return 0, 0, errors.New("turn: stopReason error")
	}
	return first, total, nil
}

// backgroundTurn starts a background turn, timing the 202 answer, and
// waits for the turn's end.
func (l *load) backgroundTurn(ctx context.Context, sid string, req aap.TurnRequest, start time.Time) (first, total time.Duration, err error) {
	bt, err := l.client.StartBackgroundTurn(ctx, sid, req)
	if err != nil {
		return 0, 0, fmt.Errorf("turn: %w", err)
	}
	first = time.Since(start)
	info, err := l.client.WaitTurn(ctx, sid, bt.TurnID)
	if err != nil {
		return 0, 0, fmt.Errorf("turn %s: %w", bt.TurnID, err)
	}
	if info.Status != aapclient.TurnCompleted || info.StopReason == aap.StopError {
		return 0, 0, fmt.Errorf("turn %s: %s, stop reason %q", bt.TurnID, info.Status, info.StopReason)
	}
	return first, time.Since(start), nil
}

// progress writes a line of throughput and latency to w every interval
// until the returned function is called (which waits for it to stop): a
// long run shows how it goes. The line is rewritten in place (\r).
func (r *result) progress(w io.Writer, start time.Time, total int, every time.Duration) (stop func()) {
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(every)
		defer t.Stop()
		last, lastAt := 0, start
		for {
			select {
			case <-done:
				fmt.Fprintln(w)
				return
			case now := <-t.C:
				r.mu.Lock()
				n, errs := len(r.turn), len(r.errors)
				recent := slices.Clone(r.turn[last:])
				r.mu.Unlock()
				slices.Sort(recent)
				p50 := "-"
				if len(recent) > 0 {
					p50 = pct(recent, 50).String()
				}
				fmt.Fprintf(w, "\r%6s  %d/%d turns  %.1f turns/s now  p50 %s  %d errors   ",
					now.Sub(start).Round(time.Second), n, total, float64(n-last)/now.Sub(lastAt).Seconds(), p50, errs)
				last, lastAt = n, now
			}
		}
	}()
	return func() {
		close(done)
		<-stopped
	}
}

func (r *result) print(w io.Writer, elapsed time.Duration, sessions, turns, concurrency int, stream string) {
	fmt.Fprintf(w, "sessions %d × turns %d, concurrency %d, stream %s: %d turns in %s (%.1f turns/s), %d errors\n",
		sessions, turns, concurrency, stream, len(r.turn), elapsed.Round(time.Millisecond),
		float64(len(r.turn))/elapsed.Seconds(), len(r.errors))
	for _, row := range []struct {
		name string
		d    []time.Duration
	}{{firstName(stream), r.firstEvent}, {"whole turn", r.turn}} {
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

// firstName names the first latency of a report: a background turn's
// first answer is its 202.
func firstName(mode string) string {
	if strings.HasSuffix(mode, "(background)") {
		return "202 answer"
	}
	return "first byte"
}

func pct(d []time.Duration, p int) time.Duration {
	return d[min(len(d)-1, len(d)*p/100)].Round(100 * time.Microsecond)
}
