package retention_test

import (
	"context"
	"errors"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/retention"
	"github.com/aapd/aapd/store"
	"github.com/aapd/aapd/store/storetest"
)

func TestMain(m *testing.M) { os.Exit(storetest.Main(m)) }

const day = 24 * time.Hour

// idleSessions makes n sessions of a tenant, each with one message, last
// changed age ago.
func idleSessions(t *testing.T, st *store.Store, tenantID string, n int, age time.Duration) []string {
	t.Helper()
	var ids []string
	for range n {
		sess, _, err := st.SessionCreate(context.Background(), store.SessionCreateParams{TenantID: tenantID, AgentName: "echo",
			Messages: []aap.Message{aap.UserMessage("old")}})
		if err != nil {
			t.Fatal(err)
		}
		storetest.AgeSession(t, storetest.URL(t), tenantID, sess.ID, age)
		ids = append(ids, sess.ID)
	}
	return ids
}

// A sweep deletes, batch after batch, every session idle past its
// tenant's policy (its own, else the server's default) and no other, and
// counts them in its metrics, which exist at zero before it.
func TestSweepDeletesIdleSessionsByEachTenantsPolicy(t *testing.T) {
	st := storetest.Open(t)
	ctx := context.Background()
	own, byDefault, forever := storetest.NewTenant(t, st), storetest.NewTenant(t, st), storetest.NewTenant(t, st)
	if _, err := st.TenantSetRetention(ctx, own.ID, store.TenantRetention{IdleSessionDays: 30}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.TenantSetRetention(ctx, forever.ID, store.TenantRetention{IdleSessionDays: 36500}); err != nil {
		t.Fatal(err)
	}
	gone := idleSessions(t, st, own.ID, 5, 40*day)
	kept := idleSessions(t, st, own.ID, 2, 20*day)
	gone = append(gone, idleSessions(t, st, byDefault.ID, 3, 8*day)...)
	kept = append(kept, idleSessions(t, st, forever.ID, 2, 400*day)...)

	reg := prometheus.NewRegistry()
	s := retention.New(retention.Config{Store: st, Registry: reg, Defaults: store.TenantRetention{IdleSessionDays: 7}, BatchSize: 2})
	defer s.Stop()
	if n := len(series(t, reg)); n != 7 {
		t.Errorf("series before any sweep: %d, want 7 (every family at zero)", n)
	}
	res, err := s.Sweep(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Sessions != int64(len(gone)) || res.Messages != int64(len(gone)) || res.Tenants != 2 {
		t.Errorf("sweep %+v, want %d sessions and messages of 2 tenants", res, len(gone))
	}
	for _, id := range gone {
		for _, tn := range []string{own.ID, byDefault.ID} {
			if _, err := st.SessionGet(ctx, tn, id); err == nil {
				t.Errorf("idle session %s kept", id)
			}
		}
	}
	for _, id := range kept {
		found := false
		for _, tn := range []string{own.ID, forever.ID} {
			if _, err := st.SessionGet(ctx, tn, id); err == nil {
				found = true
			}
		}
		if !found {
			t.Errorf("session %s within its policy was deleted", id)
		}
	}
	if got := series(t, reg)["aapd_retention_sessions_deleted_total"]; got != float64(len(gone)) {
		t.Errorf("aapd_retention_sessions_deleted_total %v, want %d", got, len(gone))
	}
	if again, err := s.Sweep(ctx); err != nil || again.Sessions != 0 {
		t.Errorf("a second sweep: %+v, %v; want nothing left to delete", again, err)
	}
}

// series gathers reg's counters and gauges, by name and labels.
func series(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			name := f.GetName()
			for _, l := range m.GetLabel() {
				name += "," + l.GetName() + "=" + l.GetValue()
			}
			out[name] = m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return out
}

// Replicas never sweep at once: while one holds the sweep, another's is
// refused at once (ErrRetentionBusy), and runs again once it is done.
func TestOneSweeperAtATime(t *testing.T) {
	st, other := storetest.Open(t), storetest.Open(t)
	ctx := context.Background()
	s := retention.New(retention.Config{Store: st})
	defer s.Stop()
	err := other.RetentionLead(ctx, func(context.Context) error {
		_, err := s.Sweep(ctx)
		return err
	})
	if !errors.Is(err, store.ErrRetentionBusy) {
		t.Fatalf("a sweep while another replica sweeps: %v, want ErrRetentionBusy", err)
	}
	if _, err := s.Sweep(ctx); err != nil {
		t.Errorf("a sweep after the other ended: %v", err)
	}
}

// With a fullHistoryDays policy, a sweep trims each session's full history
// to what the policy keeps and a compaction summarised, batch after batch,
// leaves the compacted history whole and a running session alone, and
// counts the messages in its metrics.
func TestSweepTrimsFullHistoriesByThePolicy(t *testing.T) {
	st := storetest.Open(t)
	ctx := context.Background()
	url := storetest.URL(t)
	tn := storetest.NewTenant(t, st)
	if _, err := st.TenantSetRetention(ctx, tn.ID, store.TenantRetention{FullHistoryDays: 30}); err != nil {
		t.Fatal(err)
	}
	c := storetest.NewConversation(t, st, tn.ID, store.SessionCreateParams{})
	for i := range 8 {
		c.Say("q"+string(rune('a'+i)), "a")
	}
	c.Compact(10)
	c.Say("new", "newer")
	storetest.Exec(t, url, `UPDATE messages SET created_at = now() - interval '40 days' WHERE tenant_id = $1 AND session_id = $2 AND seq <= 16`, tn.ID, c.ID)
	compacted, err := st.History(ctx, store.HistoryParams{TenantID: tn.ID, SessionID: c.ID, Type: aap.HistoryCompacted})
	if err != nil {
		t.Fatal(err)
	}
	running := storetest.NewConversation(t, st, tn.ID, store.SessionCreateParams{})
	running.Say("r1", "r2")
	running.Compact(2)
	storetest.Exec(t, url, `UPDATE messages SET created_at = now() - interval '40 days' WHERE tenant_id = $1 AND session_id = $2`, tn.ID, running.ID)
	running.StartTurn(storetest.StartInstance(t, st).ID(), "r3")

	reg := prometheus.NewRegistry()
	s := retention.New(retention.Config{Store: st, Registry: reg, TrimBatch: 3})
	defer s.Stop()
	res, err := s.Sweep(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Trimmed != 1 || res.TrimmedMessages != 10 || res.Sessions != 0 {
		t.Errorf("sweep %+v; want 10 messages of 1 session trimmed", res)
	}
	var left, runningLeft int
	storetest.Scan(t, url, `SELECT count(*) FROM messages WHERE tenant_id = $1 AND session_id = $2`, []any{tn.ID, c.ID}, &left)
	storetest.Scan(t, url, `SELECT count(*) FROM messages WHERE tenant_id = $1 AND session_id = $2`, []any{tn.ID, running.ID}, &runningLeft)
	if left != 8 || runningLeft != 3 {
		t.Errorf("rows left: %d of the trimmed session (want its 8 after the compaction's end), %d of the running one (want 3)", left, runningLeft)
	}
	if after, err := st.History(ctx, store.HistoryParams{TenantID: tn.ID, SessionID: c.ID, Type: aap.HistoryCompacted}); err != nil ||
		!slices.Equal(storetest.CompactedTexts(after), storetest.CompactedTexts(compacted)) {
		t.Errorf("compacted history after the trim %q, %v; want %q", storetest.CompactedTexts(after), err, storetest.CompactedTexts(compacted))
	}
	if got := series(t, reg)["aapd_retention_messages_deleted_total,kind=full_history"]; got != 10 {
		t.Errorf("aapd_retention_messages_deleted_total{kind=full_history} %v, want 10", got)
	}
	if again, err := s.Sweep(ctx); err != nil || again.TrimmedMessages != 0 {
		t.Errorf("a second sweep: %+v, %v; want nothing left to trim", again, err)
	}
}
