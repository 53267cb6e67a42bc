package store_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/store"
	"github.com/aapd/aapd/store/storetest"
)

// usageOf returns a tenant's usage of today, all agents added up.
func usageOf(t *testing.T, st *store.Store, tenantID string) (turns, in, out int64) {
	t.Helper()
	today := time.Now().UTC().Truncate(24 * time.Hour)
	rows, err := st.Usage(context.Background(), tenantID, today, today.Add(24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		turns, in, out = turns+r.Turns, in+r.InputTokens, out+r.OutputTokens
	}
	return turns, in, out
}

// finishTurn ends a begun turn as completed with its usage.
func finishTurn(t *testing.T, st *store.Store, begun *store.TurnBegun, in, out int64) error {
	t.Helper()
	_, err := st.TurnFinish(context.Background(), store.TurnFinishParams{
		Ref: begun.Turn.Ref(), Step: 1, FirstSeq: begun.LastSeq + 1, Status: store.TurnCompleted, StopReason: aap.StopEndTurn,
		InputTokens: in, OutputTokens: out,
		Messages: []store.NewMessage{{Message: aap.AssistantMessage(aap.ContentBlock{Type: aap.BlockText, Text: "Echo"}), Origin: store.OriginAgent}},
		Events:   []aap.Event{aap.TurnStart(), aap.TurnStop(aap.StopEndTurn)},
	})
	return err
}

// A turn is in its tenant's usage once it ends, once, whoever ends it: its
// own finish (sent again after it landed, it adds nothing), another
// process interrupting it, or the deletion of its session while it runs.
func TestUsageCountsEachTurnOnceWhenItEnds(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t)
	ctx := context.Background()

	begun := beginTurn(t, st, "hi")
	tenant := begun.Turn.TenantID
	if n, _, _ := usageOf(t, st, tenant); n != 0 {
		t.Errorf("a running turn counts: %d turns", n)
	}
	for range 2 { // the second: a finish sent again after it landed
		if err := finishTurn(t, st, begun, 10, 4); err != nil {
			t.Fatal(err)
		}
	}
	if n, in, out := usageOf(t, st, tenant); n != 1 || in != 10 || out != 4 {
		t.Errorf("after the finish: %d turns, %d/%d tokens; want 1, 10/4", n, in, out)
	}

	// A turn whose claim ran out, interrupted by another process, counts
	// with the tokens of its committed steps.
	sess, _, err := st.SessionCreate(ctx, store.SessionCreateParams{TenantID: tenant, AgentName: "echo"})
	if err != nil {
		t.Fatal(err)
	}
	dying, err := st.TurnBegin(ctx, &store.TurnBeginParams{
		TenantID: tenant, SessionID: sess.ID, TurnID: store.NewTurnID(), Stream: aap.StreamNone, Owner: 1, Lease: time.Second,
		Prepare: func(store.Session) (store.TurnPlan, error) {
			return store.TurnPlan{Messages: []store.NewMessage{{Message: aap.UserMessage("hi"), Origin: store.OriginClient}}}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.TurnCommitStep(ctx, store.TurnStepParams{Ref: dying.Turn.Ref(), Step: 1, FirstSeq: dying.LastSeq + 1,
		Lease: 10 * time.Millisecond, InputTokens: 7, OutputTokens: 3}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	for range 2 { // the second finds it ended
		if _, err := st.TurnInterruptIfDead(ctx, dying.Turn.Ref()); err != nil {
			t.Fatal(err)
		}
	}
	if n, in, out := usageOf(t, st, tenant); n != 2 || in != 17 || out != 7 {
		t.Errorf("after the interruption: %d turns, %d/%d tokens; want 2, 17/7", n, in, out)
	}

	// A turn whose session is deleted while it runs counts at the deletion;
	// its finish, then refused, adds nothing.
	sess, _, err = st.SessionCreate(ctx, store.SessionCreateParams{TenantID: tenant, AgentName: "echo"})
	if err != nil {
		t.Fatal(err)
	}
	orphan, err := st.TurnBegin(ctx, &store.TurnBeginParams{
		TenantID: tenant, SessionID: sess.ID, TurnID: store.NewTurnID(), Stream: aap.StreamNone, Owner: 1, Lease: time.Minute,
		Prepare: func(store.Session) (store.TurnPlan, error) {
			return store.TurnPlan{Messages: []store.NewMessage{{Message: aap.UserMessage("hi"), Origin: store.OriginClient}}}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.TurnCommitStep(ctx, store.TurnStepParams{Ref: orphan.Turn.Ref(), Step: 1, FirstSeq: orphan.LastSeq + 1,
		Lease: time.Minute, InputTokens: 5, OutputTokens: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.SessionDelete(ctx, tenant, sess.ID); err != nil {
		t.Fatal(err)
	}
	if err := finishTurn(t, st, orphan, 50, 50); err == nil {
		t.Error("the finish of a deleted session's turn landed")
	}
	// Deleting the first session keeps its usage too.
	if _, err := st.SessionDelete(ctx, tenant, begun.Turn.SessionID); err != nil {
		t.Fatal(err)
	}
	if n, in, out := usageOf(t, st, tenant); n != 3 || in != 22 || out != 8 {
		t.Errorf("after the deletions: %d turns, %d/%d tokens; want 3, 22/8", n, in, out)
	}
}

// The usage report reads the rollup alone: its plan touches no turn and
// no session, however many the tenant has.
func TestUsageReportReadsNoTurns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, storetest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `PREPARE usage_report AS `+store.UsageSQL); err != nil {
		t.Fatal(err)
	}
	rows, err := conn.Query(ctx, `EXPLAIN EXECUTE usage_report('00000000-0000-0000-0000-000000000000', '2025-01-01', '2025-02-01')`)
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	plan := strings.Join(lines, "\n")
	for _, table := range []string{"turns", "sessions"} {
		if strings.Contains(plan, " on "+table) {
			t.Errorf("the usage report reads %s:\n%s", table, plan)
		}
	}
	if !strings.Contains(plan, "usage_daily") {
		t.Errorf("the usage report does not read usage_daily:\n%s", plan)
	}
}

// Turns ending at once on different connections must not queue for one
// row of usage_daily: each connection of a process adds to a slot of its
// own (slots by backend pid collided, and a turn's end waited there for
// another's commit).
func TestEachConnectionAddsToAUsageSlotOfItsOwn(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t)
	slots, err := st.UsageSlotsOfConnections(context.Background(), 3)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, s := range slots {
		if n, err := strconv.Atoi(s); err != nil || n < 0 || n >= 64 {
			t.Fatalf("slots %v: %q is not a slot", slots, s)
		}
		if seen[s] {
			t.Fatalf("slots %v: two connections share slot %s", slots, s)
		}
		seen[s] = true
	}
}
