package store_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/store"
	"github.com/aapd/aapd/store/storetest"
)

// populatedSession makes a session of the tenant with a row in every table
// a session has rows in: seeded histories with a client's message ids, a
// finished turn, a compaction, a running turn with recorded events, and a
// schedule.
func populatedSession(t *testing.T, st *store.Store, tenantID string) string {
	t.Helper()
	ctx := context.Background()
	sess, _, err := st.SessionCreate(ctx, store.SessionCreateParams{
		TenantID: tenantID, AgentName: "echo",
		Messages: []aap.Message{aap.UserMessage("seed")}, MessageIDs: []string{"m1"},
	})
	if err != nil {
		t.Fatal(err)
	}
	begin := func(text string) *store.TurnBegun {
		t.Helper()
		begun, err := st.TurnBegin(ctx, &store.TurnBeginParams{
			TenantID: tenantID, SessionID: sess.ID, TurnID: store.NewTurnID(), Stream: aap.StreamDelta, Owner: 1, Lease: time.Minute,
			Prepare: func(store.Session) (store.TurnPlan, error) {
				return store.TurnPlan{Messages: []store.NewMessage{{Message: aap.UserMessage(text), Origin: store.OriginClient}}}, nil
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		return begun
	}
	first := begin("one")
	if _, err := st.TurnFinish(ctx, store.TurnFinishParams{
		Ref: first.Turn.Ref(), Step: 1, FirstSeq: first.LastSeq + 1, Status: store.TurnCompleted, StopReason: aap.StopEndTurn,
		Messages: []store.NewMessage{{Message: aap.AssistantMessage(aap.ContentBlock{Type: aap.BlockText, Text: "Echo: one"}), Origin: store.OriginAgent}},
		Events:   []aap.Event{aap.TurnStart(), aap.TurnStop(aap.StopEndTurn)},
	}); err != nil {
		t.Fatal(err)
	}
	snap, err := st.CompactedSnapshotGet(ctx, tenantID, sess.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.CompactionApply(ctx, store.CompactionApplyParams{
		TenantID: tenantID, SessionID: sess.ID, BaseVersion: snap.Version, UpTo: snap.Messages[len(snap.Messages)-1].Seq,
		Items:  []store.CompactedItem{{Message: aap.UserMessage("summary")}},
		Record: store.Compaction{Trigger: "manual", Strategy: "test", FromSeq: 1, ToSeq: 3},
	}); err != nil {
		t.Fatal(err)
	}
	second := begin("two")
	if ok, err := st.TurnEventsAppend(ctx, second.Turn.Ref(), 1, 1, []aap.Event{aap.TurnStart()}); !ok || err != nil {
		t.Fatalf("record events: %v, %v", ok, err)
	}
	next := time.Now().Add(time.Hour)
	if _, err := st.ScheduleCreate(ctx, store.ScheduleCreateParams{Schedule: store.Schedule{
		TenantID: tenantID, SessionID: sess.ID, ID: store.NewScheduleID(), Every: time.Hour,
		Request: aap.TurnRequest{Messages: []aap.Message{aap.UserMessage("hourly")}}, NextRunAt: &next,
	}}); err != nil {
		t.Fatal(err)
	}
	return sess.ID
}

// rowsOf counts, in every table with the column, the rows the condition
// selects: the tables are read from the catalog, so a table added later is
// counted too.
func rowsOf(t *testing.T, column string, where string, args ...any) map[string]int {
	t.Helper()
	url := storetest.URL(t)
	var tables []string
	storetest.Scan(t, url, `SELECT coalesce(array_agg(c.table_name::text ORDER BY c.table_name), '{}') FROM information_schema.columns c
		JOIN information_schema.tables t USING (table_schema, table_name)
		WHERE c.table_schema = current_schema() AND c.column_name = $1 AND t.table_type = 'BASE TABLE'`, []any{column}, &tables)
	if len(tables) == 0 {
		t.Fatalf("no table has a column %s", column)
	}
	out := map[string]int{}
	for _, table := range tables {
		var n int
		storetest.Scan(t, url, `SELECT count(*) FROM `+table+` WHERE `+where, args, &n)
		out[table] = n
	}
	return out
}

// Deleting a session deletes every row of it, in every table, and nothing
// of another session; deleting a tenant deletes every row of it, and
// nothing of another tenant. A table added later without a way to its
// session's or tenant's deletion fails this test.
func TestDeletingLeavesNoRowBehind(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t)
	ctx := context.Background()
	tn, other := storetest.NewTenant(t, st), storetest.NewTenant(t, st)
	gone, kept := populatedSession(t, st, tn.ID), populatedSession(t, st, tn.ID)
	elsewhere := populatedSession(t, st, other.ID)

	ofSession := func(id string) map[string]int {
		return rowsOf(t, "session_id", `tenant_id = $1 AND session_id = $2`, tn.ID, id)
	}
	before := ofSession(gone)
	for _, table := range []string{"messages", "compacted_messages", "turns", "turn_event_batches", "compactions", "message_client_ids", "schedules"} {
		if before[table] == 0 {
			t.Fatalf("the session has no row in %s to delete: %v", table, before)
		}
	}
	if _, err := st.SessionDelete(ctx, tn.ID, gone); err != nil {
		t.Fatal(err)
	}
	for table, n := range ofSession(gone) {
		if n != 0 {
			t.Errorf("deleted session: %d rows left in %s", n, table)
		}
	}
	if got := ofSession(kept); !equalCounts(got, before) {
		t.Errorf("the tenant's other session: %v, want %v", got, before)
	}

	ofTenant := func(id string) map[string]int { return rowsOf(t, "tenant_id", `tenant_id = $1`, id) }
	otherBefore := ofTenant(other.ID)
	if err := st.TenantDelete(ctx, tn.ID); err != nil {
		t.Fatal(err)
	}
	for table, n := range ofTenant(tn.ID) {
		if n != 0 {
			t.Errorf("deleted tenant: %d rows left in %s", n, table)
		}
	}
	if got := ofTenant(other.ID); !equalCounts(got, otherBefore) {
		t.Errorf("another tenant: %v, want %v", got, otherBefore)
	}
	if _, err := st.SessionGet(ctx, other.ID, elsewhere); err != nil {
		t.Errorf("another tenant's session: %v", err)
	}
}

func equalCounts(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// Sessions deleted while their turns claim and finish, concurrently, leave
// no message, compacted message or turn behind, and the usage of the turns
// that ran is kept.
func TestTurnsRacingTheirSessionsDeletionLeaveNoOrphans(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t)
	ctx := context.Background()
	tn := storetest.NewTenant(t, st)
	const sessions = 24
	var (
		wg  sync.WaitGroup
		mu  sync.Mutex
		ran int64
	)
	for i := range sessions {
		sess, _, err := st.SessionCreate(ctx, store.SessionCreateParams{TenantID: tn.ID, AgentName: "echo"})
		if err != nil {
			t.Fatal(err)
		}
		claimed := make(chan struct{}) // closed at the session's first turn
		wg.Add(2)
		go func() { // turns, one after another, until the session is gone
			defer wg.Done()
			first := true
			for {
				begun, err := st.TurnBegin(ctx, &store.TurnBeginParams{
					TenantID: tn.ID, SessionID: sess.ID, TurnID: store.NewTurnID(), Stream: aap.StreamNone, Owner: 1, Lease: time.Minute,
					Prepare: func(store.Session) (store.TurnPlan, error) {
						return store.TurnPlan{Messages: []store.NewMessage{{Message: aap.UserMessage("hi"), Origin: store.OriginClient}}}, nil
					},
				})
				if err != nil {
					return
				}
				mu.Lock()
				ran++
				mu.Unlock()
				if first {
					close(claimed)
					first = false
				}
				if _, err := st.TurnFinish(ctx, store.TurnFinishParams{
					Ref: begun.Turn.Ref(), Step: 1, FirstSeq: begun.LastSeq + 1, Status: store.TurnCompleted, StopReason: aap.StopEndTurn,
					Messages: []store.NewMessage{{Message: aap.AssistantMessage(aap.ContentBlock{Type: aap.BlockText, Text: "Echo: hi"}), Origin: store.OriginAgent}},
					Events:   []aap.Event{aap.TurnStart(), aap.TurnStop(aap.StopEndTurn)},
				}); err != nil {
					return
				}
			}
		}()
		go func() { // the deletion, at some point of a later turn
			defer wg.Done()
			select {
			case <-claimed:
			case <-time.After(10 * time.Second):
				t.Errorf("session %s: no turn was claimed", sess.ID)
			}
			time.Sleep(time.Duration(i%6) * time.Millisecond)
			if _, err := st.SessionDelete(ctx, tn.ID, sess.ID); err != nil {
				t.Errorf("delete %s: %v", sess.ID, err)
			}
		}()
	}
	wg.Wait()
	for _, table := range []string{"messages", "compacted_messages", "turns"} {
		var orphans int
		storetest.Scan(t, storetest.URL(t), `SELECT count(*) FROM `+table+` r WHERE r.tenant_id = $1
			AND NOT EXISTS (SELECT 1 FROM sessions s WHERE s.tenant_id = r.tenant_id AND s.id = r.session_id)`, []any{tn.ID}, &orphans)
		if orphans != 0 {
			t.Errorf("%s: %d rows of deleted sessions", table, orphans)
		}
	}
	var counted int64
	storetest.Scan(t, storetest.URL(t), `SELECT coalesce(sum(turns), 0) FROM usage_daily WHERE tenant_id = $1`, []any{tn.ID}, &counted)
	if counted != ran {
		t.Errorf("usage counts %d turns of the deleted sessions, %d were claimed", counted, ran)
	}
}
