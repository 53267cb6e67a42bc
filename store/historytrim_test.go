package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/store"
	"github.com/aapd/aapd/store/storetest"
)

// trimAll runs SessionTrimHistory on a session until it has nothing more
// to drop now, and returns the messages it deleted and where the trimmed
// prefix ends.
func trimAll(t *testing.T, st *store.Store, tenantID, id string, before time.Time, batch int) (deleted, through int64) {
	t.Helper()
	for range 100 {
		tr, err := st.SessionTrimHistory(context.Background(), tenantID, id, before, batch)
		if err != nil {
			t.Fatal(err)
		}
		deleted, through = deleted+tr.Messages, tr.Through
		if !tr.More {
			return deleted, through
		}
	}
	t.Fatal("the trim never ended")
	return 0, 0
}

// ownRows counts a session's own rows of messages up to seq.
func ownRows(t *testing.T, tenantID, id string, upTo int64) int {
	t.Helper()
	var n int
	storetest.Scan(t, storetest.URL(t), `SELECT count(*) FROM messages WHERE tenant_id = $1 AND session_id = $2 AND seq <= $3`,
		[]any{tenantID, id, upTo}, &n)
	return n
}

// A trim drops the full history's messages older than the policy, but
// only as far as a compaction summarised; the newer messages and the
// compacted history stay as they were; a fork keeps reading what it shares
// until it has trimmed it too, and nothing is cut inside a trimmed prefix.
func TestTrimDropsOldCompactedMessagesAndKeepsForksWhole(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t)
	tn := storetest.NewTenant(t, st)
	ctx := context.Background()
	url := storetest.URL(t)
	c := storetest.NewConversation(t, st, tn.ID, store.SessionCreateParams{})
	for i := 1; i <= 10; i++ {
		c.Say(fmt.Sprintf("q%d", i), fmt.Sprintf("a%d", i))
	}
	c.Compact(12)
	c.Say("q11", "a11")
	c.Say("q12", "a12") // 24 messages
	// Messages 1 to 16 are 40 days old, the rest new; the policy keeps 30.
	storetest.Exec(t, url, `UPDATE messages SET created_at = now() - interval '40 days'
		WHERE tenant_id = $1 AND session_id = $2 AND seq <= 16`, tn.ID, c.ID)
	before := time.Now().Add(-30 * day)
	fork, err := forkAt(c, atMessage(14))
	if err != nil {
		t.Fatal(err)
	}
	full := storetest.FullTexts(t, st, tn.ID, c.ID)
	forkFull := storetest.FullTexts(t, st, tn.ID, fork.ID)
	compacted := func(id string) []string {
		h, err := st.History(ctx, store.HistoryParams{TenantID: tn.ID, SessionID: id, Type: aap.HistoryCompacted})
		if err != nil {
			t.Fatal(err)
		}
		return storetest.CompactedTexts(h)
	}
	wantCompacted, wantForkCompacted := compacted(c.ID), compacted(fork.ID)

	// A running session is never touched.
	running := storetest.NewConversation(t, st, tn.ID, store.SessionCreateParams{})
	running.Say("r1", "r2")
	running.Compact(2)
	storetest.Exec(t, url, `UPDATE messages SET created_at = now() - interval '40 days' WHERE tenant_id = $1 AND session_id = $2`, tn.ID, running.ID)
	running.StartTurn(storetest.StartInstance(t, st).ID(), "r3")
	if ids, err := st.SessionsToTrim(ctx, tn.ID, "", 10); err != nil || len(ids) != 2 {
		t.Errorf("sessions to trim: %v, %v; want the source and its fork, not the running one", ids, err)
	}
	if tr, err := st.SessionTrimHistory(ctx, tn.ID, running.ID, before, 100); err != nil || tr != (store.HistoryTrimmed{}) {
		t.Errorf("trim of a running session: %+v, %v; want nothing", tr, err)
	}
	if n := ownRows(t, tn.ID, running.ID, 100); n != 3 {
		t.Errorf("running session: %d rows, want its 3", n)
	}

	// The source is trimmed to the compaction's end (12), not to the
	// age (16), in batches of 5; its fork still reads 1 to 14, so its rows
	// stay.
	deleted, through := trimAll(t, st, tn.ID, c.ID, before, 5)
	if through != 12 || deleted != 0 {
		t.Errorf("first trim of the source: %d deleted, through %d; want 0 (its fork reads them), through 12", deleted, through)
	}
	if got := storetest.FullTexts(t, st, tn.ID, c.ID); !reflect.DeepEqual(got, full[12:]) {
		t.Errorf("trimmed full history %q, want %q", got, full[12:])
	}
	if got := storetest.FullTexts(t, st, tn.ID, fork.ID); !reflect.DeepEqual(got, forkFull) {
		t.Errorf("the fork's full history changed: %q, want %q", got, forkFull)
	}
	// The fork trims its own, the same way, and lets go of the source's rows.
	if _, through := trimAll(t, st, tn.ID, fork.ID, before, 5); through != 12 {
		t.Errorf("fork trimmed through %d, want 12", through)
	}
	if got := storetest.FullTexts(t, st, tn.ID, fork.ID); !reflect.DeepEqual(got, forkFull[12:]) {
		t.Errorf("the fork's trimmed full history %q, want %q", got, forkFull[12:])
	}
	if deleted, _ := trimAll(t, st, tn.ID, c.ID, before, 5); deleted != 12 {
		t.Errorf("second trim of the source deleted %d, want 12", deleted)
	}
	if n := ownRows(t, tn.ID, c.ID, 12); n != 0 {
		t.Errorf("%d rows of the trimmed prefix are left", n)
	}
	if got := storetest.FullTexts(t, st, tn.ID, c.ID); !reflect.DeepEqual(got, full[12:]) {
		t.Errorf("full history after the second trim %q, want %q", got, full[12:])
	}
	if got := storetest.FullTexts(t, st, tn.ID, fork.ID); !reflect.DeepEqual(got, forkFull[12:]) {
		t.Errorf("the fork's full history after its source's trim %q, want %q", got, forkFull[12:])
	}
	if got := compacted(c.ID); !reflect.DeepEqual(got, wantCompacted) {
		t.Errorf("compacted history changed: %q, want %q", got, wantCompacted)
	}
	if got := compacted(fork.ID); !reflect.DeepEqual(got, wantForkCompacted) {
		t.Errorf("the fork's compacted history changed: %q, want %q", got, wantForkCompacted)
	}
	var replaced int
	storetest.Scan(t, url, `SELECT count(*) FROM compaction_replaced WHERE tenant_id = $1 AND session_id = ANY($2)`,
		[]any{tn.ID, []string{c.ID, fork.ID}}, &replaced)
	if replaced != 0 {
		t.Errorf("%d rows of what the compaction replaced are kept; it served only forks inside the trimmed prefix", replaced)
	}
	for _, id := range []string{c.ID, fork.ID} {
		if sess, err := st.SessionGet(ctx, tn.ID, id); err != nil || sess.HistoryTrimmedThrough != 12 {
			t.Errorf("session %s: trimmed through %d, %v; want 12", id, sess.HistoryTrimmedThrough, err)
		}
	}

	// Nothing is cut inside the trimmed prefix; at its end or after, a fork
	// starts trimmed as far.
	var conflict *store.PointConflictError
	if _, err := forkAt(c, atMessage(5)); !errors.As(err, &conflict) || conflict.Reason != store.PointHistoryTrimmed {
		t.Errorf("fork inside the trimmed prefix: %v; want PointHistoryTrimmed", err)
	}
	late, err := forkAt(c, atMessage(20))
	if err != nil || late.HistoryTrimmedThrough != 12 {
		t.Fatalf("fork after the trimmed prefix: %+v, %v", late, err)
	}
	if got := storetest.FullTexts(t, st, tn.ID, late.ID); !reflect.DeepEqual(got, full[12:20]) {
		t.Errorf("fork of a trimmed session: %q, want %q", got, full[12:20])
	}
	// Deleting the source leaves its forks whole.
	if _, err := st.SessionDelete(ctx, tn.ID, c.ID); err != nil {
		t.Fatal(err)
	}
	if got := storetest.FullTexts(t, st, tn.ID, late.ID); !reflect.DeepEqual(got, full[12:20]) {
		t.Errorf("fork of a trimmed session after its source's deletion: %q, want %q", got, full[12:20])
	}
}

// The reads of a session's full history by turn or by origin (a turn's
// messages, its client's messages, its inputs, the seed) start after its
// trimmed prefix, also where the session still holds rows of the prefix
// that a fork reads: those are the fork's to read, not the session's.
func TestTurnReadsOfATrimmedSessionStartAfterThePrefix(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t)
	tn := storetest.NewTenant(t, st)
	ctx := context.Background()
	c := storetest.NewConversation(t, st, tn.ID, store.SessionCreateParams{},
		aap.UserMessage("seed-q"), aap.AssistantMessage(aap.TextBlock("seed-a")))
	for i := 1; i <= 3; i++ { // seqs 3-4, 5-6, 7-8
		c.Turn([]aap.Message{aap.UserMessage(fmt.Sprintf("q%d", i))}, []aap.Message{aap.AssistantMessage(aap.TextBlock(fmt.Sprintf("a%d", i)))}, nil)
	}
	if _, err := forkAt(c, atMessage(4)); err != nil {
		t.Fatal(err)
	}
	c.Compact(6)
	storetest.Exec(t, storetest.URL(t), `UPDATE messages SET created_at = now() - interval '40 days'
		WHERE tenant_id = $1 AND session_id = $2`, tn.ID, c.ID)
	if _, through := trimAll(t, st, tn.ID, c.ID, time.Now().Add(-30*day), 100); through != 6 {
		t.Fatalf("trimmed through %d, want 6", through)
	}
	if n := ownRows(t, tn.ID, c.ID, 6); n != 4 {
		t.Fatalf("%d rows of the prefix left, want 4 (those the fork reads)", n)
	}

	seed, err := st.SessionSeed(ctx, tn.ID, c.ID)
	if err != nil || len(seed) != 0 {
		t.Errorf("seed %+v, %v; want none: it was trimmed", seed, err)
	}
	for i, want := range []string{"", "", "a3"} {
		got, err := st.TurnMessages(ctx, tn.ID, c.ID, c.Turns[i])
		if err != nil {
			t.Fatal(err)
		}
		if texts := storedTexts(got); fmt.Sprint(texts) != fmt.Sprint(strings.Fields(want)) {
			t.Errorf("turn %d's messages %q, want %q", i+1, texts, want)
		}
		client, err := st.TurnClientMessages(ctx, tn.ID, c.ID, c.Turns[i])
		if err != nil {
			t.Fatal(err)
		}
		if texts, want := storedTexts(client), strings.Fields(strings.Replace(want, "a", "q", 1)); fmt.Sprint(texts) != fmt.Sprint(want) {
			t.Errorf("turn %d's client messages %q, want %q", i+1, texts, want)
		}
	}
	inputs, err := st.TurnInputs(ctx, tn.ID, c.ID, c.Turns)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []int{0, 0, 1} {
		if in, ok := inputs[c.Turns[i]]; !ok || len(in.Messages) != want {
			t.Errorf("turn %d's inputs %+v (found %v); want %d messages", i+1, in.Messages, ok, want)
		}
	}
}

// storedTexts are the plain texts of stored messages.
func storedTexts(msgs []store.StoredMessage) []string {
	out := []string{}
	for _, m := range msgs {
		out = append(out, m.Message.Content.PlainText())
	}
	return out
}

// A full history's read says where it was trimmed, as of the messages it
// read: after a trim through 6 of 8 messages, 6 and the 2 after it; after
// a trim of them all, 8 and none; 0 for the compacted history and for a
// session that is gone.
func TestHistoryEachSaysTheTrimPointOfItsMessages(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t)
	tn := storetest.NewTenant(t, st)
	ctx := context.Background()
	read := func(id string, typ aap.HistoryType) (int64, []int64) {
		t.Helper()
		var seqs []int64
		trimmed, err := st.HistoryEach(ctx, store.HistoryParams{TenantID: tn.ID, SessionID: id, Type: typ}, func(seq int64, _ json.RawMessage) error {
			seqs = append(seqs, seq)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return trimmed, seqs
	}
	part := storetest.NewConversation(t, st, tn.ID, store.SessionCreateParams{})
	all := storetest.NewConversation(t, st, tn.ID, store.SessionCreateParams{})
	for i := range 4 {
		part.Say(fmt.Sprintf("q%d", i), fmt.Sprintf("a%d", i))
		all.Say(fmt.Sprintf("q%d", i), fmt.Sprintf("a%d", i))
	}
	part.Trim(storetest.URL(t), 6)
	all.Trim(storetest.URL(t), 8)
	if trimmed, seqs := read(part.ID, aap.HistoryFull); trimmed != 6 || fmt.Sprint(seqs) != "[7 8]" {
		t.Errorf("trimmed through 6: %d, %v; want 6, [7 8]", trimmed, seqs)
	}
	if trimmed, seqs := read(all.ID, aap.HistoryFull); trimmed != 8 || len(seqs) != 0 {
		t.Errorf("trimmed whole: %d, %v; want 8 and no message", trimmed, seqs)
	}
	if trimmed, _ := read(part.ID, aap.HistoryCompacted); trimmed != 0 {
		t.Errorf("compacted history: trimmed %d, want 0", trimmed)
	}
	if trimmed, seqs := read("sess_0190a0a0a0a07000800000000000000", aap.HistoryFull); trimmed != 0 || len(seqs) != 0 {
		t.Errorf("no such session: %d, %v; want 0 and nothing", trimmed, seqs)
	}
}
