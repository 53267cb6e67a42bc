package agents_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/agents"
	"github.com/aapd/aapd/store"
	"github.com/aapd/aapd/store/storetest"
)

// Run, for a caller that waits for the turn's end anyway, runs the turn on
// the caller's goroutine: when it returns, the end is written and the
// worker slot is free, and the answer is there without waiting.
func TestRunReturnsOnceTheTurnsEndIsWritten(t *testing.T) {
	st, runner, tn, sess := echoSession(t)
	ctx := context.Background()
	for _, text := range []string{"one", "two"} {
		h, err := runner.Run(ctx, agents.StartParams{TenantID: tn.ID, SessionID: sess.ID,
			Request: aap.TurnRequest{Messages: []aap.Message{aap.UserMessage(text)}}})
		if err != nil {
			t.Fatal(err)
		}
		if n := runner.Running(); n != 0 {
			t.Fatalf("%d turns still running after Run returned", n)
		}
		stored, err := st.TurnGet(ctx, tn.ID, sess.ID, h.Turn.ID)
		if err != nil || stored.Status != store.TurnCompleted {
			t.Fatalf("turn record after Run: %+v, %v", stored, err)
		}
		answered, cancel := context.WithCancel(ctx)
		cancel() // the answer must not need to wait
		resp, err := h.Response(answered)
		if err != nil || len(resp.Messages) != 1 || resp.Messages[0].Content.PlainText() != "Echo: "+text {
			t.Fatalf("answer %+v, %v", resp, err)
		}
	}
}

// A turn that outlives the recording interval has its events written
// while it runs — a stream on another replica shows them — and its log,
// once ended, holds every event once, from turn_start to turn_stop.
func TestALongTurnsEventsAreRecordedWhileItRuns(t *testing.T) {
	st, runner, tn, sess := echoSession(t)
	ctx := context.Background()
	h, err := runner.Start(ctx, agents.StartParams{TenantID: tn.ID, SessionID: sess.ID,
		Request: aap.TurnRequest{Stream: aap.StreamDelta, Messages: []aap.Message{aap.UserMessage("/slow 150\n/words 6")}}})
	if err != nil {
		t.Fatal(err)
	}
	ref := h.Turn.Ref()
	var midTurn store.TurnLog
	for deadline := time.Now().Add(10 * time.Second); ; {
		log, err := st.TurnEventsAfter(ctx, ref, 0)
		if err != nil {
			t.Fatal(err)
		}
		if log.Finished {
			t.Fatalf("the turn ended before any of its events was recorded while it ran (%d events)", log.Len)
		}
		if log.Len > 1 {
			midTurn = log
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no event recorded while the turn ran")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if midTurn.Events[0].Type != aap.EventTurnStart {
		t.Errorf("recorded log starts with %q, want turn_start", midTurn.Events[0].Type)
	}
	if _, err := h.Response(ctx); err != nil {
		t.Fatal(err)
	}
	waitIdle(t, runner)
	log, err := st.TurnEventsAfter(ctx, ref, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !log.Finished || log.Len != len(log.Events) {
		t.Fatalf("ended log: finished %v, %d of %d events", log.Finished, len(log.Events), log.Len)
	}
	var text strings.Builder
	for i, e := range log.Events {
		switch {
		case i == 0 && e.Type != aap.EventTurnStart, i == len(log.Events)-1 && e.Type != aap.EventTurnStop:
			t.Errorf("event %d is %q", i+1, e.Type)
		case i > 0 && i < len(log.Events)-1 && (e.Type == aap.EventTurnStart || e.Type == aap.EventTurnStop):
			t.Errorf("event %d is a second %q", i+1, e.Type)
		}
		text.WriteString(e.Delta)
	}
	// The events recorded mid-turn are the ended log's first ones.
	for i, e := range midTurn.Events {
		if e.Type != log.Events[i].Type || e.Delta != log.Events[i].Delta {
			t.Errorf("event %d was %+v while the turn ran, %+v after", i+1, e, log.Events[i])
		}
	}
	if !strings.Contains(text.String(), "6") {
		t.Errorf("the deltas do not make the answer: %q", text.String())
	}
}

// echoSession is a new session of the echo agent, in a tenant of its own,
// with the runner and store that serve it.
func echoSession(t *testing.T) (*store.Store, *agents.Runner, storetest.Tenant, store.Session) {
	t.Helper()
	st, _, runner := countedRunner(t)
	tn := storetest.NewTenant(t, st)
	sess, _, err := runner.CreateSession(context.Background(), store.SessionCreateParams{TenantID: tn.ID, AgentName: "echo"})
	if err != nil {
		t.Fatal(err)
	}
	return st, runner, tn, sess
}

// An awaited turn's claim commits without waiting for the disk (Run), so a
// Postgres crash before the turn's end can take the claim with it: the
// turn's record, its incoming messages and the session's hold are gone
// (here removed by hand, as the crash would leave them). Its client, which
// had heard nothing of it, is told to send it again — not that the session
// is gone, which is what a deletion of the session tells.
func TestAnAwaitedTurnLostWithItsClaimIsToBeSentAgain(t *testing.T) {
	for _, tc := range []struct {
		name string
		lose func(t *testing.T, tenantID, sessionID, turnID string) // what happens to the database mid-turn
		want error
	}{
		{"the claim lost with a crash", func(t *testing.T, tenantID, sessionID, turnID string) {
			storetest.LoseClaim(t, storetest.URL(t), tenantID, sessionID, turnID)
		}, agents.ErrTurnLost},
		{"the session deleted", func(t *testing.T, tenantID, sessionID, _ string) {
			storetest.Exec(t, storetest.URL(t), `DELETE FROM sessions WHERE tenant_id = $1 AND id = $2`, tenantID, sessionID)
		}, agents.ErrTurnGone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, runner, tn, sess := echoSession(t)
			ctx := context.Background()
			type ran struct {
				h   *agents.Handle
				err error
			}
			done := make(chan ran, 1)
			go func() {
				h, err := runner.Run(ctx, agents.StartParams{TenantID: tn.ID, SessionID: sess.ID,
					Request: aap.TurnRequest{Messages: []aap.Message{aap.UserMessage("/slow 300\n/words 2")}}})
				done <- ran{h, err}
			}()
			turnID := storetest.ClaimedTurn(t, storetest.URL(t), tn.ID, sess.ID)
			tc.lose(t, tn.ID, sess.ID, turnID)
			r := <-done
			if r.err != nil {
				t.Fatalf("Run: %v", r.err)
			}
			_, err := r.h.Response(ctx)
			if !errors.Is(err, tc.want) {
				t.Fatalf("answer: %v, want %v", err, tc.want)
			}
			// Every other reader of the turn is told the same.
			ref := store.TurnRef{TenantID: tn.ID, SessionID: sess.ID, TurnID: turnID}
			if _, _, err := runner.Follow(ref).Read(ctx, 0); !errors.Is(err, tc.want) {
				t.Errorf("a follower: %v, want %v", err, tc.want)
			}
			if _, _, _, err := runner.FollowAfter(ctx, ref, 0); !errors.Is(err, tc.want) {
				t.Errorf("the log's position: %v, want %v", err, tc.want)
			}
			if tc.want != agents.ErrTurnLost {
				return
			}
			if !errors.Is(err, store.ErrUnavailable) {
				t.Errorf("a lost turn's answer %v is not to be retried (store.ErrUnavailable)", err)
			}
			// Nothing of the lost turn is kept, and the session takes the
			// turn sent again.
			h, err := runner.Run(ctx, agents.StartParams{TenantID: tn.ID, SessionID: sess.ID,
				Request: aap.TurnRequest{Messages: []aap.Message{aap.UserMessage("again")}}})
			if err != nil {
				t.Fatal(err)
			}
			if resp, err := h.Response(ctx); err != nil || resp.Messages[0].Content.PlainText() != "Echo: again" {
				t.Fatalf("the turn sent again answered %+v, %v", resp, err)
			}
			for _, typ := range []aap.HistoryType{aap.HistoryFull, aap.HistoryCompacted} {
				hist, err := st.History(ctx, store.HistoryParams{TenantID: tn.ID, SessionID: sess.ID, Type: typ})
				if err != nil {
					t.Fatal(err)
				}
				if len(hist) != 2 || hist[0].Message.Content.PlainText() != "again" || hist[1].Message.Content.PlainText() != "Echo: again" {
					t.Errorf("%s history after the lost turn and the one sent again: %+v", typ, hist)
				}
			}
		})
	}
}
