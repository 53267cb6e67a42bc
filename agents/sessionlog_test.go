package agents_test

import (
	"context"
	"encoding/base64"
	"errors"
	"testing"
	"time"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/agents"
	"github.com/aapd/aapd/store"
	"github.com/aapd/aapd/store/storetest"
)

// A session's event log goes on past a turn a database crash took before it
// ended (its claim, record and incoming messages gone, the session released,
// as storetest.LoseClaim leaves them): a follower is told the turn was lost
// and then reads the turns that follow, and a resume from any id of the lost
// turn reads on after the turn before it — no gap, no duplicate, and still
// no cursor of another session's log.
func TestSessionLogGoesOnPastATurnLostWithItsClaim(t *testing.T) {
	_, runner, tn, sess := echoSession(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	say := func(text string) string {
		t.Helper()
		h, err := runner.Run(ctx, agents.StartParams{TenantID: tn.ID, SessionID: sess.ID,
			Request: aap.TurnRequest{Messages: []aap.Message{aap.UserMessage(text)}}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := h.Response(ctx); err != nil {
			t.Fatalf("turn %q: %v", text, err)
		}
		return h.Turn.ID
	}
	page := func(after string) agents.SessionLogPage {
		t.Helper()
		p, err := runner.SessionEvents(ctx, agents.SessionLogParams{TenantID: tn.ID, SessionID: sess.ID, After: after, Limit: 100})
		if err != nil {
			t.Fatalf("the log after %q: %v", after, err)
		}
		return p
	}
	first := say("one")
	f, err := runner.FollowSession(agents.SessionLogParams{TenantID: tn.ID, SessionID: sess.ID})
	if err != nil {
		t.Fatal(err)
	}
	before, err := f.Read(ctx)
	if err != nil || len(before) != 3 || before[2].Event.Type != aap.EventTurnStop {
		t.Fatalf("the log before the lost turn: %+v, %v", before, err)
	}

	// The lost turn: claimed, followed, then taken by the "crash".
	go func() {
		h, err := runner.Run(ctx, agents.StartParams{TenantID: tn.ID, SessionID: sess.ID,
			Request: aap.TurnRequest{Messages: []aap.Message{aap.UserMessage("/slow 2000\n/words 2")}}})
		if err == nil {
			_, _ = h.Response(ctx)
		}
	}()
	started, err := f.Read(ctx)
	if err != nil || len(started) != 1 || started[0].Event.Type != aap.EventTurnStart || started[0].TurnID == first {
		t.Fatalf("the follower read %+v, %v; want the next turn's turn_start", started, err)
	}
	lost := started[0]
	// Polled at the end of what a running turn has so far, the log keeps
	// the cursor: the next poll must not give its events again.
	if p := page(lost.ID); len(p.Events) != 0 || p.Next != lost.ID {
		t.Errorf("the page after the running turn's last event: %d events, next %q; want none, next %q", len(p.Events), p.Next, lost.ID)
	}
	// So does a follower resumed there: it waits for what comes next.
	resumed, err := runner.FollowSession(agents.SessionLogParams{TenantID: tn.ID, SessionID: sess.ID, After: lost.ID})
	if err != nil {
		t.Fatal(err)
	}
	type read struct {
		events []agents.SessionEvent
		err    error
	}
	resumedRead := make(chan read, 1)
	go func() {
		events, err := resumed.Read(ctx)
		resumedRead <- read{events, err}
	}()
	storetest.LoseClaim(t, storetest.URL(t), tn.ID, sess.ID, lost.TurnID)
	if _, err := f.Read(ctx); !errors.Is(err, agents.ErrTurnLost) {
		t.Fatalf("the follower of the lost turn: %v, want ErrTurnLost", err)
	}
	if r := <-resumedRead; !errors.Is(r.err, agents.ErrTurnLost) {
		t.Errorf("the follower resumed at the running turn's last event read %+v, %v; want ErrTurnLost", r.events, r.err)
	}
	gone := f.Gone(aap.TurnError{Type: aap.TurnErrorInterrupted, Message: "lost"})
	if gone.TurnID != lost.TurnID || gone.Seq != lost.Seq+1 || gone.Event.Type != aap.EventTurnStop {
		t.Errorf("the lost turn ends with %+v, want its turn_stop #%d", gone, lost.Seq+1)
	}

	// The log goes on: the follower reads the turn sent again.
	next := make(chan []agents.SessionEvent, 1)
	go func() {
		var got []agents.SessionEvent
		for len(got) < 3 {
			events, err := f.Read(ctx)
			if err != nil {
				t.Errorf("the follower after the lost turn: %v", err)
				break
			}
			got = append(got, events...)
		}
		next <- got
	}()
	again := say("again")
	followed := <-next
	want := page(before[2].ID).Events
	if len(want) != 3 || want[0].TurnID != again {
		t.Fatalf("the log after the first turn: %+v, want only the turn sent again", want)
	}
	for i, e := range followed {
		if e.TurnID != again || e.ID != want[i].ID || e.Event.Type != want[i].Event.Type {
			t.Errorf("followed event %d = %s %s %s, want %s %s %s", i, e.TurnID, e.Event.Type, e.ID, want[i].TurnID, want[i].Event.Type, want[i].ID)
		}
	}

	// A resume from any id of the lost turn reads on after the turn before.
	for _, after := range []string{lost.ID, gone.ID} {
		p := page(after)
		if len(p.Events) != 3 || p.Events[0].ID != want[0].ID || p.Next != want[2].ID {
			t.Errorf("the log after the lost turn's %q: %+v, want the turn sent again", after, p)
		}
	}
	// A lost turn that was the session's first reads on from the start.
	other, _, err := runner.CreateSession(ctx, store.SessionCreateParams{TenantID: tn.ID, AgentName: "echo"})
	if err != nil {
		t.Fatal(err)
	}
	firstOfOther := base64.RawURLEncoding.EncodeToString([]byte(store.NewTurnID() + ".1." + other.ID))
	if p, err := runner.SessionEvents(ctx, agents.SessionLogParams{TenantID: tn.ID, SessionID: other.ID, After: firstOfOther, Limit: 10}); err != nil || len(p.Events) != 0 || p.Next != firstOfOther {
		t.Errorf("the empty log after its lost first turn: %+v, %v", p, err)
	}
	// Still no resume from another session's cursor, lost turn or not.
	for _, tc := range []struct{ session, after string }{
		{other.ID, lost.ID},      // the turn before it is not one of other's
		{sess.ID, firstOfOther},  // the log before it is other's
		{other.ID, before[0].ID}, // a turn of sess, first in its log
	} {
		_, err := runner.SessionEvents(ctx, agents.SessionLogParams{TenantID: tn.ID, SessionID: tc.session, After: tc.after, Limit: 10})
		if !errors.Is(err, agents.ErrBadSessionCursor) {
			t.Errorf("session %s after %q: %v, want ErrBadSessionCursor", tc.session, tc.after, err)
		}
	}
	// A cursor of an earlier release names no turn before it: the lost
	// turn's is not one of the log's.
	legacy := base64.RawURLEncoding.EncodeToString([]byte(lost.TurnID + ".1"))
	if _, err := runner.SessionEvents(ctx, agents.SessionLogParams{TenantID: tn.ID, SessionID: sess.ID, After: legacy, Limit: 10}); !errors.Is(err, agents.ErrBadSessionCursor) {
		t.Errorf("an earlier release's cursor of the lost turn: %v, want ErrBadSessionCursor", err)
	}
	legacyFirst := base64.RawURLEncoding.EncodeToString([]byte(first + ".1"))
	if p := page(legacyFirst); len(p.Events) != 5 || p.Events[1].TurnID != first || p.Events[2].TurnID != again {
		t.Errorf("the log after an earlier release's cursor: %+v", p.Events)
	}
}
