package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/aapclient"
	"github.com/aapd/aapd/store/storetest"
)

// The background-turn fault run (docs/background.md): two replicas over a
// PostgreSQL of the test's own run background turns while the replicas are
// SIGKILLed and PostgreSQL is restarted with -m immediate. Every turn must
// end completed (or failed with attempts_exhausted, counted), and every
// session's history must hold each message once, in order; and every
// turn's end must reach the tenant's webhook endpoint, signed, under one
// event id (redelivered perhaps, never two events for one end).
//
// `make test` runs a short version; `make test-faults-background` the full
// one (AAPD_FAULTS=full): 1,000 turns, each replica killed twice and
// PostgreSQL restarted twice. Checks of what turns' ends cause elsewhere
// join faultRun.checks.

// faultPlan is the size of a fault run.
type faultPlan struct {
	sessions, turnsEach int
	// faults are inflicted in this order, spread over the run: "kill 0",
	// "kill 1" (a replica), "restart" (PostgreSQL).
	faults []string
}

func faultPlanFromEnv() faultPlan {
	if os.Getenv("AAPD_FAULTS") == "full" {
		return faultPlan{sessions: 50, turnsEach: 20,
			faults: []string{"kill 0", "restart", "kill 1", "kill 0", "restart", "kill 1"}}
	}
	return faultPlan{sessions: 8, turnsEach: 5, faults: []string{"kill 0", "restart", "kill 1"}}
}

// faultRun is one run: its database, replicas and what its turns became.
type faultRun struct {
	t     *testing.T
	pg    *privatePostgres
	dbURL string
	key   string
	env   []string // the replicas' environment, added to the test's
	args  []string

	mu       sync.Mutex
	replicas [2]*proc
	done     atomic.Int64 // turns ended

	// turns[s][k] is the record of session s's turn k once it ended.
	sessions []string
	turns    [][]aapclient.TurnInfo
	// checks run once every turn has ended, after the run's own.
	checks []func(*faultRun)
}

// base is a live replica's base URL, picked at random.
func (f *faultRun) base() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.replicas[rand.IntN(2)].base
}

// api is a client of a random replica that tries once: the run retries
// itself, elsewhere.
func (f *faultRun) api() *aapclient.Client {
	api, err := aapclient.New(f.base(), aapclient.WithAPIKey(f.key), aapclient.WithRetryPolicy(aapclient.RetryPolicy{MaxAttempts: 1}))
	if err != nil {
		panic(err)
	}
	return api
}

// replace SIGKILLs replica i and starts another in its place.
func (f *faultRun) replace(i int) {
	f.mu.Lock()
	dead := f.replicas[i]
	f.mu.Unlock()
	dead.kill()
	fresh := startProcEnv(f.t, f.dbURL, f.env, f.args...)
	f.mu.Lock()
	f.replicas[i] = fresh
	f.mu.Unlock()
}

func faultTurnText(s, k int) string {
	return fmt.Sprintf("/slow 100\n/tool calculator {\"expression\":\"%d+1\"}\nturn %d of session %d", k, k, s)
}

// session runs session s's turns one after another, each in the
// background, retrying on any replica until it is accepted, then waiting
// on any replica until it has ended.
func (f *faultRun) session(ctx context.Context, s int) error {
	sid := f.sessions[s]
	for k := range f.turns[s] {
		mode := aap.StreamDelta
		if k%2 == 1 {
			mode = aap.StreamMessage
		}
		req := aap.TurnRequest{Stream: mode, Messages: []aap.Message{aap.UserMessage(faultTurnText(s, k))}}
		key := fmt.Sprintf("fault-%d-%d", s, k)
		var turnID string
		for turnID == "" {
			callCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
			bt, err := f.api().StartBackgroundTurn(callCtx, sid, req, aapclient.WithIdempotencyKey(key))
			cancel()
			switch {
			case err == nil:
				turnID = bt.TurnID
			case ctx.Err() != nil:
				return fmt.Errorf("session %d turn %d never accepted: %w", s, k, err)
			default:
				var e *aapclient.Error
				if errors.As(err, &e) && e.Status != http.StatusServiceUnavailable && e.Status != http.StatusConflict {
					return fmt.Errorf("session %d turn %d refused: %w", s, k, err)
				}
				time.Sleep(200 * time.Millisecond)
			}
		}
		for {
			waitCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
			info, err := f.api().WaitTurn(waitCtx, sid, turnID)
			cancel()
			if err == nil && info.Ended() {
				f.turns[s][k] = info
				f.done.Add(1)
				break
			}
			if ctx.Err() != nil {
				return fmt.Errorf("session %d turn %d (%s) never ended: %v", s, k, turnID, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	return nil
}

func TestBackgroundTurnsUnderFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL and processes")
	}
	plan := faultPlanFromEnv()
	pg, dbURL, tn := crashablePostgresTenant(t)
	f := &faultRun{t: t, pg: pg, dbURL: dbURL, key: tn.Key}
	hooks := newFaultHooks(t, f, tn.ID)
	f.checks = append(f.checks, hooks.check)
	for i := range f.replicas {
		f.replicas[i] = startProcEnv(t, dbURL, f.env, f.args...)
	}
	c := &client{t: t, base: f.replicas[0].base, key: tn.Key}
	for range plan.sessions {
		f.sessions = append(f.sessions, c.echoSession([]aap.ServerToolRef{{Name: "calculator", Trust: true}}))
		f.turns = append(f.turns, make([]aapclient.TurnInfo, plan.turnsEach))
	}
	total := int64(plan.sessions * plan.turnsEach)

	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	errs := make(chan error, plan.sessions)
	var wg sync.WaitGroup
	for s := range plan.sessions {
		wg.Go(func() {
			if err := f.session(ctx, s); err != nil {
				errs <- err
			}
		})
	}
	allDone := make(chan struct{})
	go func() { wg.Wait(); close(allDone) }()

	// The faults, spread over the run: the i-th once i/(n+1) of the turns
	// have ended, each while turns still run.
	start := time.Now()
	for i, fault := range plan.faults {
		at := total * int64(i+1) / int64(len(plan.faults)+1)
		for f.done.Load() < at {
			select {
			case <-allDone:
				t.Fatalf("the run ended before fault %d (%s)", i+1, fault)
			case <-time.After(50 * time.Millisecond):
			}
		}
		t.Logf("%s: %s after %d of %d turns", time.Since(start).Round(time.Millisecond), fault, f.done.Load(), total)
		if f.done.Load() == total {
			t.Errorf("fault %d (%s) came after the last turn", i+1, fault)
		}
		switch fault {
		case "kill 0":
			f.replace(0)
		case "kill 1":
			f.replace(1)
		case "restart":
			pg.ctl("stop", "-m", "immediate")
			time.Sleep(time.Second)
			pg.start()
		}
	}
	select {
	case <-allDone:
	case <-ctx.Done():
		t.Fatalf("the run did not end: %d of %d turns ended", f.done.Load(), total)
	}
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		return
	}
	t.Logf("%d turns in %s", total, time.Since(start).Round(time.Millisecond))
	f.checkTurns()
	f.checkHistories()
	for _, check := range f.checks {
		check(f)
	}
}

// checkTurns: every turn completed, or failed with its attempts exhausted;
// some were resumed (else the faults hit nothing); nothing is left queued.
func (f *faultRun) checkTurns() {
	t := f.t
	resumed, exhausted := 0, 0
	for s, turns := range f.turns {
		for k, info := range turns {
			switch {
			case info.Status == aapclient.TurnCompleted && info.StopReason == aap.StopEndTurn:
			case info.Status == aapclient.TurnFailed && info.Error != nil && info.Error.Type == aap.TurnErrorAttemptsExhausted:
				exhausted++
			default:
				t.Errorf("session %d turn %d: %+v (error %+v)", s, k, info, info.Error)
			}
			if info.Attempts > 1 {
				resumed++
			}
		}
	}
	t.Logf("turns resumed by another worker: %d; failed with attempts_exhausted: %d", resumed, exhausted)
	if resumed == 0 {
		t.Error("no turn was resumed: the faults hit no running turn")
	}
	var left int
	storetest.Scan(t, f.dbURL, `SELECT count(*) FROM turn_queue`, nil, &left)
	if left != 0 {
		t.Errorf("%d turns left in the queue", left)
	}
}

// checkHistories reads every session's history message by message: each
// turn's messages once, in order — all four of a completed turn (the
// user's, the answer calling the calculator, its result, the report), and
// of a failed one what it had committed.
func (f *faultRun) checkHistories() {
	t := f.t
	c := &client{t: t, base: f.base(), key: f.key}
	for s, sid := range f.sessions {
		msgs := c.history(sid, aap.HistoryFull)
		i := 0
		for k, info := range f.turns[s] {
			want := []string{
				"user: " + faultTurnText(s, k),
				fmt.Sprintf("assistant: Echo: turn %d of session %d", k, s),
				fmt.Sprintf("tool: %d", k+1),
				fmt.Sprintf("assistant: Tool results: calculator: %d", k+1),
			}
			n := len(want)
			if info.Status != aapclient.TurnCompleted {
				// What it had committed: its claim, perhaps its first step.
				n = 1
				if i+1 < len(msgs) && msgs[i+1].Role == aap.RoleAssistant {
					n = 3
				}
			}
			got := historyLines(msgs[i:min(i+n, len(msgs))])
			if fmt.Sprint(got) != fmt.Sprint(want[:n]) {
				t.Errorf("session %d turn %d: history from message %d:\n got %q\nwant %q", s, k, i+1, got, want[:n])
				break
			}
			i += n
		}
		if i != len(msgs) && !t.Failed() {
			t.Errorf("session %d: %d messages after its last turn's: %q", s, len(msgs)-i, historyLines(msgs[i:]))
		}
		if calls := toolCalls(msgs); len(calls) > 0 {
			seen := map[string]bool{}
			for _, call := range calls {
				if seen[call.ToolCallID] {
					t.Errorf("session %d: tool call %s stored twice", s, call.ToolCallID)
				}
				seen[call.ToolCallID] = true
			}
		}
		// Each turn's log: one turn_start, one turn_stop, last.
		for k, info := range f.turns[s] {
			events := c.followTurn(sid, info.TurnID, 0).read(-1)
			kinds := strings.Join(types(events), ",")
			if strings.Count(kinds, "turn_start") != 1 || strings.Count(kinds, "turn_stop") != 1 || events[len(events)-1].Type != aap.EventTurnStop {
				t.Errorf("session %d turn %d: events %s", s, k, kinds)
			}
		}
	}
}
