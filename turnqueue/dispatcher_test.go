package turnqueue_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/agents"
	"github.com/aapd/aapd/agents/echo"
	"github.com/aapd/aapd/store"
	"github.com/aapd/aapd/store/storetest"
	"github.com/aapd/aapd/turnqueue"
)

func TestMain(m *testing.M) { os.Exit(storetest.Main(m)) }

// process is a runner and its dispatcher, as aapd serve wires them, with
// an instance of its own.
func process(t *testing.T, st *store.Store, workers int) *agents.Runner {
	t.Helper()
	in, err := st.StartInstance(context.Background(), store.InstanceParams{})
	if err != nil {
		t.Fatal(err)
	}
	registry, err := agents.NewRegistry(echo.NewAgent())
	if err != nil {
		t.Fatal(err)
	}
	runner := agents.NewRunner(agents.RunnerConfig{Store: st, Agents: registry, Owner: in.ID, Workers: workers})
	d := turnqueue.New(turnqueue.Config{Store: st, Runner: runner, Poll: 50 * time.Millisecond, DeadConfirm: 200 * time.Millisecond})
	d.Start()
	t.Cleanup(func() {
		d.Stop()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = runner.Shutdown(ctx)
		in.Close()
	})
	return runner
}

func newSession(t *testing.T, st *store.Store, tenantID string) string {
	t.Helper()
	sess, _, err := st.SessionCreate(context.Background(), store.SessionCreateParams{TenantID: tenantID, AgentName: "echo"})
	if err != nil {
		t.Fatal(err)
	}
	return sess.ID
}

func waitEnded(t *testing.T, st *store.Store, ref store.TurnRef) store.Turn {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		rec, err := st.TurnGet(context.Background(), ref.TenantID, ref.SessionID, ref.TurnID)
		if err != nil {
			t.Fatal(err)
		}
		if rec.Status.Ended() {
			return rec
		}
		if time.Now().After(deadline) {
			t.Fatalf("turn %s did not end: %+v", ref.TurnID, rec)
		}
	}
}

// Background turns queued while the only worker is busy run, one after
// another in the order they were queued, once it frees.
func TestQueuedTurnsRunInOrderOnceAWorkerFrees(t *testing.T) {
	st := storetest.OpenURL(t, storetest.NewDatabase(t))
	ctx := context.Background()
	tn := storetest.NewTenant(t, st)
	runner := process(t, st, 1)
	busy, err := runner.Start(ctx, agents.StartParams{TenantID: tn.ID, SessionID: newSession(t, st, tn.ID),
		Request: aap.TurnRequest{Messages: []aap.Message{aap.UserMessage("/slow 100\n/words 5")}}})
	if err != nil {
		t.Fatal(err)
	}
	var queued []store.TurnRef
	for range 3 {
		h, err := runner.StartBackground(ctx, agents.StartParams{TenantID: tn.ID, SessionID: newSession(t, st, tn.ID),
			Request: aap.TurnRequest{Messages: []aap.Message{aap.UserMessage("/slow 20\n/words 3")}}})
		if err != nil {
			t.Fatal(err)
		}
		if h.Turn.Status != store.TurnQueued {
			t.Fatalf("background turn with the worker busy: %+v", h.Turn)
		}
		queued = append(queued, h.Turn.Ref())
	}
	if _, err := busy.Response(ctx); err != nil {
		t.Fatal(err)
	}
	var last time.Time
	for i, ref := range queued {
		rec := waitEnded(t, st, ref)
		if rec.Status != store.TurnCompleted || rec.Attempts != 1 || rec.FinishedAt == nil {
			t.Fatalf("queued turn %d = %+v", i+1, rec)
		}
		if rec.FinishedAt.Before(last) {
			t.Errorf("queued turn %d ended before the one queued before it", i+1)
		}
		last = *rec.FinishedAt
	}
}

// A background turn whose process died is resumed by a live process's
// dispatcher once the dead one has looked dead for a moment.
func TestOrphanedTurnIsResumedByAnotherProcess(t *testing.T) {
	st := storetest.OpenURL(t, storetest.NewDatabase(t))
	ctx := context.Background()
	tn := storetest.NewTenant(t, st)
	sid := newSession(t, st, tn.ID)
	// The claim of a process that has gone: instance 1 is held by none.
	begun, err := st.TurnBegin(ctx, &store.TurnBeginParams{
		TenantID: tn.ID, SessionID: sid, TurnID: store.NewTurnID(), Stream: aap.StreamNone, Owner: 1, Lease: time.Minute, Background: true,
		Prepare: func(store.Session) (store.TurnPlan, error) {
			return store.TurnPlan{Messages: []store.NewMessage{{Message: aap.UserMessage("still there?"), Origin: store.OriginClient}}}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	process(t, st, 4)
	rec := waitEnded(t, st, begun.Turn.Ref())
	if rec.Status != store.TurnCompleted || rec.Attempts != 2 {
		t.Errorf("record = %+v", rec)
	}
	h, err := st.History(ctx, store.HistoryParams{TenantID: tn.ID, SessionID: sid, Type: aap.HistoryFull})
	if err != nil || len(h) != 2 || h[1].Message.Content.PlainText() != "Echo: still there?" {
		t.Errorf("history = %+v, %v", h, err)
	}
}
