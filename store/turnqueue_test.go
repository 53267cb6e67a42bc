package store_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/store"
	"github.com/aapd/aapd/store/storetest"
)

// deadOwner is an instance id no process holds: a claim of it is a claim
// whose process died.
const deadOwner = 1

// beginBackground claims a new session of the tenant for a background turn
// whose user message is text: queued (no worker), or run by owner.
func beginBackground(t *testing.T, st *store.Store, tenantID, text string, queued bool, owner int32, maxQueued int) (*store.TurnBegun, error) {
	t.Helper()
	ctx := context.Background()
	sess, _, err := st.SessionCreate(ctx, store.SessionCreateParams{TenantID: tenantID, AgentName: "echo"})
	if err != nil {
		t.Fatal(err)
	}
	return st.TurnBegin(ctx, &store.TurnBeginParams{
		TenantID: tenantID, SessionID: sess.ID, TurnID: store.NewTurnID(), Stream: aap.StreamDelta, Owner: owner, Lease: time.Minute,
		Background: true, Queued: queued, MaxQueued: maxQueued,
		Prepare: func(store.Session) (store.TurnPlan, error) {
			return store.TurnPlan{Messages: []store.NewMessage{{Message: aap.UserMessage(text), Origin: store.OriginClient}}}, nil
		},
	})
}

// liveInstance is an instance id a live process (this test) holds.
func liveInstance(t *testing.T, st *store.Store) int32 {
	t.Helper()
	in, err := st.StartInstance(context.Background(), store.InstanceParams{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(in.Close)
	return in.ID()
}

func waitingIDs(t *testing.T, st *store.Store) []string {
	t.Helper()
	waiting, err := st.TurnQueueWaiting(context.Background(), 100)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, w := range waiting {
		out = append(out, fmt.Sprintf("%s orphaned=%v", w.Ref.TurnID, w.Orphaned))
	}
	return out
}

func assistant(text string) []store.NewMessage {
	return []store.NewMessage{{Message: aap.AssistantMessage(aap.ContentBlock{Type: aap.BlockText, Text: text}), Origin: store.OriginAgent}}
}

// A queued turn holds its session (another turn gets a 409, however dead
// its claim looks) and waits until a worker adopts it; its record says
// queued, with no attempt, then running, with one.
func TestQueuedBackgroundTurnHoldsItsSessionUntilAdopted(t *testing.T) {
	dbURL := storetest.NewDatabase(t)
	st := storetest.OpenURL(t, dbURL)
	ctx := context.Background()
	tn := storetest.NewTenant(t, st)
	begun, err := beginBackground(t, st, tn.ID, "hi", true, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	ref := begun.Turn.Ref()
	if rec, err := st.TurnGet(ctx, ref.TenantID, ref.SessionID, ref.TurnID); err != nil || rec.Status != store.TurnQueued || rec.Attempts != 0 || !rec.Background {
		t.Fatalf("queued record = %+v, %v", rec, err)
	}
	_, err = st.TurnBegin(ctx, &store.TurnBeginParams{TenantID: ref.TenantID, SessionID: ref.SessionID, TurnID: store.NewTurnID(),
		Stream: aap.StreamNone, Owner: 2, Lease: time.Minute, Prepare: func(store.Session) (store.TurnPlan, error) { return store.TurnPlan{}, nil }})
	var running *store.TurnRunningError
	if !errors.As(err, &running) || running.TurnID != ref.TurnID {
		t.Fatalf("a turn on the queued turn's session: %v, want TurnRunningError naming it", err)
	}
	if done, err := st.TurnInterruptIfDead(ctx, ref); done || err != nil {
		t.Errorf("a queued turn was interrupted as dead: %v, %v", done, err)
	}
	if got := waitingIDs(t, st); fmt.Sprint(got) != fmt.Sprint([]string{ref.TurnID + " orphaned=false"}) {
		t.Errorf("waiting = %v", got)
	}

	owner := liveInstance(t, st)
	adopted, err := st.TurnAdopt(ctx, store.TurnAdoptParams{Ref: ref, Owner: owner, Lease: time.Minute, MaxAttempts: 3})
	if err != nil || adopted.Ended || adopted.Turn.Attempts != 1 || adopted.Turn.Status != store.TurnRunning || adopted.Step != 0 {
		t.Fatalf("adopt = %+v, %v", adopted, err)
	}
	if len(adopted.History) != 1 || adopted.History[0].Message.Content.PlainText() != "hi" || adopted.LastSeq != 1 {
		t.Errorf("adopted history = %+v, last seq %d", adopted.History, adopted.LastSeq)
	}
	if got := waitingIDs(t, st); len(got) != 0 {
		t.Errorf("a turn a live worker runs is still waiting: %v", got)
	}
	if _, err := st.TurnAdopt(ctx, store.TurnAdoptParams{Ref: ref, Owner: owner, Lease: time.Minute, MaxAttempts: 3}); !errors.Is(err, store.ErrNotAdoptable) {
		t.Errorf("a second adoption: %v, want ErrNotAdoptable", err)
	}
	if _, err := st.TurnFinish(ctx, store.TurnFinishParams{Ref: ref, Step: 1, FirstSeq: 2, Messages: assistant("Echo: hi"),
		Status: store.TurnCompleted, StopReason: aap.StopEndTurn, Attempt: 1,
		Events: []aap.Event{aap.TurnStart(), aap.TurnStop(aap.StopEndTurn)}}); err != nil {
		t.Fatal(err)
	}
	var rows int
	storetest.Scan(t, dbURL, `SELECT count(*) FROM turn_queue WHERE tenant_id = $1`, []any{tn.ID}, &rows)
	if rows != 0 {
		t.Errorf("the turn's end left %d rows in the queue", rows)
	}
}

// A background turn whose process died is resumed from its last committed
// step by the next worker; the worker it replaced (alive after all, say)
// writes nothing more: no step, no event, no end, no heartbeat.
func TestResumedBackgroundTurnFencesTheAttemptItReplaced(t *testing.T) {
	st := storetest.OpenURL(t, storetest.NewDatabase(t))
	ctx := context.Background()
	tn := storetest.NewTenant(t, st)
	begun, err := beginBackground(t, st, tn.ID, "hi", false, deadOwner, 0)
	if err != nil {
		t.Fatal(err)
	}
	ref := begun.Turn.Ref()
	step1 := store.TurnStepParams{Ref: ref, Step: 1, FirstSeq: 2, Messages: assistant("step one"), Lease: time.Minute,
		Attempt: 1, InputTokens: 10, OutputTokens: 3}
	if err := st.TurnCommitStep(ctx, step1); err != nil {
		t.Fatal(err)
	}
	if ok, err := st.TurnEventsAppend(ctx, ref, 1, 1, []aap.Event{aap.TurnStart(), {Type: aap.EventText, Text: "step one"}}); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if got := waitingIDs(t, st); fmt.Sprint(got) != fmt.Sprint([]string{ref.TurnID + " orphaned=true"}) {
		t.Fatalf("waiting = %v", got)
	}

	owner := liveInstance(t, st)
	adopted, err := st.TurnAdopt(ctx, store.TurnAdoptParams{Ref: ref, Owner: owner, Lease: time.Minute, MaxAttempts: 3})
	if err != nil || adopted.Turn.Attempts != 2 || adopted.Step != 1 || adopted.LastSeq != 2 || len(adopted.Events) != 2 ||
		adopted.Turn.InputTokens != 10 || adopted.Turn.OutputTokens != 3 {
		t.Fatalf("adopt = %+v, %v", adopted, err)
	}

	// The replaced attempt.
	old := store.TurnStepParams{Ref: ref, Step: 2, FirstSeq: 3, Messages: assistant("stale"), Lease: time.Minute, Attempt: 1}
	if err := st.TurnCommitStep(ctx, old); !errors.Is(err, store.ErrClaimLost) {
		t.Errorf("the replaced attempt's step: %v, want ErrClaimLost", err)
	}
	if ok, err := st.TurnEventsAppend(ctx, ref, 1, 3, []aap.Event{{Type: aap.EventText, Text: "stale"}}); ok || err != nil {
		t.Errorf("the replaced attempt's events: %v, %v", ok, err)
	}
	if held, _, err := st.TurnsHeartbeat(ctx, []store.TurnRef{ref}, deadOwner, time.Minute); err != nil || held[ref.TurnID] {
		t.Errorf("the replaced attempt's heartbeat: held %v, %v", held, err)
	}
	if _, err := st.TurnFinish(ctx, store.TurnFinishParams{Ref: ref, Step: 2, FirstSeq: 3, Messages: assistant("stale"),
		Status: store.TurnCompleted, Attempt: 1, Events: []aap.Event{aap.TurnStart(), aap.TurnStop(aap.StopEndTurn)}}); !errors.Is(err, store.ErrClaimLost) {
		t.Errorf("the replaced attempt's end: %v, want ErrClaimLost", err)
	}

	// The new attempt goes on: its step 2, the same number, is its own.
	if held, _, err := st.TurnsHeartbeat(ctx, []store.TurnRef{ref}, owner, time.Minute); err != nil || !held[ref.TurnID] {
		t.Errorf("the new attempt's heartbeat: held %v, %v", held, err)
	}
	events := append(adopted.Events, aap.Event{Type: aap.EventText, Text: "step two"}, aap.TurnStop(aap.StopEndTurn))
	if _, err := st.TurnFinish(ctx, store.TurnFinishParams{Ref: ref, Step: 2, FirstSeq: 3, Messages: assistant("step two"),
		Status: store.TurnCompleted, StopReason: aap.StopEndTurn, Attempt: 2, InputTokens: 20, OutputTokens: 6, Events: events}); err != nil {
		t.Fatal(err)
	}
	if got, want := historyTexts(t, st, ref, aap.HistoryFull), []string{"1:hi", "2:step one", "3:step two"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("history = %q, want %q", got, want)
	}
	rec, err := st.TurnGet(ctx, ref.TenantID, ref.SessionID, ref.TurnID)
	if err != nil || rec.Status != store.TurnCompleted || rec.Attempts != 2 || rec.InputTokens != 20 {
		t.Errorf("record = %+v, %v", rec, err)
	}
	log, err := st.TurnEventsAfter(ctx, ref, 0)
	if err != nil || log.Len != 4 || log.Events[1].Text != "step one" || log.Events[2].Text != "step two" {
		t.Errorf("log = %+v, %v", log, err)
	}
}

// A background turn begun as often as it may be is failed with
// attempts_exhausted instead of adopted again: its log closed, its session
// free, its committed messages kept, nothing left in the queue.
func TestBackgroundTurnFailsOnceItsAttemptsAreExhausted(t *testing.T) {
	dbURL := storetest.NewDatabase(t)
	st := storetest.OpenURL(t, dbURL)
	ctx := context.Background()
	tn := storetest.NewTenant(t, st)
	begun, err := beginBackground(t, st, tn.ID, "hi", false, deadOwner, 0)
	if err != nil {
		t.Fatal(err)
	}
	ref := begun.Turn.Ref()
	owner := liveInstance(t, st)
	// Attempt 2 is adopted; its process dies too (its claim goes back to a
	// dead owner).
	if a, err := st.TurnAdopt(ctx, store.TurnAdoptParams{Ref: ref, Owner: owner, Lease: time.Minute, MaxAttempts: 2}); err != nil || a.Ended {
		t.Fatalf("second attempt: %+v, %v", a, err)
	}
	storetest.Exec(t, dbURL, `UPDATE sessions SET lease_owner = $2 WHERE id = $1`, ref.SessionID, deadOwner)
	ended, err := st.TurnAdopt(ctx, store.TurnAdoptParams{Ref: ref, Owner: owner, Lease: time.Minute, MaxAttempts: 2})
	if err != nil || !ended.Ended {
		t.Fatalf("adopt past the attempts = %+v, %v", ended, err)
	}
	rec := ended.Turn
	if rec.Status != store.TurnFailed || rec.StopReason != aap.StopError || rec.ErrorType != aap.TurnErrorAttemptsExhausted || rec.Attempts != 2 {
		t.Errorf("record = %+v", rec)
	}
	log, err := st.TurnEventsAfter(ctx, ref, 0)
	if err != nil || !log.Finished || log.Len != 2 || log.Events[1].Type != aap.EventTurnStop || log.Events[1].Error.Type != aap.TurnErrorAttemptsExhausted {
		t.Errorf("log = %+v, %v", log, err)
	}
	sess, err := st.SessionGet(ctx, ref.TenantID, ref.SessionID)
	if err != nil || sess.ActiveTurnID != "" {
		t.Errorf("session = %+v, %v", sess, err)
	}
	if got := waitingIDs(t, st); len(got) != 0 {
		t.Errorf("waiting = %v", got)
	}
	if got := historyTexts(t, st, ref, aap.HistoryFull); fmt.Sprint(got) != fmt.Sprint([]string{"1:hi"}) {
		t.Errorf("history = %q", got)
	}
}

// A tenant may have maxQueuedTurns turns waiting for their first worker;
// the next is refused, and turns a worker has begun do not count.
func TestQueueFullPastMaxQueuedTurns(t *testing.T) {
	st := storetest.Open(t)
	ctx := context.Background()
	tn := storetest.NewTenant(t, st)
	var first *store.TurnBegun
	for i := range 2 {
		b, err := beginBackground(t, st, tn.ID, "hi", true, 0, 2)
		if err != nil {
			t.Fatalf("queued turn %d: %v", i+1, err)
		}
		if first == nil {
			first = b
		}
	}
	_, err := beginBackground(t, st, tn.ID, "hi", true, 0, 2)
	var full *store.QueueFullError
	if !errors.As(err, &full) || full.Limit != 2 {
		t.Fatalf("third queued turn: %v, want QueueFullError", err)
	}
	if _, err := beginBackground(t, st, storetest.NewTenant(t, st).ID, "hi", true, 0, 2); err != nil {
		t.Errorf("another tenant's queued turn: %v", err)
	}
	if _, err := st.TurnAdopt(ctx, store.TurnAdoptParams{Ref: first.Turn.Ref(), Owner: liveInstance(t, st), Lease: time.Minute, MaxAttempts: 3}); err != nil {
		t.Fatal(err)
	}
	if _, err := beginBackground(t, st, tn.ID, "hi", true, 0, 2); err != nil {
		t.Errorf("queued turn once one of the two runs: %v", err)
	}
}

// Waiting turns are listed first in first out within a tenant, and in
// rounds across tenants: every tenant's oldest, then every tenant's second.
func TestWaitingTurnsAreFIFOWithinATenantAndFairAcrossTenants(t *testing.T) {
	st := storetest.OpenURL(t, storetest.NewDatabase(t))
	a, b, c := storetest.NewTenant(t, st), storetest.NewTenant(t, st), storetest.NewTenant(t, st)
	id := func(tenant storetest.Tenant) string {
		begun, err := beginBackground(t, st, tenant.ID, "hi", true, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		return begun.Turn.ID
	}
	a1, a2, a3 := id(a), id(a), id(a)
	b1 := id(b)
	c1, c2 := id(c), id(c)
	var want []string
	for _, turn := range []string{a1, b1, c1, a2, c2, a3} {
		want = append(want, turn+" orphaned=false")
	}
	if got := waitingIDs(t, st); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("waiting =\n%q\nwant\n%q", got, want)
	}
}

// Cancelling a background turn no worker runs ends it at once; handing a
// running one back makes it wait for the next worker.
func TestBackgroundTurnWithoutWorkerIsCancelledOrHandedBack(t *testing.T) {
	st := storetest.OpenURL(t, storetest.NewDatabase(t))
	ctx := context.Background()
	tn := storetest.NewTenant(t, st)
	owner := liveInstance(t, st)

	queued, err := beginBackground(t, st, tn.ID, "hi", true, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	ref := queued.Turn.Ref()
	if done, err := st.TurnCancelUnowned(ctx, ref); !done || err != nil {
		t.Fatalf("cancel a queued turn: %v, %v", done, err)
	}
	log, err := st.TurnEventsAfter(ctx, ref, 0)
	if err != nil || log.Status != store.TurnCancelled || log.Len != 2 || log.Events[1].StopReason != aap.StopEndTurn {
		t.Errorf("cancelled log = %+v, %v", log, err)
	}

	running, err := beginBackground(t, st, tn.ID, "hi", false, owner, 0)
	if err != nil {
		t.Fatal(err)
	}
	ref = running.Turn.Ref()
	if done, err := st.TurnCancelUnowned(ctx, ref); done || err != nil {
		t.Errorf("cancelled a turn a live worker runs: %v, %v", done, err)
	}
	if got := waitingIDs(t, st); len(got) != 0 {
		t.Errorf("waiting = %v", got)
	}
	if err := st.TurnRelease(ctx, ref, 1); err != nil {
		t.Fatal(err)
	}
	if got := waitingIDs(t, st); fmt.Sprint(got) != fmt.Sprint([]string{ref.TurnID + " orphaned=false"}) {
		t.Errorf("waiting after the hand-back = %v", got)
	}
	// Compaction waits for the turn's end, whoever resumes it.
	snap, err := st.CompactedSnapshotGet(ctx, ref.TenantID, ref.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	_, err = st.CompactionApply(ctx, store.CompactionApplyParams{TenantID: ref.TenantID, SessionID: ref.SessionID,
		BaseVersion: snap.Version, UpTo: 1, Items: []store.CompactedItem{{Message: aap.UserMessage("summary")}},
		Record: store.Compaction{Trigger: "manual", Strategy: "test", FromSeq: 1, ToSeq: 1}})
	var busy *store.TurnRunningError
	if !errors.As(err, &busy) {
		t.Errorf("compaction during a handed-back turn: %v, want TurnRunningError", err)
	}
}
