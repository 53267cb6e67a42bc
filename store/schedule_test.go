package store_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/store"
	"github.com/aapd/aapd/store/storetest"
)

// newSchedule stores an "every" schedule of a new session of the tenant,
// due at due.
func newSchedule(t *testing.T, st *store.Store, tenantID string, due time.Time) store.Schedule {
	t.Helper()
	ctx := context.Background()
	sess, _, err := st.SessionCreate(ctx, store.SessionCreateParams{TenantID: tenantID, AgentName: "echo"})
	if err != nil {
		t.Fatal(err)
	}
	sc, err := st.ScheduleCreate(ctx, store.ScheduleCreateParams{Schedule: store.Schedule{
		TenantID: tenantID, SessionID: sess.ID, ID: store.NewScheduleID(), Every: time.Second,
		Request: aap.TurnRequest{Messages: []aap.Message{aap.UserMessage("tick")}}, NextRunAt: &due,
	}})
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

// tickPlan runs the schedule's due tick (whatever is due) as a queued
// background turn, and sets its next tick an hour later.
func tickPlan(turnID *string) func(store.Schedule, time.Time) store.ScheduleTick {
	return func(sc store.Schedule, now time.Time) store.ScheduleTick {
		next := now.Add(time.Hour)
		*turnID = store.NewTurnID()
		return store.ScheduleTick{At: *sc.NextRunAt, Next: &next, Turn: &store.TurnBeginParams{
			TenantID: sc.TenantID, SessionID: sc.SessionID, TurnID: *turnID, Stream: aap.StreamNone,
			Background: true, Queued: true, IdempotencyKey: sc.ID + "@" + sc.NextRunAt.UTC().Format(time.RFC3339Nano), RequestHash: []byte("h"),
			Prepare: func(store.Session) (store.TurnPlan, error) {
				return store.TurnPlan{Messages: []store.NewMessage{{Message: aap.UserMessage("tick"), Origin: store.OriginClient}}}, nil
			},
		}}
	}
}

// Of many firings of one due tick at once (replicas looking together),
// exactly one queues a turn and advances the schedule; the others find it
// claimed or not due.
func TestScheduleFireClaimsATickOnce(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t)
	ctx := context.Background()
	tn := storetest.NewTenant(t, st)
	sc := newSchedule(t, st, tn.ID, time.Now().Add(-time.Second))

	const firers = 8
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		fired []*store.ScheduleFired
	)
	for range firers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var id string
			f, err := st.ScheduleFire(ctx, store.ScheduleFireParams{Ref: sc.Ref(), Plan: tickPlan(&id)})
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if f != nil {
				fired = append(fired, f)
			}
		}()
	}
	wg.Wait()
	if len(fired) != 1 || fired[0].Turn == nil {
		t.Fatalf("%d firings fired, want 1 with a turn: %+v", len(fired), fired)
	}
	turn := fired[0].Turn
	if turn.Status != store.TurnQueued || !turn.Background {
		t.Errorf("the tick's turn = %+v, want a queued background turn", turn)
	}
	got, err := st.ScheduleGet(ctx, sc.Ref(), "")
	if err != nil {
		t.Fatal(err)
	}
	if got.Runs != 1 || got.LastTurnID != turn.ID || got.NextRunAt == nil || !got.NextRunAt.After(time.Now()) {
		t.Errorf("schedule after its tick = runs %d, last turn %q, next %v; want 1, %q, an hour on", got.Runs, got.LastTurnID, got.NextRunAt, turn.ID)
	}
	waiting, err := st.TurnQueueWaiting(ctx, 100)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, w := range waiting {
		if w.Ref.SessionID == sc.SessionID {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d turns of the session wait in the queue, want 1", n)
	}
	// Not due any more: nothing fires.
	var id string
	if f, err := st.ScheduleFire(ctx, store.ScheduleFireParams{Ref: sc.Ref(), Plan: tickPlan(&id)}); f != nil || err != nil {
		t.Errorf("firing a schedule not due = %+v, %v; want nil, nil", f, err)
	}
}

// A tick whose session still runs a turn starts none: it is skipped,
// counted, and the schedule goes on to its next tick.
func TestScheduleFireSkipsWhileTheSessionRuns(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t)
	ctx := context.Background()
	tn := storetest.NewTenant(t, st)
	sc := newSchedule(t, st, tn.ID, time.Now().Add(-time.Second))
	var first string
	if f, err := st.ScheduleFire(ctx, store.ScheduleFireParams{Ref: sc.Ref(), Plan: tickPlan(&first)}); err != nil || f == nil || f.Turn == nil {
		t.Fatalf("first tick = %+v, %v", f, err)
	}
	// Due again while the first tick's turn still waits for a worker.
	storetest.Exec(t, storetest.URL(t), `UPDATE schedules SET next_run_at = now() - interval '1 second' WHERE tenant_id = $1 AND id = $2`, tn.ID, sc.ID)
	var second string
	f, err := st.ScheduleFire(ctx, store.ScheduleFireParams{Ref: sc.Ref(), Plan: tickPlan(&second)})
	if err != nil || f == nil {
		t.Fatalf("second tick = %+v, %v", f, err)
	}
	if f.Turn != nil || f.Skipped != store.ScheduleSkipRunning {
		t.Errorf("second tick = turn %v, skipped %q; want none, %q", f.Turn, f.Skipped, store.ScheduleSkipRunning)
	}
	got, err := st.ScheduleGet(ctx, sc.Ref(), "")
	if err != nil {
		t.Fatal(err)
	}
	if got.Runs != 1 || got.SkippedRunning != 1 || got.LastTurnID != first || got.NextRunAt == nil || !got.NextRunAt.After(time.Now()) {
		t.Errorf("schedule = runs %d, skipped running %d, last turn %q, next %v; want 1, 1, %q, advanced", got.Runs, got.SkippedRunning, got.LastTurnID, got.NextRunAt, first)
	}
	if _, err := st.TurnGet(ctx, tn.ID, sc.SessionID, second); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the skipped tick's turn: %v, want none", err)
	}
}

// A tick whose turn the pipeline refuses is skipped and counted, and the
// refusal kept; a tick that ran nothing (missed) only advances.
func TestScheduleFireCountsRefusedAndMissedTicks(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t)
	ctx := context.Background()
	tn := storetest.NewTenant(t, st)
	sc := newSchedule(t, st, tn.ID, time.Now().Add(-time.Second))
	refusal := &aap.Error{Field: "messages", Msg: "refused"}
	var id string
	plan := tickPlan(&id)
	f, err := st.ScheduleFire(ctx, store.ScheduleFireParams{Ref: sc.Ref(), Plan: func(sc store.Schedule, now time.Time) store.ScheduleTick {
		tick := plan(sc, now)
		tick.Turn.Prepare = func(store.Session) (store.TurnPlan, error) { return store.TurnPlan{}, refusal }
		tick.Missed = 2
		return tick
	}})
	if err != nil || f == nil || f.Skipped != store.ScheduleSkipRefused || !errors.Is(f.Refusal, refusal) {
		t.Fatalf("refused tick = %+v, %v", f, err)
	}
	got, err := st.ScheduleGet(ctx, sc.Ref(), "")
	if err != nil {
		t.Fatal(err)
	}
	if got.Runs != 0 || got.SkippedRefused != 1 || got.SkippedMissed != 2 || got.LastError == "" {
		t.Errorf("schedule = runs %d, refused %d, missed %d, last error %q; want 0, 1, 2, the refusal", got.Runs, got.SkippedRefused, got.SkippedMissed, got.LastError)
	}
	// Ended: no next tick, not due again.
	storetest.Exec(t, storetest.URL(t), `UPDATE schedules SET next_run_at = now() - interval '1 second' WHERE tenant_id = $1 AND id = $2`, tn.ID, sc.ID)
	f, err = st.ScheduleFire(ctx, store.ScheduleFireParams{Ref: sc.Ref(), Plan: func(store.Schedule, time.Time) store.ScheduleTick {
		return store.ScheduleTick{Missed: 1}
	}})
	if err != nil || f == nil || f.Turn != nil {
		t.Fatalf("ending tick = %+v, %v", f, err)
	}
	if got, err = st.ScheduleGet(ctx, sc.Ref(), ""); err != nil || got.NextRunAt != nil || got.SkippedMissed != 3 {
		t.Errorf("ended schedule = next %v, missed %d, %v; want none, 3", got.NextRunAt, got.SkippedMissed, err)
	}
	due, err := st.SchedulesDue(ctx, 1000)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range due {
		if r.ScheduleID == sc.ID {
			t.Error("an ended schedule is due")
		}
	}
}

// Schedules belong to their session and tenant: another tenant's (or
// owner's) lookups find nothing, and deleting the session or the tenant
// deletes them.
func TestSchedulesGoWithTheirSessionAndTenant(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t)
	ctx := context.Background()
	tn, other := storetest.NewTenant(t, st), storetest.NewTenant(t, st)
	sc := newSchedule(t, st, tn.ID, time.Now().Add(time.Hour))
	foreign := sc.Ref()
	foreign.TenantID = other.ID
	if _, err := st.ScheduleGet(ctx, foreign, ""); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("another tenant's get: %v, want not found", err)
	}
	if _, err := st.ScheduleList(ctx, other.ID, "", sc.SessionID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("another tenant's list: %v, want not found", err)
	}
	if err := st.ScheduleDelete(ctx, foreign, ""); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("another tenant's delete: %v, want not found", err)
	}
	if _, err := st.ScheduleGet(ctx, sc.Ref(), "someone"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("another owner's get: %v, want not found", err)
	}
	if list, err := st.ScheduleList(ctx, tn.ID, "", sc.SessionID); err != nil || len(list) != 1 {
		t.Fatalf("list = %v, %v; want the schedule", list, err)
	}

	if _, err := st.SessionDelete(ctx, tn.ID, sc.SessionID); err != nil {
		t.Fatal(err)
	}
	var n int
	storetest.Scan(t, storetest.URL(t), `SELECT count(*) FROM schedules WHERE tenant_id = $1`, []any{tn.ID}, &n)
	if n != 0 {
		t.Errorf("%d schedules left after their session's deletion", n)
	}

	sc2 := newSchedule(t, st, other.ID, time.Now().Add(time.Hour))
	if err := st.TenantDelete(ctx, other.ID); err != nil {
		t.Fatal(err)
	}
	storetest.Scan(t, storetest.URL(t), `SELECT count(*) FROM schedules WHERE tenant_id = $1`, []any{sc2.TenantID}, &n)
	if n != 0 {
		t.Errorf("%d schedules left after their tenant's deletion", n)
	}
}

// A session has at most MaxSchedulesPerSession schedules.
func TestScheduleCreateLimit(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t)
	ctx := context.Background()
	tn := storetest.NewTenant(t, st)
	sc := newSchedule(t, st, tn.ID, time.Now().Add(time.Hour))
	for range store.MaxSchedulesPerSession - 1 {
		next := sc
		next.ID = store.NewScheduleID()
		if _, err := st.ScheduleCreate(ctx, store.ScheduleCreateParams{Schedule: next}); err != nil {
			t.Fatal(err)
		}
	}
	sc.ID = store.NewScheduleID()
	if _, err := st.ScheduleCreate(ctx, store.ScheduleCreateParams{Schedule: sc}); !errors.Is(err, store.ErrScheduleLimit) {
		t.Errorf("one schedule too many: %v, want ErrScheduleLimit", err)
	}
}
