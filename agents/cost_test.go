package agents_test

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/agents"
	"github.com/aapd/aapd/agents/echo"
	"github.com/aapd/aapd/store"
	"github.com/aapd/aapd/store/storetest"
)

func TestMain(m *testing.M) { os.Exit(storetest.Main(m)) }

// A single-step turn on a session with history commits twice (the claim
// with the incoming messages; then the step, the record, the events and
// the release together) in two round trips, and reads nothing back: not
// the session or the history it already holds, not what it wrote. The
// HTTP layer adds one round trip every 30 s, the API key's lookup.
func TestSingleStepTurnCommitsTwiceInFewRoundTrips(t *testing.T) {
	st, counter, runner := countedRunner(t)
	ctx := context.Background()
	tn := storetest.NewTenant(t, st)
	var seed []aap.Message
	for i := range 20 {
		seed = append(seed, aap.UserMessage(strings.Repeat("history ", 50)), aap.Message{Role: aap.RoleAssistant, Content: aap.TextContent("reply " + string(rune('a'+i)))})
	}
	sess, _, err := st.SessionCreate(ctx, store.SessionCreateParams{TenantID: tn.ID, AgentName: "echo", Messages: seed})
	if err != nil {
		t.Fatal(err)
	}

	turn := func(text string) aap.TurnResponse {
		t.Helper()
		h, err := runner.Start(ctx, agents.StartParams{TenantID: tn.ID, SessionID: sess.ID,
			Request: aap.TurnRequest{Messages: []aap.Message{aap.UserMessage(text)}}})
		if err != nil {
			t.Fatal(err)
		}
		resp, err := h.Response(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	// Warm up: the connection prepares its statements, the process caches
	// the session's history.
	turn("one")
	turn("two")
	counter.Reset()
	if resp := turn("three"); len(resp.Messages) != 1 || resp.Messages[0].Content.PlainText() != "Echo: three" {
		t.Fatalf("answer %+v", resp)
	}
	// The worker may still be closing the turn: wait for it.
	waitIdle(t, runner)
	roundTrips, commits, statements := counter.Counts()
	t.Logf("%d round trips, %d commits:\n%s", roundTrips, commits, strings.Join(statements, "\n"))
	if commits != 2 {
		t.Errorf("%d commits, want 2", commits)
	}
	// The session is as this process's last turn left it: the claim reads
	// nothing and is one round trip, the end another.
	if roundTrips != 2 {
		t.Errorf("%d round trips, want 2 (the claim of a session this process left as it is, then the end)", roundTrips)
	}
	for _, s := range statements {
		if strings.Contains(s, "FROM messages") || (strings.Contains(s, "FROM compacted_messages") && !strings.Contains(s, "seq > (SELECT CASE")) {
			t.Errorf("the turn read back a history: %s", s)
		}
	}
}

// countedRunner is a runner of the echo agent on a store of one
// connection whose every round trip counter counts; both are closed when
// the test ends.
func countedRunner(t *testing.T) (*store.Store, *storetest.Counter, *agents.Runner) {
	t.Helper()
	counter := &storetest.Counter{}
	st, err := store.Open(context.Background(), store.Config{DatabaseURL: storetest.URL(t), Tracer: counter, MaxConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	registry, err := agents.NewRegistry(echo.NewAgent())
	if err != nil {
		t.Fatal(err)
	}
	runner := agents.NewRunner(agents.RunnerConfig{Store: st, Agents: registry, Owner: func() int32 { return 1 }, Lease: 30 * time.Second})
	t.Cleanup(func() { _ = runner.Shutdown(context.Background()) })
	return st, counter, runner
}

func waitIdle(t *testing.T, r *agents.Runner) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for r.Running() > 0 {
		if time.Now().After(deadline) {
			t.Fatal("the turn did not end")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A new conversation costs three round trips to the database: the
// session's creation (one statement, or one batched transaction with an
// idempotency key), then its first turn's claim and end. The process
// remembers the session it created, as it does a session at a turn's end,
// so the first claim reads nothing either — with idempotency keys too, as
// aapclient and the official SDKs send them on every POST.
func TestANewSessionAndItsFirstTurnTakeThreeRoundTrips(t *testing.T) {
	st, counter, runner := countedRunner(t)
	ctx := context.Background()
	tn := storetest.NewTenant(t, st)
	conversation := func(text string, keyed bool) {
		t.Helper()
		create := store.SessionCreateParams{TenantID: tn.ID, AgentName: "echo"}
		turn := agents.StartParams{TenantID: tn.ID, Request: aap.TurnRequest{Messages: []aap.Message{aap.UserMessage(text)}}}
		if keyed {
			create.IdempotencyKey, create.RequestHash = "create-"+text, []byte("create")
			turn.IdempotencyKey, turn.RequestHash = "turn-"+text, []byte("turn")
		}
		sess, _, err := runner.CreateSession(ctx, create)
		if err != nil {
			t.Fatal(err)
		}
		turn.SessionID = sess.ID
		h, err := runner.Start(ctx, turn)
		if err != nil {
			t.Fatal(err)
		}
		if resp, err := h.Response(ctx); err != nil || len(resp.Messages) != 1 || resp.Messages[0].Content.PlainText() != "Echo: "+text {
			t.Fatalf("answer %+v, %v", resp, err)
		}
		waitIdle(t, runner)
	}
	for _, keyed := range []bool{false, true} {
		t.Run(map[bool]string{false: "without keys", true: "with idempotency keys"}[keyed], func(t *testing.T) {
			conversation("warm up", keyed) // the connection prepares its statements
			counter.Reset()
			conversation("hello", keyed)
			roundTrips, commits, statements := counter.Counts()
			t.Logf("%d round trips, %d commits:\n%s", roundTrips, commits, strings.Join(statements, "\n"))
			if roundTrips != 3 {
				t.Errorf("%d round trips, want 3 (create, claim, end)", roundTrips)
			}
			for _, s := range statements {
				// The tenant's declaration (store/wall.go) reads nothing.
				if strings.HasPrefix(strings.TrimSpace(s), "SELECT") && !strings.HasPrefix(s, "SELECT aapd_declare_tenant(") {
					t.Errorf("a new conversation read: %s", s)
				}
			}
		})
	}
}

// A stream "none" turn's client hears of it only once its end is
// committed, and that commit puts the claim's WAL on disk too: so that
// turn's claim (Run) commits without waiting for the disk. Every other
// commit waits: a streamed turn shows turn_start after its claim, and a
// turn started by Start may show anything as soon as it is claimed.
func TestOnlyAnAwaitedTurnsClaimCommitsWithoutWaitingForTheDisk(t *testing.T) {
	st, counter, runner := countedRunner(t)
	ctx := context.Background()
	tn := storetest.NewTenant(t, st)
	sess, _, err := runner.CreateSession(ctx, store.SessionCreateParams{TenantID: tn.ID, AgentName: "echo"})
	if err != nil {
		t.Fatal(err)
	}
	const async = "SET LOCAL synchronous_commit TO off"
	for _, tc := range []struct {
		name       string
		start      func(context.Context, agents.StartParams) (*agents.Handle, error)
		stream     aap.StreamMode
		asyncClaim bool
	}{
		{"Run, stream none", runner.Run, aap.StreamNone, true},
		{"Start, stream none", runner.Start, aap.StreamNone, false},
		{"Start, stream delta", runner.Start, aap.StreamDelta, false},
		{"Start, stream message", runner.Start, aap.StreamMessage, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			counter.Reset()
			h, err := tc.start(ctx, agents.StartParams{TenantID: tn.ID, SessionID: sess.ID,
				Request: aap.TurnRequest{Stream: tc.stream, Messages: []aap.Message{aap.UserMessage(tc.name)}}})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := h.Response(ctx); err != nil {
				t.Fatal(err)
			}
			waitIdle(t, runner)
			_, commits, statements := counter.Counts()
			if commits != 2 {
				t.Fatalf("%d commits, want 2 (the claim, the end):\n%s", commits, strings.Join(statements, "\n"))
			}
			// Each commit's transaction, in order: the claim's, then the end's.
			var txs [][]string
			var tx []string
			for _, s := range statements {
				tx = append(tx, s)
				if s == "COMMIT" {
					txs, tx = append(txs, tx), nil
				}
			}
			if len(txs) != 2 {
				t.Fatalf("%d transactions end with COMMIT, want 2:\n%s", len(txs), strings.Join(statements, "\n"))
			}
			if got := slices.Contains(txs[0], async); got != tc.asyncClaim {
				t.Errorf("the claim commits without waiting for the disk: %v, want %v:\n%s", got, tc.asyncClaim, strings.Join(txs[0], "\n"))
			}
			if slices.Contains(txs[1], async) {
				t.Errorf("the turn's end commits without waiting for the disk:\n%s", strings.Join(txs[1], "\n"))
			}
		})
	}
}
