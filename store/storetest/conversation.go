package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/store"
)

// Conversation builds a session event by event, as turns and compactions
// write it, and remembers its compacted history after each event: the model
// a fork's compacted history is checked against (WantCompacted).
type Conversation struct {
	T        testing.TB
	Store    *store.Store
	TenantID string
	ID       string
	// LastSeq is the session's last seq; Turns are its turns' ids, oldest
	// first, and TurnEnds the last seq of each; ToSeqs the end of each
	// compaction's range.
	LastSeq  int64
	Turns    []string
	TurnEnds []int64
	ToSeqs   []int64

	// states[i] is the compacted history after event i, lastSeqs[i] the
	// last seq then; compactedAt[k] is the event of the k-th compaction.
	states      [][]string
	lastSeqs    []int64
	compactedAt []int
}

// NewConversation creates a session of the echo agent from p, seeded with
// seed.
func NewConversation(t testing.TB, st *store.Store, tenantID string, p store.SessionCreateParams, seed ...aap.Message) *Conversation {
	t.Helper()
	p.TenantID, p.AgentName, p.Messages = tenantID, "echo", seed
	sess, _, err := st.SessionCreate(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	c := &Conversation{T: t, Store: st, TenantID: tenantID, ID: sess.ID, LastSeq: int64(len(seed))}
	c.record()
	return c
}

// Continue returns a Conversation over a session that exists (a fork)
// whose last seq is lastSeq.
func Continue(t testing.TB, st *store.Store, tenantID, sessionID string, lastSeq int64) *Conversation {
	return &Conversation{T: t, Store: st, TenantID: tenantID, ID: sessionID, LastSeq: lastSeq}
}

// record notes the compacted history after an event.
func (c *Conversation) record() {
	c.T.Helper()
	h, err := c.Store.History(context.Background(), store.HistoryParams{TenantID: c.TenantID, SessionID: c.ID, Type: aap.HistoryCompacted})
	if err != nil {
		c.T.Fatal(err)
	}
	c.states, c.lastSeqs = append(c.states, CompactedTexts(h)), append(c.lastSeqs, c.LastSeq)
}

// Turn runs a turn: the client's messages at its claim, then each of the
// agent's as a step of its own, the last with the turn's end, which waits
// on pending. It returns the turn's id.
func (c *Conversation) Turn(client []aap.Message, agent []aap.Message, pending []aap.PendingToolCall) string {
	c.T.Helper()
	ctx := context.Background()
	var in []store.NewMessage
	for _, m := range client {
		in = append(in, store.NewMessage{Message: m, Origin: store.OriginClient})
	}
	begun, err := c.Store.TurnBegin(ctx, &store.TurnBeginParams{
		TenantID: c.TenantID, SessionID: c.ID, TurnID: store.NewTurnID(), Stream: aap.StreamNone, Owner: 1, Lease: time.Minute,
		Prepare: func(store.Session) (store.TurnPlan, error) { return store.TurnPlan{Messages: in}, nil },
	})
	if err != nil {
		c.T.Fatal(err)
	}
	c.LastSeq = begun.LastSeq
	c.record()
	ref := begun.Turn.Ref()
	for i, m := range agent {
		c.LastSeq++
		msgs := []store.NewMessage{{Message: m, Origin: store.OriginAgent}}
		if i < len(agent)-1 {
			if err := c.Store.TurnCommitStep(ctx, store.TurnStepParams{Ref: ref, Step: i + 1, FirstSeq: c.LastSeq, Lease: time.Minute, Messages: msgs}); err != nil {
				c.T.Fatal(err)
			}
			c.record()
			continue
		}
		stop := aap.StopEndTurn
		if len(pending) > 0 {
			stop = aap.StopToolUse
		}
		if _, err := c.Store.TurnFinish(ctx, store.TurnFinishParams{Ref: ref, Step: i + 1, FirstSeq: c.LastSeq,
			Messages: msgs, Pending: pending, Status: store.TurnCompleted, StopReason: stop, InputTokens: 10, OutputTokens: 5,
			Events: []aap.Event{aap.TurnStart(), aap.TurnStop(stop)}}); err != nil {
			c.T.Fatal(err)
		}
		c.record()
	}
	c.Turns, c.TurnEnds = append(c.Turns, ref.TurnID), append(c.TurnEnds, c.LastSeq)
	return ref.TurnID
}

// StartInstance starts an instance of the store (a live process, as the
// claims of its turns see it), closed when the test ends.
func StartInstance(t testing.TB, st *store.Store) *store.Instance {
	t.Helper()
	in, err := st.StartInstance(context.Background(), store.InstanceParams{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(in.Close)
	return in
}

// StartTurn claims the session for a turn of a user message, run by the
// instance owner (a live Instance's id: the turn then runs until the
// instance closes), and leaves it running.
func (c *Conversation) StartTurn(owner int32, user string) *store.TurnBegun {
	c.T.Helper()
	begun, err := c.Store.TurnBegin(context.Background(), &store.TurnBeginParams{
		TenantID: c.TenantID, SessionID: c.ID, TurnID: store.NewTurnID(), Stream: aap.StreamNone, Owner: owner, Lease: time.Minute,
		Prepare: func(store.Session) (store.TurnPlan, error) {
			return store.TurnPlan{Messages: []store.NewMessage{{Message: aap.UserMessage(user), Origin: store.OriginClient}}}, nil
		},
	})
	if err != nil {
		c.T.Fatal(err)
	}
	c.LastSeq = begun.LastSeq
	return begun
}

// Say runs a turn of a user message answered with a text.
func (c *Conversation) Say(user, answer string) string {
	c.T.Helper()
	return c.Turn([]aap.Message{aap.UserMessage(user)}, []aap.Message{aap.AssistantMessage(aap.TextBlock(answer))}, nil)
}

// Compact replaces the compacted history up to its end with a summary of
// every message up to toSeq and the messages after it, as a rolling
// summary does.
func (c *Conversation) Compact(toSeq int64) {
	c.T.Helper()
	ctx := context.Background()
	snap, err := c.Store.CompactedSnapshotGet(ctx, c.TenantID, c.ID)
	if err != nil {
		c.T.Fatal(err)
	}
	items := []store.CompactedItem{{Message: aap.UserMessage(fmt.Sprintf("summary to %d", toSeq))}}
	for _, m := range snap.Messages {
		if m.SourceSeq > toSeq {
			items = append(items, store.CompactedItem{SourceSeq: m.SourceSeq, Message: m.Message, Extra: m.Extra})
		}
	}
	if _, err := c.Store.CompactionApply(ctx, store.CompactionApplyParams{TenantID: c.TenantID, SessionID: c.ID,
		BaseVersion: snap.Version, UpTo: snap.Messages[len(snap.Messages)-1].Seq, Items: items,
		Record: store.Compaction{Trigger: "manual", Strategy: "test", FromSeq: 1, ToSeq: toSeq}}); err != nil {
		c.T.Fatal(err)
	}
	c.record()
	c.compactedAt, c.ToSeqs = append(c.compactedAt, len(c.states)-1), append(c.ToSeqs, toSeq)
}

// Trim compacts the session through through (Compact), makes its messages
// 40 days old, and trims its full history as a 30-day policy does
// (store.SessionTrimHistory), on the database at dbURL, the session's:
// its full history then starts after through. The test fails unless it
// was trimmed that far.
func (c *Conversation) Trim(dbURL string, through int64) {
	c.T.Helper()
	c.Compact(through)
	Exec(c.T, dbURL, `UPDATE messages SET created_at = now() - interval '40 days' WHERE tenant_id = $1 AND session_id = $2`,
		c.TenantID, c.ID)
	tr, err := c.Store.SessionTrimHistory(context.Background(), c.TenantID, c.ID, time.Now().Add(-30*24*time.Hour), 1000)
	if err != nil || tr.Through != through || tr.More {
		c.T.Fatalf("trim session %s: %+v, %v; want it trimmed through %d", c.ID, tr, err, through)
	}
}

// WantCompacted is the compacted history as it stood at point p: the
// state once message p was written and the last compaction p carries had
// run, without what follows p; carried is how many compactions p carries.
func (c *Conversation) WantCompacted(p int64) (texts []string, carried int) {
	at := 0
	for at < len(c.lastSeqs)-1 && c.lastSeqs[at] < p {
		at++
	}
	for k, to := range c.ToSeqs {
		if to > p {
			break
		}
		carried, at = k+1, max(at, c.compactedAt[k])
	}
	texts = []string{}
	for _, line := range c.states[at] {
		var seq, src int64
		_, _ = fmt.Sscanf(line, "%d<-%d:", &seq, &src)
		if src <= p {
			texts = append(texts, line)
		}
	}
	return texts, carried
}

// CompactedTexts shows a compacted history as "seq<-source:text" lines.
func CompactedTexts(h []store.StoredMessage) []string {
	out := []string{}
	for _, m := range h {
		out = append(out, fmt.Sprintf("%d<-%d:%s", m.Seq, m.SourceSeq, m.Message.Content.PlainText()))
	}
	return out
}

// FullTexts shows a session's full history as "seq:text" lines.
func FullTexts(t testing.TB, st *store.Store, tenantID, sessionID string) []string {
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

// ToolCall is a call of the client tool "lookup".
func ToolCall(id string) aap.ToolCall {
	return aap.ToolCall{ToolCallID: id, Name: "lookup", Input: json.RawMessage(`{"q":"x"}`)}
}

// LongConversation is a session of seed messages, a dozen turns (the fifth
// ending on a call of a client tool, answered by the sixth), and three
// rolling compactions between them; openAt is the last seq of the fifth
// turn, where the call is open.
func LongConversation(t testing.TB, st *store.Store, tenantID string) (c *Conversation, openAt int64) {
	t.Helper()
	c = NewConversation(t, st, tenantID, store.SessionCreateParams{
		AgentTools:    []aap.ServerToolRef{{Name: "clock"}},
		Options:       map[string]string{"model": "m1"},
		SecretOptions: map[string]string{"apiKey": "sk-secret"},
		ClientTools:   []aap.ToolSpec{{Name: "lookup", Description: "looks up", Parameters: json.RawMessage(`{"type":"object"}`)}},
	}, aap.SystemMessage("be brief"), aap.UserMessage("seed"))
	for i := 1; i <= 12; i++ {
		q, a := aap.UserMessage(fmt.Sprintf("q%d", i)), aap.AssistantMessage(aap.TextBlock(fmt.Sprintf("a%d", i)))
		switch i {
		case 5:
			call := ToolCall("call_5")
			c.Turn([]aap.Message{q}, []aap.Message{a, aap.AssistantMessage(aap.ToolUseBlock(call))}, []aap.PendingToolCall{{ToolCall: call}})
			openAt = c.LastSeq
		case 6:
			c.Turn([]aap.Message{aap.ToolMessage("call_5", "found")}, []aap.Message{a}, nil)
		default:
			c.Turn([]aap.Message{q}, []aap.Message{a}, nil)
		}
		switch i {
		case 3, 7, 10:
			c.Compact(c.LastSeq - 3)
		}
	}
	return c, openAt
}
