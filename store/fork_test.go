package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/store"
	"github.com/aapd/aapd/store/storetest"
)

// forkAt forks the conversation's session at p.
func forkAt(c *storetest.Conversation, p store.ForkPoint) (store.Session, error) {
	return c.Store.SessionFork(context.Background(), store.SessionForkParams{TenantID: c.TenantID, SessionID: c.ID, Point: p})
}

func atMessage(n int64) store.ForkPoint { return store.ForkPoint{Messages: n, AtMessages: true} }

func textAnswer(s string) []aap.Message { return []aap.Message{aap.AssistantMessage(aap.TextBlock(s))} }

// A fork at any point has the source's full history up to the point, and
// its compacted history as it stood there: the compactions whose ranges
// end at or before the point, with their records, and none after.
func TestForkAtEveryPointCopiesBothHistoriesAsTheyStoodThere(t *testing.T) {
	st := storetest.Open(t)
	tn := storetest.NewTenant(t, st)
	ctx := context.Background()
	c, openAt := storetest.LongConversation(t, st, tn.ID)
	full := storetest.FullTexts(t, st, tn.ID, c.ID)
	for p := int64(0); p <= c.LastSeq; p++ {
		fork, err := forkAt(c, atMessage(p))
		if p == openAt {
			var conflict *store.PointConflictError
			if !errors.As(err, &conflict) || conflict.Reason != store.PointToolCallsOpen || !strings.Contains(err.Error(), `"call_5"`) {
				t.Errorf("fork at %d, after an unanswered call: %v; want a PointConflictError naming call_5", p, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("fork at %d: %v", p, err)
		}
		if got := storetest.FullTexts(t, st, tn.ID, fork.ID); !reflect.DeepEqual(got, full[:p]) {
			t.Errorf("fork at %d: full history %q, want %q", p, got, full[:p])
		}
		h, err := st.History(ctx, store.HistoryParams{TenantID: tn.ID, SessionID: fork.ID, Type: aap.HistoryCompacted})
		if err != nil {
			t.Fatal(err)
		}
		want, carried := c.WantCompacted(p)
		if got := storetest.CompactedTexts(h); !reflect.DeepEqual(got, want) {
			t.Errorf("fork at %d: compacted history\n%q\nwant\n%q", p, got, want)
		}
		// Its seqs run to the point, as a session's compacted history
		// always does: the fork's next messages follow them.
		if len(h) > 0 && h[len(h)-1].Seq != p {
			t.Errorf("fork at %d: compacted history ends at seq %d", p, h[len(h)-1].Seq)
		}
		recs, err := st.CompactionList(ctx, tn.ID, fork.ID, 100)
		if err != nil || len(recs) != carried {
			t.Errorf("fork at %d: %d compaction records (%v), want %d", p, len(recs), err, carried)
		}
	}
}

// The end of a turn is the session as it stood when that turn ended; the
// whole session is its end. Both are the same fork as the message count.
func TestForkAtATurnIsTheSessionWhenItEnded(t *testing.T) {
	st := storetest.Open(t)
	tn := storetest.NewTenant(t, st)
	ctx := context.Background()
	c, _ := storetest.LongConversation(t, st, tn.ID)
	for i, turn := range c.Turns {
		if i == 4 {
			continue // ended waiting on a tool call: see TestForkCarriesPendingToolCallsOnlyAtTheEnd
		}
		fork, err := forkAt(c, store.ForkPoint{TurnID: turn})
		if err != nil {
			t.Fatalf("fork at turn %d: %v", i+1, err)
		}
		if fork.ForkedFrom == nil || fork.ForkedFrom.SessionID != c.ID || fork.ForkedFrom.Messages != c.TurnEnds[i] {
			t.Errorf("fork at turn %d: forkedFrom %+v, want %s at %d", i+1, fork.ForkedFrom, c.ID, c.TurnEnds[i])
		}
		if got := storetest.FullTexts(t, st, tn.ID, fork.ID); len(got) != int(c.TurnEnds[i]) {
			t.Errorf("fork at turn %d: %d messages, want %d", i+1, len(got), c.TurnEnds[i])
		}
	}
	whole, err := forkAt(c, store.ForkPoint{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := st.SessionGet(ctx, tn.ID, whole.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.ForkedFrom == nil || got.ForkedFrom.Messages != c.LastSeq || got.ForkedFrom.SessionID != c.ID {
		t.Errorf("whole fork read back: forkedFrom %+v", got.ForkedFrom)
	}
	if !reflect.DeepEqual(storetest.FullTexts(t, st, tn.ID, whole.ID), storetest.FullTexts(t, st, tn.ID, c.ID)) {
		t.Error("the whole fork's full history differs from its source's")
	}
	srcH, _ := st.History(ctx, store.HistoryParams{TenantID: tn.ID, SessionID: c.ID, Type: aap.HistoryCompacted})
	forkH, _ := st.History(ctx, store.HistoryParams{TenantID: tn.ID, SessionID: whole.ID, Type: aap.HistoryCompacted})
	if !reflect.DeepEqual(storetest.CompactedTexts(srcH), storetest.CompactedTexts(forkH)) {
		t.Errorf("the whole fork's compacted history differs:\n%q\n%q", storetest.CompactedTexts(forkH), storetest.CompactedTexts(srcH))
	}
}

// A fork takes the source's agent, server tools, options (secret ones
// sealed as they were) and client tools; its owner is the caller; it has
// no turns of its own, and its messages belong to none.
func TestForkCarriesTheConfigurationAndStartsItsOwnEventLog(t *testing.T) {
	st := storetest.Open(t)
	tn := storetest.NewTenant(t, st)
	ctx := context.Background()
	c, _ := storetest.LongConversation(t, st, tn.ID)
	fork, err := st.SessionFork(ctx, store.SessionForkParams{TenantID: tn.ID, SessionID: c.ID, NewOwner: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	src, err := st.SessionGet(ctx, tn.ID, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	got, err := st.SessionGet(ctx, tn.ID, fork.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Owner != "alice" || got.AgentName != src.AgentName || !reflect.DeepEqual(got.AgentTools, src.AgentTools) ||
		!reflect.DeepEqual(got.Options, src.Options) || !reflect.DeepEqual(got.SecretOptions, src.SecretOptions) ||
		!reflect.DeepEqual(got.ClientTools, src.ClientTools) {
		t.Errorf("fork %+v\nsource %+v", got, src)
	}
	var sealedEqual bool
	storetest.Scan(t, storetest.URL(t), `SELECT f.secret_options = s.secret_options FROM sessions f, sessions s
		WHERE f.tenant_id = $1 AND f.id = $2 AND s.tenant_id = $1 AND s.id = $3`, []any{tn.ID, fork.ID, c.ID}, &sealedEqual)
	if !sealedEqual {
		t.Error("the fork's secret options were not carried sealed as they were")
	}
	turns, err := st.TurnList(ctx, store.TurnListParams{TenantID: tn.ID, SessionID: fork.ID, Limit: 10})
	if err != nil || len(turns.Turns) != 0 {
		t.Errorf("fork has turns %+v (%v)", turns.Turns, err)
	}
	log, err := st.SessionLog(ctx, store.SessionLogParams{TenantID: tn.ID, SessionID: fork.ID, Turns: 10})
	if err != nil || len(log) != 0 {
		t.Errorf("fork's event log: %+v (%v)", log, err)
	}
	var withTurn int
	storetest.Scan(t, storetest.URL(t), `SELECT count(*) FROM messages WHERE tenant_id = $1 AND session_id = $2 AND turn_id IS NOT NULL`,
		[]any{tn.ID, fork.ID}, &withTurn)
	if withTurn != 0 {
		t.Errorf("%d of the fork's messages name a turn", withTurn)
	}
	// The fork runs turns of its own, after the copied history.
	fc := storetest.Continue(t, st, tn.ID, fork.ID, c.LastSeq)
	fc.Turn([]aap.Message{aap.UserMessage("in the fork")}, textAnswer("ok"), nil)
	if got := storetest.FullTexts(t, st, tn.ID, fork.ID); got[len(got)-1] != fmt.Sprintf("%d:ok", c.LastSeq+2) {
		t.Errorf("the fork's own turn: %q", got[len(got)-3:])
	}
	if got := storetest.FullTexts(t, st, tn.ID, c.ID); len(got) != int(c.LastSeq) {
		t.Errorf("the fork's turn changed its source: %d messages", len(got))
	}
}

// Pending tool calls are carried exactly at the session's end (the fork
// waits on them and can answer them); at an earlier point where a call is
// unanswered, the fork is refused.
func TestForkCarriesPendingToolCallsOnlyAtTheEnd(t *testing.T) {
	st := storetest.Open(t)
	tn := storetest.NewTenant(t, st)
	ctx := context.Background()
	c := storetest.NewConversation(t, st, tn.ID, store.SessionCreateParams{}, aap.UserMessage("hi"))
	call := storetest.ToolCall("call_1")
	waiting := c.Turn([]aap.Message{aap.UserMessage("look it up")}, []aap.Message{aap.AssistantMessage(aap.ToolUseBlock(call))},
		[]aap.PendingToolCall{{ToolCall: call}})
	for _, p := range []store.ForkPoint{{}, {TurnID: waiting}, atMessage(c.LastSeq)} {
		fork, err := forkAt(c, p)
		if err != nil {
			t.Fatalf("fork at the end (%+v): %v", p, err)
		}
		got, err := st.SessionGet(ctx, tn.ID, fork.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Pending) != 1 || got.Pending[0].ToolCallID != "call_1" || got.Pending[0].Server || got.Status() != store.SessionRequiresAction {
			t.Errorf("fork at the end (%+v) waits on %+v (%s)", p, got.Pending, got.Status())
		}
		// The fork answers the call.
		fc := storetest.Continue(t, st, tn.ID, fork.ID, c.LastSeq)
		fc.Turn([]aap.Message{aap.ToolMessage("call_1", "42")}, textAnswer("it is 42"), nil)
	}
	// Once answered in the source, the point after the call is refused.
	c.Turn([]aap.Message{aap.ToolMessage("call_1", "7")}, textAnswer("it is 7"), nil)
	for _, p := range []store.ForkPoint{{TurnID: waiting}, atMessage(3)} {
		var conflict *store.PointConflictError
		if _, err := forkAt(c, p); !errors.As(err, &conflict) || conflict.Reason != store.PointToolCallsOpen {
			t.Errorf("fork at %+v, after an answered call: %v; want PointToolCallsOpen", p, err)
		}
	}
	for _, n := range []int64{2, 4, 5} {
		if _, err := forkAt(c, atMessage(n)); err != nil {
			t.Errorf("fork at message %d: %v", n, err)
		}
	}
}

// A session with a running turn forks at any point the turn has not
// written, and nothing of the turn is in the fork; a point that takes
// anything of it is refused, naming it.
func TestForkNeverTakesARunningTurn(t *testing.T) {
	st := storetest.Open(t)
	tn := storetest.NewTenant(t, st)
	ctx := context.Background()
	in := storetest.StartInstance(t, st)
	c := storetest.NewConversation(t, st, tn.ID, store.SessionCreateParams{}, aap.UserMessage("one"), aap.UserMessage("two"))
	done := c.Turn([]aap.Message{aap.UserMessage("three")}, textAnswer("four"), nil)
	begun := c.StartTurn(in.ID(), "five")
	running := begun.Turn.ID
	if err := st.TurnCommitStep(ctx, store.TurnStepParams{Ref: begun.Turn.Ref(), Step: 1, FirstSeq: 6, Lease: time.Minute,
		Messages: []store.NewMessage{{Message: aap.AssistantMessage(aap.TextBlock("six")), Origin: store.OriginAgent}}}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []store.ForkPoint{{}, {TurnID: running}, atMessage(5), atMessage(6), atMessage(9)} {
		var conflict *store.PointConflictError
		_, err := forkAt(c, p)
		if !errors.As(err, &conflict) || conflict.Reason != store.PointTurnRunning || conflict.TurnID != running {
			t.Errorf("fork at %+v: %v; want PointTurnRunning naming %s", p, err, running)
		}
	}
	for _, p := range []store.ForkPoint{{TurnID: done}, atMessage(4), atMessage(2)} {
		fork, err := forkAt(c, p)
		if err != nil {
			t.Fatalf("fork at %+v: %v", p, err)
		}
		for _, typ := range []aap.HistoryType{aap.HistoryFull, aap.HistoryCompacted} {
			h, err := st.History(ctx, store.HistoryParams{TenantID: tn.ID, SessionID: fork.ID, Type: typ})
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range h {
				if text := m.Message.Content.PlainText(); text == "five" || text == "six" {
					t.Errorf("fork at %+v: %s history holds the running turn's %q", p, typ, text)
				}
			}
		}
	}
	// Once the turn's process is gone, the turn is no longer running: the
	// whole session forks, with what the dead turn committed.
	in.Close()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		// The server drops the closed connection's lock when its backend
		// has noticed.
		if why, err := st.TurnLooksDead(ctx, begun.Turn.Ref()); err != nil || why != "" || time.Now().After(deadline) {
			break
		}
	}
	fork, err := forkAt(c, store.ForkPoint{})
	if err != nil {
		t.Fatalf("fork after the turn's process died: %v", err)
	}
	if got := storetest.FullTexts(t, st, tn.ID, fork.ID); len(got) != 6 {
		t.Errorf("fork after the turn died: %q", got)
	}
}

// A point that names nothing of the session is the caller's mistake.
func TestForkPointErrors(t *testing.T) {
	st := storetest.Open(t)
	tn := storetest.NewTenant(t, st)
	ctx := context.Background()
	c := storetest.NewConversation(t, st, tn.ID, store.SessionCreateParams{}, aap.UserMessage("one"))
	other := storetest.NewConversation(t, st, tn.ID, store.SessionCreateParams{}, aap.UserMessage("x"))
	otherTurn := other.Turn([]aap.Message{aap.UserMessage("q")}, textAnswer("a"), nil)
	for _, tc := range []struct {
		p     store.ForkPoint
		field string
	}{
		{atMessage(2), "at.message"},
		{atMessage(-1), "at.message"},
		{store.ForkPoint{TurnID: "turn_nope"}, "at.turn"},
		{store.ForkPoint{TurnID: otherTurn}, "at.turn"},
	} {
		var bad *store.PointError
		if _, err := forkAt(c, tc.p); !errors.As(err, &bad) || bad.Field != tc.field {
			t.Errorf("fork at %+v: %v; want a PointError on %s", tc.p, err, tc.field)
		}
	}
	// Another tenant's session, or another end user's, is not found.
	stranger := storetest.NewTenant(t, st)
	if _, err := st.SessionFork(ctx, store.SessionForkParams{TenantID: stranger.ID, SessionID: c.ID}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("fork of another tenant's session: %v", err)
	}
	owned := storetest.NewConversation(t, st, tn.ID, store.SessionCreateParams{Owner: "alice"}, aap.UserMessage("mine"))
	if _, err := st.SessionFork(ctx, store.SessionForkParams{TenantID: tn.ID, Owner: "bob", SessionID: owned.ID, NewOwner: "bob"}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("bob forks alice's session: %v", err)
	}
	if f, err := st.SessionFork(ctx, store.SessionForkParams{TenantID: tn.ID, Owner: "alice", SessionID: owned.ID, NewOwner: "alice"}); err != nil || f.Owner != "alice" {
		t.Errorf("alice forks her session: %+v, %v", f, err)
	}
}

// A fork of a fork at an earlier point still finds the compacted history
// as it stood there: what the carried compactions replaced travels with
// them.
func TestForkOfAForkFindsTheCompactedHistoryAsItStood(t *testing.T) {
	st := storetest.Open(t)
	tn := storetest.NewTenant(t, st)
	ctx := context.Background()
	c, openAt := storetest.LongConversation(t, st, tn.ID)
	first, err := forkAt(c, store.ForkPoint{})
	if err != nil {
		t.Fatal(err)
	}
	for p := int64(0); p <= c.LastSeq; p++ {
		if p == openAt {
			continue
		}
		direct, err := forkAt(c, atMessage(p))
		if err != nil {
			t.Fatal(err)
		}
		second, err := st.SessionFork(ctx, store.SessionForkParams{TenantID: tn.ID, SessionID: first.ID, Point: atMessage(p)})
		if err != nil {
			t.Fatalf("fork of the fork at %d: %v", p, err)
		}
		a, _ := st.History(ctx, store.HistoryParams{TenantID: tn.ID, SessionID: direct.ID, Type: aap.HistoryCompacted})
		b, _ := st.History(ctx, store.HistoryParams{TenantID: tn.ID, SessionID: second.ID, Type: aap.HistoryCompacted})
		if !reflect.DeepEqual(storetest.CompactedTexts(a), storetest.CompactedTexts(b)) {
			t.Errorf("at %d: fork of the fork\n%q\ndirect fork\n%q", p, storetest.CompactedTexts(b), storetest.CompactedTexts(a))
		}
	}
}

// A compaction made before compactions kept what they replaced leaves no
// compacted history for the points before its range's end: such a fork is
// refused, and the later points still fork.
func TestForkBeforeACompactionThatKeptNothingIsRefused(t *testing.T) {
	st := storetest.Open(t)
	tn := storetest.NewTenant(t, st)
	c, _ := storetest.LongConversation(t, st, tn.ID)
	storetest.Exec(t, storetest.URL(t), `DELETE FROM compaction_replaced WHERE tenant_id = $1 AND session_id = $2`, tn.ID, c.ID)
	var conflict *store.PointConflictError
	if _, err := forkAt(c, atMessage(c.ToSeqs[0]-1)); !errors.As(err, &conflict) || conflict.Reason != store.PointCompactedHistoryGone {
		t.Errorf("fork before the first compaction's end: %v; want PointCompactedHistoryGone", err)
	}
	if _, err := forkAt(c, atMessage(c.ToSeqs[2])); err != nil {
		t.Errorf("fork after the last compaction's end: %v", err)
	}
}

// On Citus a fork is a transaction of the tenant's shard group: every
// statement goes to the one worker holding the tenant, and it commits there
// in one phase. So does a compaction, which keeps what it replaces.
func TestForkStaysOnTheTenantsShardOnCitus(t *testing.T) {
	if !storetest.Citus() {
		t.Skip("Citus only (make test-citus)")
	}
	st := storetest.Open(t)
	tn := storetest.NewTenant(t, st)
	ctx := context.Background()
	c, _ := storetest.LongConversation(t, st, tn.ID)

	var (
		mu      sync.Mutex
		notices []string
	)
	u, err := url.Parse(storetest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	u.RawQuery += "&options=-c%20citus.log_remote_commands%3Don"
	watched, err := store.Open(ctx, store.Config{DatabaseURL: u.String(), Notices: func(text string) {
		mu.Lock()
		notices = append(notices, text)
		mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer watched.Close()
	check := func(what string, do func() error) {
		t.Helper()
		mu.Lock()
		notices = nil
		mu.Unlock()
		if err := do(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		mu.Lock()
		defer mu.Unlock()
		servers, commits := map[string]bool{}, 0
		for _, n := range notices {
			if strings.Contains(n, "PREPARE TRANSACTION") || strings.Contains(n, "COMMIT PREPARED") {
				t.Errorf("%s: a two-phase commit: %s", what, n)
			}
			if strings.Contains(n, "issuing COMMIT") {
				commits++
			}
			if _, server, ok := strings.Cut(n, "on server "); ok {
				servers[strings.Fields(server)[0]] = true
			}
		}
		if len(servers) != 1 || commits != 1 {
			t.Errorf("%s went to workers %v and committed %d times; want one worker, one commit\n%s", what, servers, commits, strings.Join(notices, "\n"))
		}
	}
	check("a fork carrying compactions", func() error {
		_, err := watched.SessionFork(ctx, store.SessionForkParams{TenantID: tn.ID, SessionID: c.ID})
		return err
	})
	check("a fork before a compaction's end", func() error {
		_, err := watched.SessionFork(ctx, store.SessionForkParams{TenantID: tn.ID, SessionID: c.ID, Point: atMessage(c.ToSeqs[1] - 2)})
		return err
	})
	check("a compaction", func() error {
		snap, err := watched.CompactedSnapshotGet(ctx, tn.ID, c.ID)
		if err != nil {
			return err
		}
		mu.Lock()
		notices = nil
		mu.Unlock()
		_, err = watched.CompactionApply(ctx, store.CompactionApplyParams{TenantID: tn.ID, SessionID: c.ID, BaseVersion: snap.Version,
			UpTo: snap.Messages[len(snap.Messages)-1].Seq, Items: []store.CompactedItem{{Message: aap.UserMessage("all of it")}},
			Record: store.Compaction{Trigger: "manual", Strategy: "test", FromSeq: 1, ToSeq: c.LastSeq}})
		return err
	})
}

// A fork reads the history it inherits where it is; deleting the session
// it came from first gives it its own copy, so its history never changes.
// A fork of a fork that ran turns of its own reads each part from the
// session that wrote it, through any deletion of either.
func TestForkKeepsItsHistoryWhenItsSourcesAreDeleted(t *testing.T) {
	st := storetest.Open(t)
	tn := storetest.NewTenant(t, st)
	ctx := context.Background()
	origin, _ := storetest.LongConversation(t, st, tn.ID)
	first, err := forkAt(origin, atMessage(20))
	if err != nil {
		t.Fatal(err)
	}
	mid := storetest.Continue(t, st, tn.ID, first.ID, 20)
	mid.Turn([]aap.Message{aap.UserMessage("mid q")}, textAnswer("mid a"), nil)
	second, err := st.SessionFork(ctx, store.SessionForkParams{TenantID: tn.ID, SessionID: first.ID})
	if err != nil {
		t.Fatal(err)
	}
	third, err := st.SessionFork(ctx, store.SessionForkParams{TenantID: tn.ID, SessionID: second.ID, Point: atMessage(21)})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{}
	wantCompacted := map[string][]string{}
	for _, id := range []string{first.ID, second.ID, third.ID} {
		want[id] = storetest.FullTexts(t, st, tn.ID, id)
		h, _ := st.History(ctx, store.HistoryParams{TenantID: tn.ID, SessionID: id, Type: aap.HistoryCompacted})
		wantCompacted[id] = storetest.CompactedTexts(h)
	}
	if len(want[second.ID]) != 22 || want[second.ID][21] != "22:mid a" || len(want[third.ID]) != 21 {
		t.Fatalf("forks of the fork: %q, %q", want[second.ID], want[third.ID])
	}
	check := func(when string, ids ...string) {
		t.Helper()
		for _, id := range ids {
			if got := storetest.FullTexts(t, st, tn.ID, id); !reflect.DeepEqual(got, want[id]) {
				t.Errorf("%s: full history of %s\n%q\nwant\n%q", when, id, got, want[id])
			}
			var streamed []string
			if _, err := st.HistoryEach(ctx, store.HistoryParams{TenantID: tn.ID, SessionID: id, Type: aap.HistoryFull}, func(seq int64, m json.RawMessage) error {
				var msg aap.Message
				err := json.Unmarshal(m, &msg)
				streamed = append(streamed, fmt.Sprintf("%d:%s", seq, msg.Content.PlainText()))
				return err
			}); err != nil || !reflect.DeepEqual(streamed, want[id]) {
				t.Errorf("%s: streamed full history of %s: %q, %v", when, id, streamed, err)
			}
			h, _ := st.History(ctx, store.HistoryParams{TenantID: tn.ID, SessionID: id, Type: aap.HistoryCompacted})
			if got := storetest.CompactedTexts(h); !reflect.DeepEqual(got, wantCompacted[id]) {
				t.Errorf("%s: compacted history of %s changed", when, id)
			}
		}
	}
	if _, err := st.SessionDelete(ctx, tn.ID, origin.ID); err != nil {
		t.Fatal(err)
	}
	check("the origin deleted", first.ID, second.ID, third.ID)
	if _, err := st.SessionDelete(ctx, tn.ID, first.ID); err != nil {
		t.Fatal(err)
	}
	check("the first fork deleted", second.ID, third.ID)
	// A fork made now still forks at any point.
	fourth, err := st.SessionFork(ctx, store.SessionForkParams{TenantID: tn.ID, SessionID: third.ID, Point: atMessage(10)})
	if err != nil {
		t.Fatal(err)
	}
	if got := storetest.FullTexts(t, st, tn.ID, fourth.ID); !reflect.DeepEqual(got, want[third.ID][:10]) {
		t.Errorf("fork after deletions: %q", got)
	}
	// Nothing names a deleted session.
	var dangling int
	storetest.Scan(t, storetest.URL(t), `SELECT count(*) FROM inherited_messages i WHERE tenant_id = $1
		AND NOT EXISTS (SELECT 1 FROM sessions s WHERE s.tenant_id = i.tenant_id AND s.id = i.source_session_id)`, []any{tn.ID}, &dangling)
	if dangling != 0 {
		t.Errorf("%d inherited ranges name a deleted session", dangling)
	}
}

// Forks and deletions of their sources racing: every fork that was made
// has its whole history, whichever committed first.
func TestForksRacingDeletionsOfTheirSources(t *testing.T) {
	st := storetest.Open(t)
	tn := storetest.NewTenant(t, st)
	ctx := context.Background()
	seed := make([]aap.Message, 50)
	for i := range seed {
		seed[i] = aap.UserMessage(fmt.Sprintf("m%d", i+1))
	}
	for round := range 10 {
		origin := storetest.NewConversation(t, st, tn.ID, store.SessionCreateParams{}, seed...)
		mid, err := forkAt(origin, atMessage(40))
		if err != nil {
			t.Fatal(err)
		}
		var (
			wg    sync.WaitGroup
			forks = make(chan string, 8)
		)
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				f, err := st.SessionFork(ctx, store.SessionForkParams{TenantID: tn.ID, SessionID: mid.ID, Point: atMessage(30)})
				if err == nil {
					forks <- f.ID
				} else if !errors.Is(err, store.ErrNotFound) {
					t.Errorf("round %d: fork: %v", round, err)
				}
			}()
		}
		wg.Add(2)
		go func() {
			defer wg.Done()
			if _, err := st.SessionDelete(ctx, tn.ID, origin.ID); err != nil {
				t.Errorf("round %d: delete the origin: %v", round, err)
			}
		}()
		go func() {
			defer wg.Done()
			if _, err := st.SessionDelete(ctx, tn.ID, mid.ID); err != nil {
				t.Errorf("round %d: delete the fork: %v", round, err)
			}
		}()
		wg.Wait()
		close(forks)
		for id := range forks {
			got := storetest.FullTexts(t, st, tn.ID, id)
			if len(got) != 30 || got[0] != "1:m1" || got[29] != "30:m30" {
				t.Errorf("round %d: a fork made during the deletions has %q", round, got)
			}
		}
	}
}

// A background turn waiting for a worker holds its session as a running
// turn does, though no process runs it yet: a fork or an export never takes
// it, and goes on to be resumed (docs/background.md).
func TestForkNeverTakesAQueuedBackgroundTurn(t *testing.T) {
	st := storetest.Open(t)
	tn := storetest.NewTenant(t, st)
	ctx := context.Background()
	c := storetest.NewConversation(t, st, tn.ID, store.SessionCreateParams{}, aap.UserMessage("one"))
	queued, err := st.TurnBegin(ctx, &store.TurnBeginParams{
		TenantID: tn.ID, SessionID: c.ID, TurnID: store.NewTurnID(), Stream: aap.StreamNone, Lease: time.Minute,
		Background: true, Queued: true,
		Prepare: func(store.Session) (store.TurnPlan, error) {
			return store.TurnPlan{Messages: []store.NewMessage{{Message: aap.UserMessage("later"), Origin: store.OriginClient}}}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	var conflict *store.PointConflictError
	if _, err := forkAt(c, store.ForkPoint{}); !errors.As(err, &conflict) || conflict.TurnID != queued.Turn.ID {
		t.Errorf("fork of the whole session: %v; want the queued turn running", err)
	}
	fork, err := forkAt(c, atMessage(1))
	if err != nil {
		t.Fatal(err)
	}
	if got := storetest.FullTexts(t, st, tn.ID, fork.ID); !reflect.DeepEqual(got, []string{"1:one"}) {
		t.Errorf("fork before the queued turn: %q", got)
	}
}
