package store_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/aapd/aapd/store"
	"github.com/aapd/aapd/store/storetest"
)

const day = 24 * time.Hour

// An idle session is deleted with every row of it, in every table, and its
// usage stays; one changed since, or claimed by a turn, is kept.
func TestSessionDeleteIdleLeavesNoRowAndKeepsUsage(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t)
	ctx := context.Background()
	url := storetest.URL(t)
	tn := storetest.NewTenant(t, st)
	idle, fresh := populatedSession(t, st, tn.ID), storetest.CompletedTurn(t, st, tn.ID).SessionID
	// populatedSession leaves a turn running: finish it first by taking
	// the claim away, so that only idleness decides.
	storetest.Exec(t, url, `UPDATE sessions SET active_turn_id = NULL WHERE tenant_id = $1 AND id = $2`, tn.ID, idle)
	// (Its record ended by hand too: a turn still recorded running would
	// be counted in the usage by the deletion, not before it.)
	storetest.Exec(t, url, `UPDATE turns SET status = 'interrupted' WHERE tenant_id = $1 AND session_id = $2 AND status = 'running'`, tn.ID, idle)
	storetest.AgeSession(t, url, tn.ID, idle, 40*day)
	usageBefore, err := st.Usage(ctx, tn.ID, time.Now().Add(-day), time.Now().Add(day))
	if err != nil {
		t.Fatal(err)
	}

	before := time.Now().Add(-30 * day)
	ids, err := st.SessionsIdle(ctx, tn.ID, before, 10)
	if err != nil || !slices.Equal(ids, []string{idle}) {
		t.Fatalf("idle sessions %v, %v; want [%s]", ids, err, idle)
	}
	d, err := st.SessionDeleteIdle(ctx, tn.ID, idle, before)
	if err != nil || !d.Deleted || d.Messages == 0 {
		t.Fatalf("delete idle: %+v, %v", d, err)
	}
	for table, n := range rowsOf(t, "session_id", `tenant_id = $1 AND session_id = $2`, tn.ID, idle) {
		if n != 0 && table != "webhook_outbox" && table != "webhook_deliveries" {
			t.Errorf("swept session: %d rows left in %s", n, table)
		}
	}
	if _, err := st.SessionGet(ctx, tn.ID, idle); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("swept session read: %v, want not found", err)
	}
	page, err := st.SessionList(ctx, store.SessionListParams{TenantID: tn.ID, Limit: 10})
	if err != nil || len(page.Sessions) != 1 || page.Sessions[0].ID != fresh {
		t.Errorf("listing after the sweep: %+v, %v; want only %s", page.Sessions, err, fresh)
	}
	usageAfter, err := st.Usage(ctx, tn.ID, time.Now().Add(-day), time.Now().Add(day))
	if err != nil || !usageEqual(usageAfter, usageBefore) {
		t.Errorf("usage after the sweep %+v, %v; want %+v", usageAfter, err, usageBefore)
	}

	// Not idle: changed within the period.
	if d, err := st.SessionDeleteIdle(ctx, tn.ID, fresh, before); err != nil || d.Deleted {
		t.Errorf("a fresh session: %+v, %v; want kept", d, err)
	}
	// Claimed: a turn runs (or waits for a worker) on it.
	storetest.AgeSession(t, url, tn.ID, fresh, 40*day)
	storetest.Exec(t, url, `UPDATE sessions SET active_turn_id = 'turn_x' WHERE tenant_id = $1 AND id = $2`, tn.ID, fresh)
	if ids, err := st.SessionsIdle(ctx, tn.ID, before, 10); err != nil || len(ids) != 0 {
		t.Errorf("idle sessions with a claimed one: %v, %v; want none", ids, err)
	}
	if d, err := st.SessionDeleteIdle(ctx, tn.ID, fresh, before); err != nil || d.Deleted {
		t.Errorf("a claimed session: %+v, %v; want kept", d, err)
	}
	if _, err := st.SessionGet(ctx, tn.ID, fresh); err != nil {
		t.Errorf("the kept session: %v", err)
	}
}

// usageEqual compares two usage reports' totals; a report with no turn is
// not equal to one with some.
func usageEqual(a, b []store.UsageRow) bool {
	sum := func(rows []store.UsageRow) (turns, in, out int64) {
		for _, r := range rows {
			turns, in, out = turns+r.Turns, in+r.InputTokens, out+r.OutputTokens
		}
		return
	}
	at, ai, ao := sum(a)
	bt, bi, bo := sum(b)
	return at > 0 && at == bt && ai == bi && ao == bo
}

// Sweeping an idle session a fork reads from never changes what the fork
// reads: the fork is given its own copy first (as any deletion does).
func TestSessionDeleteIdleKeepsWhatForksRead(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t)
	ctx := context.Background()
	url := storetest.URL(t)
	tn := storetest.NewTenant(t, st)
	c, _ := storetest.LongConversation(t, st, tn.ID)
	fork, err := forkAt(c, atMessage(c.LastSeq-2))
	if err != nil {
		t.Fatal(err)
	}
	full := storetest.FullTexts(t, st, tn.ID, fork.ID)
	compacted, err := st.History(ctx, store.HistoryParams{TenantID: tn.ID, SessionID: fork.ID, Type: "compacted"})
	if err != nil {
		t.Fatal(err)
	}
	storetest.AgeSession(t, url, tn.ID, c.ID, 40*day)
	before := time.Now().Add(-30 * day)
	if ids, err := st.SessionsIdle(ctx, tn.ID, before, 10); err != nil || !slices.Equal(ids, []string{c.ID}) {
		t.Fatalf("idle sessions %v, %v; want the source alone", ids, err)
	}
	if d, err := st.SessionDeleteIdle(ctx, tn.ID, c.ID, before); err != nil || !d.Deleted {
		t.Fatalf("delete idle source: %+v, %v", d, err)
	}
	if got := storetest.FullTexts(t, st, tn.ID, fork.ID); !slices.Equal(got, full) {
		t.Errorf("the fork's full history after its source was swept:\n%v\nwant\n%v", got, full)
	}
	after, err := st.History(ctx, store.HistoryParams{TenantID: tn.ID, SessionID: fork.ID, Type: "compacted"})
	if err != nil || !slices.Equal(storetest.CompactedTexts(after), storetest.CompactedTexts(compacted)) {
		t.Errorf("the fork's compacted history after its source was swept: %v, %v", storetest.CompactedTexts(after), err)
	}
}
