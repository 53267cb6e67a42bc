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

// conversation builds a session event by event, as turns and compactions
// write it, and remembers the compacted history after each event: the
// model a fork's compacted history is checked against.
type conversation struct {
	t      *testing.T
	st     *store.Store
	tenant string
	id     string
	// states[i] is the compacted history after event i, lastSeqs[i] the
	// session's last seq then; compactedAt[k] is the event of the k-th
	// compaction (from 0), toSeqs[k] the end of its range.
	states      [][]string
	lastSeqs    []int64
	compactedAt []int
	toSeqs      []int64
	turns       []string // turn ids, oldest first
	turnEnds    []int64  // the last seq of each turn
	lastSeq     int64
}

func newConversation(t *testing.T, st *store.Store, tenantID string, p store.SessionCreateParams, seed ...aap.Message) *conversation {
	t.Helper()
	p.TenantID, p.AgentName, p.Messages = tenantID, "echo", seed
	sess, _, err := st.SessionCreate(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	c := &conversation{t: t, st: st, tenant: tenantID, id: sess.ID, lastSeq: int64(len(seed))}
	c.record()
	return c
}

// record notes the compacted history after an event.
func (c *conversation) record() {
	c.t.Helper()
	h, err := c.st.History(context.Background(), store.HistoryParams{TenantID: c.tenant, SessionID: c.id, Type: aap.HistoryCompacted})
	if err != nil {
		c.t.Fatal(err)
	}
	c.states, c.lastSeqs = append(c.states, compactedTexts(h)), append(c.lastSeqs, c.lastSeq)
}

// compactedTexts shows a compacted history as "seq<-source:text" lines.
func compactedTexts(h []store.StoredMessage) []string {
	out := []string{}
	for _, m := range h {
		out = append(out, fmt.Sprintf("%d<-%d:%s", m.Seq, m.SourceSeq, m.Message.Content.PlainText()))
	}
	return out
}

// turn runs a turn: the client's messages at its claim, then each of the
// agent's as a step of its own; it ends waiting on pending.
func (c *conversation) turn(client []aap.Message, agent []aap.Message, pending []aap.PendingToolCall) string {
	c.t.Helper()
	ctx := context.Background()
	var in []store.NewMessage
	for _, m := range client {
		in = append(in, store.NewMessage{Message: m, Origin: store.OriginClient})
	}
	begun, err := c.st.TurnBegin(ctx, &store.TurnBeginParams{
		TenantID: c.tenant, SessionID: c.id, TurnID: store.NewTurnID(), Stream: aap.StreamNone, Owner: 1, Lease: time.Minute,
		Prepare: func(store.Session) (store.TurnPlan, error) { return store.TurnPlan{Messages: in}, nil },
	})
	if err != nil {
		c.t.Fatal(err)
	}
	c.lastSeq = begun.LastSeq
	c.record()
	ref := begun.Turn.Ref()
	for i, m := range agent {
		c.lastSeq++
		if i < len(agent)-1 {
			if err := c.st.TurnCommitStep(ctx, store.TurnStepParams{Ref: ref, Step: i + 1, FirstSeq: c.lastSeq, Lease: time.Minute,
				Messages: []store.NewMessage{{Message: m, Origin: store.OriginAgent}}}); err != nil {
				c.t.Fatal(err)
			}
			c.record()
			continue
		}
		stop := aap.StopEndTurn
		if len(pending) > 0 {
			stop = aap.StopToolUse
		}
		if _, err := c.st.TurnFinish(ctx, store.TurnFinishParams{Ref: ref, Step: i + 1, FirstSeq: c.lastSeq,
			Messages: []store.NewMessage{{Message: m, Origin: store.OriginAgent}}, Pending: pending,
			Status: store.TurnCompleted, StopReason: stop, InputTokens: 10, OutputTokens: 5,
			Events: []aap.Event{aap.TurnStart(), aap.TurnStop(stop)}}); err != nil {
			c.t.Fatal(err)
		}
		c.record()
	}
	c.turns, c.turnEnds = append(c.turns, ref.TurnID), append(c.turnEnds, c.lastSeq)
	return ref.TurnID
}

// compact replaces the compacted history up to its end with a summary of
// every message up to toSeq and the messages after it, as a rolling
// summary does.
func (c *conversation) compact(toSeq int64) {
	c.t.Helper()
	ctx := context.Background()
	snap, err := c.st.CompactedSnapshotGet(ctx, c.tenant, c.id)
	if err != nil {
		c.t.Fatal(err)
	}
	items := []store.CompactedItem{{Message: aap.UserMessage(fmt.Sprintf("summary to %d", toSeq))}}
	for _, m := range snap.Messages {
		if m.SourceSeq > toSeq {
			items = append(items, store.CompactedItem{SourceSeq: m.SourceSeq, Message: m.Message, Extra: m.Extra})
		}
	}
	if _, err := c.st.CompactionApply(ctx, store.CompactionApplyParams{TenantID: c.tenant, SessionID: c.id,
		BaseVersion: snap.Version, UpTo: snap.Messages[len(snap.Messages)-1].Seq, Items: items,
		Record: store.Compaction{Trigger: "manual", Strategy: "test", FromSeq: 1, ToSeq: toSeq}}); err != nil {
		c.t.Fatal(err)
	}
	c.record()
	c.compactedAt, c.toSeqs = append(c.compactedAt, len(c.states)-1), append(c.toSeqs, toSeq)
}

// wantCompacted is the compacted history as it stood at point p: the state
// once message p was written and the last compaction p carries had run,
// without what follows p.
func (c *conversation) wantCompacted(p int64) (texts []string, carried int) {
	at := 0
	for at < len(c.lastSeqs)-1 && c.lastSeqs[at] < p {
		at++
	}
	for k, to := range c.toSeqs {
		if to > p {
			break
		}
		carried, at = k+1, max(at, c.compactedAt[k])
	}
	texts = []string{}
	for _, line := range c.states[at] {
		var seq, src int64
		fmt.Sscanf(line, "%d<-%d:", &seq, &src)
		if src <= p {
			texts = append(texts, line)
		}
	}
	return texts, carried
}

func (c *conversation) fork(p store.ForkPoint) (store.Session, error) {
	return c.st.SessionFork(context.Background(), store.SessionForkParams{TenantID: c.tenant, SessionID: c.id, Point: p})
}

func atMessage(n int64) store.ForkPoint { return store.ForkPoint{Messages: n, AtMessages: true} }

func fullTexts(t *testing.T, st *store.Store, tenantID, sessionID string) []string {
	t.Helper()
	h, err := st.History(context.Background(), store.HistoryParams{TenantID: tenantID, SessionID: sessionID, Type: aap.HistoryFull})
	if err != nil {
		t.Fatal(err)
	}
	out := []string{}
	for _, m := range h {
		out = append(out, fmt.Sprintf("%d:%s", m.Seq, m.Message.Content.PlainText()))
	}
	return out
}

func toolCall(id string) aap.ToolCall {
	return aap.ToolCall{ToolCallID: id, Name: "lookup", Input: json.RawMessage(`{"q":"x"}`)}
}

// buildLongConversation is a session of seed messages, a dozen turns (one
// of them calling a client tool, answered by the next), and three rolling
// compactions between them.
func buildLongConversation(t *testing.T, st *store.Store, tenantID string) (c *conversation, openAt int64) {
	c = newConversation(t, st, tenantID, store.SessionCreateParams{
		AgentTools:    []aap.ServerToolRef{{Name: "clock"}},
		Options:       map[string]string{"model": "m1"},
		SecretOptions: map[string]string{"apiKey": "sk-secret"},
		ClientTools:   []aap.ToolSpec{{Name: "lookup", Description: "looks up", Parameters: json.RawMessage(`{"type":"object"}`)}},
	}, aap.SystemMessage("be brief"), aap.UserMessage("seed"))
	for i := 1; i <= 12; i++ {
		q, a := aap.UserMessage(fmt.Sprintf("q%d", i)), aap.AssistantMessage(aap.ContentBlock{Type: aap.BlockText, Text: fmt.Sprintf("a%d", i)})
		switch i {
		case 5: // a client tool call, answered by the next turn
			call := toolCall("call_5")
			c.turn([]aap.Message{q}, []aap.Message{a, aap.AssistantMessage(aap.ToolUseBlock(call))}, []aap.PendingToolCall{{ToolCall: call}})
			openAt = c.lastSeq
		case 6:
			c.turn([]aap.Message{aap.ToolMessage("call_5", "found")}, []aap.Message{a}, nil)
		default:
			c.turn([]aap.Message{q}, []aap.Message{a}, nil)
		}
		switch i {
		case 3, 7, 10:
			c.compact(c.lastSeq - 3)
		}
	}
	return c, openAt
}

// A fork at any point has the source's full history up to the point, and
// its compacted history as it stood there: the compactions whose ranges
// end at or before the point, with their records, and none after.
func TestForkAtEveryPointCopiesBothHistoriesAsTheyStoodThere(t *testing.T) {
	st := storetest.Open(t)
	tn := storetest.NewTenant(t, st)
	ctx := context.Background()
	c, openAt := buildLongConversation(t, st, tn.ID)
	full := fullTexts(t, st, tn.ID, c.id)
	for p := int64(0); p <= c.lastSeq; p++ {
		fork, err := c.fork(atMessage(p))
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
		if got := fullTexts(t, st, tn.ID, fork.ID); !reflect.DeepEqual(got, full[:p]) {
			t.Errorf("fork at %d: full history %q, want %q", p, got, full[:p])
		}
		h, err := st.History(ctx, store.HistoryParams{TenantID: tn.ID, SessionID: fork.ID, Type: aap.HistoryCompacted})
		if err != nil {
			t.Fatal(err)
		}
		want, carried := c.wantCompacted(p)
		if got := compactedTexts(h); !reflect.DeepEqual(got, want) {
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
	c, _ := buildLongConversation(t, st, tn.ID)
	for i, turn := range c.turns {
		if i == 4 {
			continue // ended waiting on a tool call: see TestForkCarriesPendingToolCallsOnlyAtTheEnd
		}
		fork, err := c.fork(store.ForkPoint{TurnID: turn})
		if err != nil {
			t.Fatalf("fork at turn %d: %v", i+1, err)
		}
		if fork.ForkedFrom == nil || fork.ForkedFrom.SessionID != c.id || fork.ForkedFrom.Messages != c.turnEnds[i] {
			t.Errorf("fork at turn %d: forkedFrom %+v, want %s at %d", i+1, fork.ForkedFrom, c.id, c.turnEnds[i])
		}
		if got := fullTexts(t, st, tn.ID, fork.ID); len(got) != int(c.turnEnds[i]) {
			t.Errorf("fork at turn %d: %d messages, want %d", i+1, len(got), c.turnEnds[i])
		}
	}
	whole, err := c.fork(store.ForkPoint{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := st.SessionGet(ctx, tn.ID, whole.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.ForkedFrom == nil || got.ForkedFrom.Messages != c.lastSeq || got.ForkedFrom.SessionID != c.id {
		t.Errorf("whole fork read back: forkedFrom %+v", got.ForkedFrom)
	}
	if !reflect.DeepEqual(fullTexts(t, st, tn.ID, whole.ID), fullTexts(t, st, tn.ID, c.id)) {
		t.Error("the whole fork's full history differs from its source's")
	}
	srcH, _ := st.History(ctx, store.HistoryParams{TenantID: tn.ID, SessionID: c.id, Type: aap.HistoryCompacted})
	forkH, _ := st.History(ctx, store.HistoryParams{TenantID: tn.ID, SessionID: whole.ID, Type: aap.HistoryCompacted})
	if !reflect.DeepEqual(compactedTexts(srcH), compactedTexts(forkH)) {
		t.Errorf("the whole fork's compacted history differs:\n%q\n%q", compactedTexts(forkH), compactedTexts(srcH))
	}
}

// A fork takes the source's agent, server tools, options (secret ones
// sealed as they were) and client tools; its owner is the caller; it has
// no turns of its own, and its messages belong to none.
func TestForkCarriesTheConfigurationAndStartsItsOwnEventLog(t *testing.T) {
	st := storetest.Open(t)
	tn := storetest.NewTenant(t, st)
	ctx := context.Background()
	c, _ := buildLongConversation(t, st, tn.ID)
	fork, err := st.SessionFork(ctx, store.SessionForkParams{TenantID: tn.ID, SessionID: c.id, NewOwner: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	src, err := st.SessionGet(ctx, tn.ID, c.id)
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
		WHERE f.tenant_id = $1 AND f.id = $2 AND s.tenant_id = $1 AND s.id = $3`, []any{tn.ID, fork.ID, c.id}, &sealedEqual)
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
	fc := &conversation{t: t, st: st, tenant: tn.ID, id: fork.ID, lastSeq: c.lastSeq}
	fc.turn([]aap.Message{aap.UserMessage("in the fork")}, []aap.Message{aap.AssistantMessage(aap.ContentBlock{Type: aap.BlockText, Text: "ok"})}, nil)
	if got := fullTexts(t, st, tn.ID, fork.ID); got[len(got)-1] != fmt.Sprintf("%d:ok", c.lastSeq+2) {
		t.Errorf("the fork's own turn: %q", got[len(got)-3:])
	}
	if got := fullTexts(t, st, tn.ID, c.id); len(got) != int(c.lastSeq) {
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
	c := newConversation(t, st, tn.ID, store.SessionCreateParams{}, aap.UserMessage("hi"))
	call := toolCall("call_1")
	waiting := c.turn([]aap.Message{aap.UserMessage("look it up")}, []aap.Message{aap.AssistantMessage(aap.ToolUseBlock(call))},
		[]aap.PendingToolCall{{ToolCall: call}})
	for _, p := range []store.ForkPoint{{}, {TurnID: waiting}, atMessage(c.lastSeq)} {
		fork, err := c.fork(p)
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
		fc := &conversation{t: t, st: st, tenant: tn.ID, id: fork.ID, lastSeq: c.lastSeq}
		fc.turn([]aap.Message{aap.ToolMessage("call_1", "42")}, []aap.Message{aap.AssistantMessage(aap.ContentBlock{Type: aap.BlockText, Text: "it is 42"})}, nil)
	}
	// Once answered in the source, the point after the call is refused.
	c.turn([]aap.Message{aap.ToolMessage("call_1", "7")}, []aap.Message{aap.AssistantMessage(aap.ContentBlock{Type: aap.BlockText, Text: "it is 7"})}, nil)
	for _, p := range []store.ForkPoint{{TurnID: waiting}, atMessage(3)} {
		var conflict *store.PointConflictError
		if _, err := c.fork(p); !errors.As(err, &conflict) || conflict.Reason != store.PointToolCallsOpen {
			t.Errorf("fork at %+v, after an answered call: %v; want PointToolCallsOpen", p, err)
		}
	}
	for _, n := range []int64{2, 4, 5} {
		if _, err := c.fork(atMessage(n)); err != nil {
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
	in, err := st.StartInstance(ctx, store.InstanceParams{})
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	c := newConversation(t, st, tn.ID, store.SessionCreateParams{}, aap.UserMessage("one"), aap.UserMessage("two"))
	done := c.turn([]aap.Message{aap.UserMessage("three")}, []aap.Message{aap.AssistantMessage(aap.ContentBlock{Type: aap.BlockText, Text: "four"})}, nil)
	begun, err := st.TurnBegin(ctx, &store.TurnBeginParams{
		TenantID: tn.ID, SessionID: c.id, TurnID: store.NewTurnID(), Stream: aap.StreamNone, Owner: in.ID(), Lease: time.Minute,
		Prepare: func(store.Session) (store.TurnPlan, error) {
			return store.TurnPlan{Messages: []store.NewMessage{{Message: aap.UserMessage("five"), Origin: store.OriginClient}}}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	running := begun.Turn.ID
	if err := st.TurnCommitStep(ctx, store.TurnStepParams{Ref: begun.Turn.Ref(), Step: 1, FirstSeq: 6, Lease: time.Minute,
		Messages: []store.NewMessage{{Message: aap.AssistantMessage(aap.ContentBlock{Type: aap.BlockText, Text: "six"}), Origin: store.OriginAgent}}}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []store.ForkPoint{{}, {TurnID: running}, atMessage(5), atMessage(6), atMessage(9)} {
		var conflict *store.PointConflictError
		_, err := c.fork(p)
		if !errors.As(err, &conflict) || conflict.Reason != store.PointTurnRunning || conflict.TurnID != running {
			t.Errorf("fork at %+v: %v; want PointTurnRunning naming %s", p, err, running)
		}
	}
	for _, p := range []store.ForkPoint{{TurnID: done}, atMessage(4), atMessage(2)} {
		fork, err := c.fork(p)
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
	fork, err := c.fork(store.ForkPoint{})
	if err != nil {
		t.Fatalf("fork after the turn's process died: %v", err)
	}
	if got := fullTexts(t, st, tn.ID, fork.ID); len(got) != 6 {
		t.Errorf("fork after the turn died: %q", got)
	}
}

// A point that names nothing of the session is the caller's mistake.
func TestForkPointErrors(t *testing.T) {
	st := storetest.Open(t)
	tn := storetest.NewTenant(t, st)
	ctx := context.Background()
	c := newConversation(t, st, tn.ID, store.SessionCreateParams{}, aap.UserMessage("one"))
	other := newConversation(t, st, tn.ID, store.SessionCreateParams{}, aap.UserMessage("x"))
	otherTurn := other.turn([]aap.Message{aap.UserMessage("q")}, []aap.Message{aap.AssistantMessage(aap.ContentBlock{Type: aap.BlockText, Text: "a"})}, nil)
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
		if _, err := c.fork(tc.p); !errors.As(err, &bad) || bad.Field != tc.field {
			t.Errorf("fork at %+v: %v; want a PointError on %s", tc.p, err, tc.field)
		}
	}
	// Another tenant's session, or another end user's, is not found.
	stranger := storetest.NewTenant(t, st)
	if _, err := st.SessionFork(ctx, store.SessionForkParams{TenantID: stranger.ID, SessionID: c.id}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("fork of another tenant's session: %v", err)
	}
	owned := newConversation(t, st, tn.ID, store.SessionCreateParams{Owner: "alice"}, aap.UserMessage("mine"))
	if _, err := st.SessionFork(ctx, store.SessionForkParams{TenantID: tn.ID, Owner: "bob", SessionID: owned.id, NewOwner: "bob"}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("bob forks alice's session: %v", err)
	}
	if f, err := st.SessionFork(ctx, store.SessionForkParams{TenantID: tn.ID, Owner: "alice", SessionID: owned.id, NewOwner: "alice"}); err != nil || f.Owner != "alice" {
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
	c, openAt := buildLongConversation(t, st, tn.ID)
	first, err := c.fork(store.ForkPoint{})
	if err != nil {
		t.Fatal(err)
	}
	for p := int64(0); p <= c.lastSeq; p++ {
		if p == openAt {
			continue
		}
		direct, err := c.fork(atMessage(p))
		if err != nil {
			t.Fatal(err)
		}
		second, err := st.SessionFork(ctx, store.SessionForkParams{TenantID: tn.ID, SessionID: first.ID, Point: atMessage(p)})
		if err != nil {
			t.Fatalf("fork of the fork at %d: %v", p, err)
		}
		a, _ := st.History(ctx, store.HistoryParams{TenantID: tn.ID, SessionID: direct.ID, Type: aap.HistoryCompacted})
		b, _ := st.History(ctx, store.HistoryParams{TenantID: tn.ID, SessionID: second.ID, Type: aap.HistoryCompacted})
		if !reflect.DeepEqual(compactedTexts(a), compactedTexts(b)) {
			t.Errorf("at %d: fork of the fork\n%q\ndirect fork\n%q", p, compactedTexts(b), compactedTexts(a))
		}
	}
}

// A compaction made before compactions kept what they replaced leaves no
// compacted history for the points before its range's end: such a fork is
// refused, and the later points still fork.
func TestForkBeforeACompactionThatKeptNothingIsRefused(t *testing.T) {
	st := storetest.Open(t)
	tn := storetest.NewTenant(t, st)
	c, _ := buildLongConversation(t, st, tn.ID)
	storetest.Exec(t, storetest.URL(t), `DELETE FROM compaction_replaced WHERE tenant_id = $1 AND session_id = $2`, tn.ID, c.id)
	var conflict *store.PointConflictError
	if _, err := c.fork(atMessage(c.toSeqs[0] - 1)); !errors.As(err, &conflict) || conflict.Reason != store.PointCompactedHistoryGone {
		t.Errorf("fork before the first compaction's end: %v; want PointCompactedHistoryGone", err)
	}
	if _, err := c.fork(atMessage(c.toSeqs[2])); err != nil {
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
	c, _ := buildLongConversation(t, st, tn.ID)

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
		_, err := watched.SessionFork(ctx, store.SessionForkParams{TenantID: tn.ID, SessionID: c.id})
		return err
	})
	check("a fork before a compaction's end", func() error {
		_, err := watched.SessionFork(ctx, store.SessionForkParams{TenantID: tn.ID, SessionID: c.id, Point: atMessage(c.toSeqs[1] - 2)})
		return err
	})
	check("a compaction", func() error {
		snap, err := watched.CompactedSnapshotGet(ctx, tn.ID, c.id)
		if err != nil {
			return err
		}
		mu.Lock()
		notices = nil
		mu.Unlock()
		_, err = watched.CompactionApply(ctx, store.CompactionApplyParams{TenantID: tn.ID, SessionID: c.id, BaseVersion: snap.Version,
			UpTo: snap.Messages[len(snap.Messages)-1].Seq, Items: []store.CompactedItem{{Message: aap.UserMessage("all of it")}},
			Record: store.Compaction{Trigger: "manual", Strategy: "test", FromSeq: 1, ToSeq: c.lastSeq}})
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
	origin, _ := buildLongConversation(t, st, tn.ID)
	first, err := origin.fork(atMessage(20))
	if err != nil {
		t.Fatal(err)
	}
	mid := &conversation{t: t, st: st, tenant: tn.ID, id: first.ID, lastSeq: 20}
	mid.turn([]aap.Message{aap.UserMessage("mid q")}, []aap.Message{aap.AssistantMessage(aap.ContentBlock{Type: aap.BlockText, Text: "mid a"})}, nil)
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
		want[id] = fullTexts(t, st, tn.ID, id)
		h, _ := st.History(ctx, store.HistoryParams{TenantID: tn.ID, SessionID: id, Type: aap.HistoryCompacted})
		wantCompacted[id] = compactedTexts(h)
	}
	if len(want[second.ID]) != 22 || want[second.ID][21] != "22:mid a" || len(want[third.ID]) != 21 {
		t.Fatalf("forks of the fork: %q, %q", want[second.ID], want[third.ID])
	}
	check := func(when string, ids ...string) {
		t.Helper()
		for _, id := range ids {
			if got := fullTexts(t, st, tn.ID, id); !reflect.DeepEqual(got, want[id]) {
				t.Errorf("%s: full history of %s\n%q\nwant\n%q", when, id, got, want[id])
			}
			var streamed []string
			if err := st.HistoryEach(ctx, store.HistoryParams{TenantID: tn.ID, SessionID: id, Type: aap.HistoryFull}, func(seq int64, m json.RawMessage) error {
				var msg aap.Message
				err := json.Unmarshal(m, &msg)
				streamed = append(streamed, fmt.Sprintf("%d:%s", seq, msg.Content.PlainText()))
				return err
			}); err != nil || !reflect.DeepEqual(streamed, want[id]) {
				t.Errorf("%s: streamed full history of %s: %q, %v", when, id, streamed, err)
			}
			h, _ := st.History(ctx, store.HistoryParams{TenantID: tn.ID, SessionID: id, Type: aap.HistoryCompacted})
			if got := compactedTexts(h); !reflect.DeepEqual(got, wantCompacted[id]) {
				t.Errorf("%s: compacted history of %s changed", when, id)
			}
		}
	}
	if _, err := st.SessionDelete(ctx, tn.ID, origin.id); err != nil {
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
	if got := fullTexts(t, st, tn.ID, fourth.ID); !reflect.DeepEqual(got, want[third.ID][:10]) {
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
		origin := newConversation(t, st, tn.ID, store.SessionCreateParams{}, seed...)
		mid, err := origin.fork(atMessage(40))
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
			if _, err := st.SessionDelete(ctx, tn.ID, origin.id); err != nil {
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
			got := fullTexts(t, st, tn.ID, id)
			if len(got) != 30 || got[0] != "1:m1" || got[29] != "30:m30" {
				t.Errorf("round %d: a fork made during the deletions has %q", round, got)
			}
		}
	}
}
