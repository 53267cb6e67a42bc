package store_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/store"
	"github.com/aapd/aapd/store/storetest"
)

// beginTurn claims a new session of a new tenant for a turn whose user
// message is text.
func beginTurn(t *testing.T, st *store.Store, text string) *store.TurnBegun {
	t.Helper()
	ctx := context.Background()
	tn := storetest.NewTenant(t, st)
	sess, _, err := st.SessionCreate(ctx, store.SessionCreateParams{TenantID: tn.ID, AgentName: "echo"})
	if err != nil {
		t.Fatal(err)
	}
	begun, err := st.TurnBegin(ctx, &store.TurnBeginParams{
		TenantID: tn.ID, SessionID: sess.ID, TurnID: store.NewTurnID(), Stream: aap.StreamNone, Owner: 1, Lease: time.Minute,
		Prepare: func(store.Session) (store.TurnPlan, error) {
			return store.TurnPlan{Messages: []store.NewMessage{{Message: aap.UserMessage(text), Origin: store.OriginClient}}}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return begun
}

func historyTexts(t *testing.T, st *store.Store, ref store.TurnRef, typ aap.HistoryType) []string {
	t.Helper()
	h, err := st.History(context.Background(), store.HistoryParams{TenantID: ref.TenantID, SessionID: ref.SessionID, Type: typ})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range h {
		out = append(out, fmt.Sprintf("%d:%s", m.Seq, m.Message.Content.PlainText()))
	}
	return out
}

// A commit retried after it landed (its answer lost in a crash) is a no-op:
// every write of a turn carries its step's number and its messages' seqs.
func TestRetriedTurnWritesThatLandedAreNoOps(t *testing.T) {
	st := storetest.Open(t)
	ctx := context.Background()
	begun := beginTurn(t, st, "hi")
	ref := begun.Turn.Ref()
	step := store.TurnStepParams{
		Ref: ref, Step: 1, FirstSeq: begun.LastSeq + 1, Lease: time.Minute,
		Messages: []store.NewMessage{{Message: aap.AssistantMessage(aap.ContentBlock{Type: aap.BlockText, Text: "calling"}), Origin: store.OriginAgent}},
	}
	for range 3 {
		if err := st.TurnCommitStep(ctx, step); err != nil {
			t.Fatalf("step committed again: %v", err)
		}
	}
	finish := store.TurnFinishParams{
		Ref: ref, Step: 2, FirstSeq: begun.LastSeq + 2, Status: store.TurnCompleted, StopReason: aap.StopEndTurn,
		Messages: []store.NewMessage{{Message: aap.AssistantMessage(aap.ContentBlock{Type: aap.BlockText, Text: "Echo: hi"}), Origin: store.OriginAgent}},
		Events:   []aap.Event{aap.TurnStart(), {Type: aap.EventText, Text: "Echo: hi"}, aap.TurnStop(aap.StopEndTurn)},
	}
	for range 3 {
		if _, err := st.TurnFinish(ctx, finish); err != nil {
			t.Fatalf("finish written again: %v", err)
		}
	}
	// A step retried after the end landed is a no-op too.
	if err := st.TurnCommitStep(ctx, step); !errors.Is(err, store.ErrClaimLost) {
		t.Errorf("a step after the end: %v, want ErrClaimLost (nothing written)", err)
	}
	want := []string{"1:hi", "2:calling", "3:Echo: hi"}
	for _, typ := range []aap.HistoryType{aap.HistoryFull, aap.HistoryCompacted} {
		if got := historyTexts(t, st, ref, typ); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s history = %q, want %q", typ, got, want)
		}
	}
	log, err := st.TurnEventsAfter(ctx, ref, 0)
	if err != nil || !log.Finished || log.Len != 3 || log.Status != store.TurnCompleted {
		t.Errorf("log = %+v, %v", log, err)
	}
	// The session is free: the next turn claims it.
	if _, err := st.TurnBegin(ctx, &store.TurnBeginParams{TenantID: ref.TenantID, SessionID: ref.SessionID, TurnID: store.NewTurnID(),
		Stream: aap.StreamNone, Owner: 1, Lease: time.Minute,
		Prepare: func(store.Session) (store.TurnPlan, error) { return store.TurnPlan{}, nil }}); err != nil {
		t.Errorf("next turn: %v", err)
	}
}

// A turn whose claim was taken over writes nothing more.
func TestTurnWritesAfterATakeoverAreRefused(t *testing.T) {
	st := storetest.Open(t)
	ctx := context.Background()
	begun := beginTurn(t, st, "hi")
	ref := begun.Turn.Ref()
	storetest.Exec(t, storetest.URL(t), `UPDATE sessions SET lease_expires_at = now() - interval '1 second' WHERE id = $1`, ref.SessionID)
	next, err := st.TurnBegin(ctx, &store.TurnBeginParams{TenantID: ref.TenantID, SessionID: ref.SessionID, TurnID: store.NewTurnID(),
		Stream: aap.StreamNone, Owner: 2, Lease: time.Minute,
		Prepare: func(store.Session) (store.TurnPlan, error) { return store.TurnPlan{}, nil }})
	if err != nil || next.Interrupted != ref.TurnID {
		t.Fatalf("takeover: %+v, %v", next, err)
	}
	msg := []store.NewMessage{{Message: aap.AssistantMessage(aap.ContentBlock{Type: aap.BlockText, Text: "late"}), Origin: store.OriginAgent}}
	if err := st.TurnCommitStep(ctx, store.TurnStepParams{Ref: ref, Step: 1, FirstSeq: 2, Messages: msg, Lease: time.Minute}); !errors.Is(err, store.ErrClaimLost) {
		t.Errorf("step after takeover: %v", err)
	}
	if _, err := st.TurnFinish(ctx, store.TurnFinishParams{Ref: ref, Step: 1, FirstSeq: 2, Messages: msg, Status: store.TurnCompleted,
		Events: []aap.Event{aap.TurnStart(), aap.TurnStop(aap.StopEndTurn)}}); !errors.Is(err, store.ErrClaimLost) {
		t.Errorf("finish after takeover: %v", err)
	}
	if ok, err := st.TurnEventsAppend(ctx, ref, 1, 2, []aap.Event{{Type: aap.EventText, Text: "late"}}); ok || err != nil {
		t.Errorf("events after takeover recorded: %v, %v", ok, err)
	}
	if got := historyTexts(t, st, ref, aap.HistoryFull); fmt.Sprint(got) != "[1:hi]" {
		t.Errorf("history = %q", got)
	}
	log, err := st.TurnEventsAfter(ctx, ref, 0)
	if err != nil || log.Status != store.TurnInterrupted || log.Len != 2 || log.Events[0].Type != aap.EventTurnStart || log.Events[1].Type != aap.EventTurnStop {
		t.Errorf("interrupted turn's log = %+v, %v", log, err)
	}
}

// The log of an interrupted turn keeps every recorded batch and ends with
// turn_stop after the last recorded id: no id a client was sent is reused.
func TestInterruptedTurnLogIsGaplessAndEndsAfterEveryRecordedID(t *testing.T) {
	st := storetest.Open(t)
	ctx := context.Background()
	begun := beginTurn(t, st, "hi")
	ref := begun.Turn.Ref()
	first := []aap.Event{aap.TurnStart(), {Type: aap.EventTextDelta, Delta: "a"}}
	// A batch recorded twice, the second time longer (a retry after a lost
	// answer), then another.
	for _, b := range []struct {
		first  int
		events []aap.Event
	}{{1, first}, {1, append(first, aap.Event{Type: aap.EventTextDelta, Delta: "b"})}, {4, []aap.Event{{Type: aap.EventTextDelta, Delta: "c"}}}} {
		if ok, err := st.TurnEventsAppend(ctx, ref, 1, b.first, b.events); !ok || err != nil {
			t.Fatalf("append: %v %v", ok, err)
		}
	}
	log, err := st.TurnEventsAfter(ctx, ref, 2)
	if err != nil || log.Len != 4 || len(log.Events) != 2 || log.Events[0].Delta != "b" || log.Events[1].Delta != "c" {
		t.Fatalf("running log after 2 = %+v, %v", log, err)
	}
	storetest.Exec(t, storetest.URL(t), `UPDATE sessions SET lease_expires_at = now() - interval '1 second' WHERE id = $1`, ref.SessionID)
	if done, err := st.TurnInterruptIfDead(ctx, ref); !done || err != nil {
		t.Fatalf("interrupt: %v %v", done, err)
	}
	log, err = st.TurnEventsAfter(ctx, ref, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range log.Events {
		got = append(got, string(e.Type)+e.Delta+string(e.StopReason))
	}
	if want := "[turn_start text_deltaa text_deltab text_deltac turn_stoperror]"; fmt.Sprint(got) != want || !log.Finished || log.Len != 5 {
		t.Errorf("log = %v (len %d, finished %v), want %s", got, log.Len, log.Finished, want)
	}
	if e := log.Events[len(log.Events)-1].Error; e == nil || e.Type != aap.TurnErrorInterrupted || e.Message == "" {
		t.Errorf("the interrupted turn's turn_stop error = %+v", e)
	}
	turn, err := st.TurnGet(ctx, ref.TenantID, ref.SessionID, ref.TurnID)
	if te := turn.TurnError(); err != nil || te == nil || te.Type != aap.TurnErrorInterrupted {
		t.Errorf("the interrupted turn's record error = %+v, %v", te, err)
	}
	var batches int
	storetest.Scan(t, storetest.URL(t), `SELECT count(*) FROM turn_event_batches WHERE turn_id = $1`, []any{ref.TurnID}, &batches)
	if batches != 0 {
		t.Errorf("%d batches left after the fold", batches)
	}
}

// A finished turn's log costs about the bytes of the messages it produced,
// not a row per streamed event.
func TestFinishedTurnLogCostsAboutItsMessages(t *testing.T) {
	st := storetest.Open(t)
	ctx := context.Background()
	begun := beginTurn(t, st, "/words 300")
	ref := begun.Turn.Ref()
	var words []string
	events := []aap.Event{aap.TurnStart()}
	for i := range 300 {
		w := fmt.Sprintf("word%d ", i+1)
		words = append(words, w)
		events = append(events, aap.Event{Type: aap.EventTextDelta, Delta: w})
	}
	events = append(events, aap.TurnStop(aap.StopEndTurn))
	// Recorded in batches while it ran, as a delta stream is.
	for i := 1; i < len(events)-1; i += 25 {
		if ok, err := st.TurnEventsAppend(ctx, ref, 1, i, events[i-1:min(i+24, len(events)-1)]); !ok || err != nil {
			t.Fatal(ok, err)
		}
	}
	answer := strings.Join(words, "")
	if _, err := st.TurnFinish(ctx, store.TurnFinishParams{Ref: ref, Step: 1, FirstSeq: begun.LastSeq + 1, Status: store.TurnCompleted,
		Messages: []store.NewMessage{{Message: aap.AssistantMessage(aap.ContentBlock{Type: aap.BlockText, Text: answer}), Origin: store.OriginAgent}},
		Events:   events}); err != nil {
		t.Fatal(err)
	}
	var logBytes, msgBytes, batches int
	storetest.Scan(t, storetest.URL(t), `SELECT pg_column_size(events) FROM turns WHERE id = $1`, []any{ref.TurnID}, &logBytes)
	storetest.Scan(t, storetest.URL(t), `SELECT sum(pg_column_size(message)) FROM messages WHERE turn_id = $1 AND origin = 'agent'`, []any{ref.TurnID}, &msgBytes)
	storetest.Scan(t, storetest.URL(t), `SELECT count(*) FROM turn_event_batches WHERE turn_id = $1`, []any{ref.TurnID}, &batches)
	t.Logf("300 deltas: log %d bytes, messages %d bytes", logBytes, msgBytes)
	if batches != 0 || logBytes > 2*msgBytes+200 {
		t.Errorf("log %d bytes for %d bytes of messages (%d batches left): want at most about twice", logBytes, msgBytes, batches)
	}
	log, err := st.TurnEventsAfter(ctx, ref, 150)
	if err != nil || len(log.Events) != 152 || log.Events[0].Delta != "word150 " || log.Events[151].Type != aap.EventTurnStop {
		t.Errorf("resume after 150: %d events, first %+v, err %v", len(log.Events), log.Events, err)
	}
}

// A heartbeat renews the claims of running turns of many tenants at once,
// says which still hold their session and which were asked to stop, and
// renews nothing a turn lost.
func TestTurnsHeartbeatRenewsHeldClaimsOfEveryTenant(t *testing.T) {
	st := storetest.Open(t)
	ctx := context.Background()
	a, b, lost := beginTurn(t, st, "a").Turn.Ref(), beginTurn(t, st, "b").Turn.Ref(), beginTurn(t, st, "lost").Turn.Ref()
	if _, err := st.TurnRequestCancel(ctx, b); err != nil {
		t.Fatal(err)
	}
	storetest.Exec(t, storetest.URL(t), `UPDATE sessions SET active_turn_id = NULL WHERE id = $1`, lost.SessionID)
	held, cancel, err := st.TurnsHeartbeat(ctx, []store.TurnRef{a, b, lost}, 1, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if !held[a.TurnID] || !held[b.TurnID] || held[lost.TurnID] || len(held) != 2 {
		t.Errorf("held = %v; want %s and %s", held, a.TurnID, b.TurnID)
	}
	if cancel[a.TurnID] || !cancel[b.TurnID] || cancel[lost.TurnID] {
		t.Errorf("cancel = %v; want %s only", cancel, b.TurnID)
	}
	for _, ref := range []store.TurnRef{a, b} {
		var renewed bool
		storetest.Scan(t, storetest.URL(t), `SELECT lease_expires_at > now() + interval '50 minutes' FROM sessions WHERE tenant_id = $1 AND id = $2`,
			[]any{ref.TenantID, ref.SessionID}, &renewed)
		if !renewed {
			t.Errorf("lease of %s not renewed", ref.SessionID)
		}
	}
}

// A heartbeat writes only the leases that need it: one set less than a
// sixth of the lease ago is left as it is (the row not rewritten), and its
// turn is still reported held; an older one is renewed.
func TestTurnsHeartbeatRenewsOnlyLeasesDueForIt(t *testing.T) {
	st := storetest.Open(t)
	ctx := context.Background()
	fresh, due := beginTurn(t, st, "fresh").Turn.Ref(), beginTurn(t, st, "due").Turn.Ref() // leases of a minute
	storetest.Exec(t, storetest.URL(t), `UPDATE sessions SET lease_expires_at = now() + interval '45 seconds' WHERE id = $1`, due.SessionID)
	version := func(ref store.TurnRef) (xmin string, expires time.Time) {
		storetest.Scan(t, storetest.URL(t), `SELECT xmin::text, lease_expires_at FROM sessions WHERE tenant_id = $1 AND id = $2`,
			[]any{ref.TenantID, ref.SessionID}, &xmin, &expires)
		return xmin, expires
	}
	freshXmin, freshExpires := version(fresh)
	_, dueExpires := version(due)
	held, _, err := st.TurnsHeartbeat(ctx, []store.TurnRef{fresh, due}, 1, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if !held[fresh.TurnID] || !held[due.TurnID] {
		t.Errorf("held = %v; want both", held)
	}
	if xmin, expires := version(fresh); xmin != freshXmin || !expires.Equal(freshExpires) {
		t.Errorf("the fresh lease was rewritten: %s %v, was %s %v", xmin, expires, freshXmin, freshExpires)
	}
	if _, expires := version(due); expires.Sub(dueExpires) < 10*time.Second {
		t.Errorf("the due lease was not renewed: %v, was %v", expires, dueExpires)
	}
}

// A claim is judged where the instance locks live: a turn whose process
// holds its instance lock and whose lease runs keeps its session (a second
// turn is refused), and so does a compaction. On Citus a liveness check
// inside a query of sessions would run on a worker, which holds no
// instance lock: the live turn would be taken over (docs/citus.md).
func TestALiveTurnKeepsItsSessionWhereverTheSessionIsStored(t *testing.T) {
	st := storetest.Open(t)
	ctx := context.Background()
	in, err := st.StartInstance(ctx, store.InstanceParams{})
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	tn := storetest.NewTenant(t, st)
	sess, _, err := st.SessionCreate(ctx, store.SessionCreateParams{TenantID: tn.ID, AgentName: "echo"})
	if err != nil {
		t.Fatal(err)
	}
	begin := func(owner int32) (*store.TurnBegun, error) {
		return st.TurnBegin(ctx, &store.TurnBeginParams{
			TenantID: tn.ID, SessionID: sess.ID, TurnID: store.NewTurnID(), Stream: aap.StreamNone, Owner: owner, Lease: time.Minute,
			Prepare: func(store.Session) (store.TurnPlan, error) {
				return store.TurnPlan{Messages: []store.NewMessage{{Message: aap.UserMessage("hi"), Origin: store.OriginClient}}}, nil
			},
		})
	}
	first, err := begin(in.ID())
	if err != nil {
		t.Fatal(err)
	}
	var running *store.TurnRunningError
	if _, err := begin(in.ID() + 1); !errors.As(err, &running) || running.TurnID != first.Turn.ID {
		t.Fatalf("second turn on a live claim: %v; want TurnRunningError for %s", err, first.Turn.ID)
	}
	if why, err := st.TurnLooksDead(ctx, first.Turn.Ref()); why != "" || err != nil {
		t.Errorf("live turn looks dead: %q, %v", why, err)
	}
	if done, err := st.TurnInterruptIfDead(ctx, first.Turn.Ref()); done || err != nil {
		t.Errorf("live turn interrupted: %v, %v", done, err)
	}
	if _, err := st.CompactionApply(ctx, store.CompactionApplyParams{TenantID: tn.ID, SessionID: sess.ID}); !errors.As(err, &running) {
		t.Errorf("compaction during a live turn: %v; want TurnRunningError", err)
	}
	// Once its process is gone, the next turn takes the session over.
	in.Close()
	next, err := begin(in.ID() + 1)
	if err != nil || next.Interrupted != first.Turn.ID {
		t.Errorf("turn after the process died: %+v, %v; want it to take over %s", next, err, first.Turn.ID)
	}
}
