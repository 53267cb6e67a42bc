package store_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/store"
	"github.com/aapd/aapd/store/storetest"
)

func TestMain(m *testing.M) { os.Exit(storetest.Main(m)) }

// A turn reading the compacted history while compactions rewrite it sees it
// whole before or whole after each rewrite, never half-written.
func TestTurnDuringCompactionNeverSeesAHalfWrittenHistory(t *testing.T) {
	st := storetest.Open(t)
	tn := storetest.NewTenant(t, st)
	ctx := context.Background()
	const n = 200
	seed := make([]aap.Message, n)
	for i := range seed {
		seed[i] = aap.UserMessage("m" + strconv.Itoa(i+1))
	}
	sess, _, err := st.SessionCreate(ctx, store.SessionCreateParams{TenantID: tn.ID, AgentName: "echo", Messages: seed})
	if err != nil {
		t.Fatal(err)
	}

	// check returns why a read is not a whole history, or "".
	check := func(h []store.StoredMessage) string {
		from := 1
		if len(h) > 0 && strings.HasPrefix(h[0].Message.Content.Text, "summary up to m") {
			j, _ := strconv.Atoi(strings.TrimPrefix(h[0].Message.Content.Text, "summary up to m"))
			from, h = j+1, h[1:]
		}
		if len(h) != n-from+1 {
			return fmt.Sprintf("%d messages after the summary, want %d", len(h), n-from+1)
		}
		for i, m := range h {
			if m.Message.Content.Text != "m"+strconv.Itoa(from+i) {
				return fmt.Sprintf("message %d is %q", i, m.Message.Content.Text)
			}
		}
		return ""
	}

	var wg sync.WaitGroup
	done := make(chan struct{})
	errs := make(chan string, 100)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				h, err := st.History(ctx, store.HistoryParams{TenantID: tn.ID, SessionID: sess.ID, Type: aap.HistoryCompacted})
				if err != nil {
					errs <- err.Error()
					return
				}
				if why := check(h); why != "" {
					errs <- why
					return
				}
			}
		}()
	}
	for j := 5; j < n; j += 5 {
		snap, err := st.CompactedSnapshotGet(ctx, tn.ID, sess.ID)
		if err != nil {
			t.Fatal(err)
		}
		items := []store.CompactedItem{{Message: aap.UserMessage(fmt.Sprintf("summary up to m%d", j))}}
		for _, m := range snap.Messages {
			if m.SourceSeq > int64(j) {
				items = append(items, store.CompactedItem{SourceSeq: m.SourceSeq, Message: m.Message})
			}
		}
		if _, err := st.CompactionApply(ctx, store.CompactionApplyParams{
			TenantID: tn.ID, SessionID: sess.ID, BaseVersion: snap.Version,
			UpTo: snap.Messages[len(snap.Messages)-1].Seq, Items: items,
			Record: store.Compaction{Trigger: "manual", Strategy: "test", FromSeq: 1, ToSeq: int64(j)},
		}); err != nil {
			t.Fatal(err)
		}
	}
	close(done)
	wg.Wait()
	close(errs)
	for why := range errs {
		t.Errorf("a reader saw a half-written history: %s", why)
	}
	// The full history is untouched.
	full, err := st.History(ctx, store.HistoryParams{TenantID: tn.ID, SessionID: sess.ID, Type: aap.HistoryFull})
	if err != nil || len(full) != n || full[0].Message.Content.Text != "m1" {
		t.Errorf("full history: %d messages, %v", len(full), err)
	}
	list, err := st.CompactionList(ctx, tn.ID, sess.ID, 100)
	if err != nil || len(list) != (n-5)/5 {
		t.Errorf("%d compactions recorded (%v)", len(list), err)
	}
}

func TestCompactionApplyRefusesAStaleSnapshot(t *testing.T) {
	st := storetest.Open(t)
	tn := storetest.NewTenant(t, st)
	ctx := context.Background()
	sess, _, err := st.SessionCreate(ctx, store.SessionCreateParams{TenantID: tn.ID, AgentName: "echo",
		Messages: []aap.Message{aap.UserMessage("a"), aap.UserMessage("b")}})
	if err != nil {
		t.Fatal(err)
	}
	snap, err := st.CompactedSnapshotGet(ctx, tn.ID, sess.ID)
	if err != nil {
		t.Fatal(err)
	}
	apply := func() error {
		_, err := st.CompactionApply(ctx, store.CompactionApplyParams{TenantID: tn.ID, SessionID: sess.ID,
			BaseVersion: snap.Version, UpTo: 2, Items: []store.CompactedItem{{Message: aap.UserMessage("s")}},
			Record: store.Compaction{Trigger: "manual", Strategy: "test"}})
		return err
	}
	if err := apply(); err != nil {
		t.Fatal(err)
	}
	if err := apply(); err == nil || !strings.Contains(err.Error(), store.ErrCompactionConflict.Error()) {
		t.Errorf("second apply from the same snapshot: %v", err)
	}
	// Another tenant's session cannot be compacted.
	other := storetest.NewTenant(t, st)
	if _, err := st.CompactionApply(ctx, store.CompactionApplyParams{TenantID: other.ID, SessionID: sess.ID, UpTo: 2,
		Record: store.Compaction{Trigger: "manual", Strategy: "test"}}); err == nil {
		t.Error("compacted another tenant's session")
	}
}
