package aapclient_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/aapclient"
	"github.com/aapd/aapd/store/storetest"
)

// SessionEvents reads every event of every turn, in order, across pages,
// and goes on later from the last event it read.
func TestSessionEventsPagesTheWholeLog(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := startServer(t).client(t)
	sid := echoSession(t, c)
	var turns []string
	for _, text := range []string{"one", "two"} {
		res, err := c.SendTurn(ctx, sid, userTurn(aap.StreamNone, text))
		if err != nil {
			t.Fatal(err)
		}
		turns = append(turns, res.TurnID)
	}
	read := func(after string) []aapclient.SessionEvent {
		var out []aapclient.SessionEvent
		for e, err := range c.SessionEvents(ctx, sid, aapclient.ListOptions{After: after, Limit: 2}) {
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, e)
		}
		return out
	}
	events := read("")
	var starts, stops []string
	for i, e := range events {
		if e.Event != e.Data.Type {
			t.Errorf("event %d: %s carries %s", i, e.Event, e.Data.Type)
		}
		switch e.Event {
		case aap.EventTurnStart:
			starts = append(starts, e.TurnID)
		case aap.EventTurnStop:
			stops = append(stops, e.TurnID)
		}
	}
	if len(events) < 6 || len(starts) != 2 || starts[0] != turns[0] || starts[1] != turns[1] || len(stops) != 2 || stops[1] != turns[1] {
		t.Fatalf("log: %d events, turn_start of %v, turn_stop of %v; want both turns %v in order", len(events), starts, stops, turns)
	}
	if rest := read(events[len(events)-1].ID); len(rest) != 0 {
		t.Errorf("after the last event: %d events", len(rest))
	}
	res, err := c.SendTurn(ctx, sid, userTurn(aap.StreamNone, "three"))
	if err != nil {
		t.Fatal(err)
	}
	more := read(events[len(events)-1].ID)
	if len(more) == 0 || more[0].Event != aap.EventTurnStart || more[0].TurnID != res.TurnID {
		t.Errorf("the log after a new turn starts with %+v; want turn_start of %s", more, res.TurnID)
	}
}

// FollowSessionEvents yields the log live, each event once and in order, as
// its JSON pages give it (turn and seq included), across connections cut
// mid-event; it starts anywhere, a turn's middle included; and it ends with
// a 404 once the session is deleted.
func TestFollowSessionEventsLiveAcrossDroppedConnections(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv := startServer(t)
	// A session log event is ~200 bytes (its cursor is its id): the cuts
	// fall inside events, after a whole one or two.
	rec := newRecorder(300, 250)
	c := srv.client(t, aapclient.WithHTTPClient(&http.Client{Transport: rec}))
	sid := echoSession(t, c)
	send := func(text string) {
		if _, err := c.SendTurn(ctx, sid, userTurn(aap.StreamNone, text)); err != nil {
			t.Fatal(err)
		}
	}
	follow := func(after string, n int) []aapclient.SessionEvent {
		var out []aapclient.SessionEvent
		for e, err := range c.FollowSessionEvents(ctx, sid, after) {
			if err != nil {
				t.Fatalf("after %d events: %v", len(out), err)
			}
			if out = append(out, e); len(out) == n {
				break
			}
		}
		return out
	}
	send("one")
	followed := make(chan []aapclient.SessionEvent, 1)
	go func() { followed <- follow("", 9) }()
	send("two")
	send("three")
	got := <-followed

	var want []aapclient.SessionEvent
	for e, err := range c.SessionEvents(ctx, sid, aapclient.ListOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, e)
	}
	same := func(got, want []aapclient.SessionEvent) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("%d events followed, the log has %d", len(got), len(want))
		}
		for i := range want {
			g, w := got[i], want[i]
			if g.ID != w.ID || g.TurnID != w.TurnID || g.Seq != w.Seq || g.Event != w.Event || g.Data.Type != w.Event {
				t.Errorf("event %d followed as %s %s #%d %s, the log has %s %s #%d %s", i, g.ID, g.TurnID, g.Seq, g.Event, w.ID, w.TurnID, w.Seq, w.Event)
			}
		}
	}
	same(got, want)
	var resumed []string
	for _, r := range rec.requests() {
		if r.Method == http.MethodGet && strings.HasSuffix(r.Path, "/events") && r.LastEventID != "" {
			resumed = append(resumed, r.LastEventID)
		}
	}
	if len(resumed) != 2 {
		t.Errorf("resumed with Last-Event-ID %q, want once per cut", resumed)
	}

	// From the middle of the second turn: its turn and seqs are known.
	same(follow(want[4].ID, len(want)-5), want[5:])

	// Deleted: the follow ends with the session's 404.
	var last error
	go func() {
		time.Sleep(200 * time.Millisecond)
		if err := c.DeleteSession(ctx, sid); err != nil {
			t.Error(err)
		}
	}()
	for _, err := range c.FollowSessionEvents(ctx, sid, want[len(want)-1].ID) {
		last = err
		if err != nil {
			break
		}
	}
	var apiErr *aapclient.Error
	if !errors.As(last, &apiErr) || apiErr.Status != http.StatusNotFound {
		t.Errorf("the follow of a deleted session ended with %v, want its 404", last)
	}
}

// A follow begun inside a turn that a database crash then takes (its claim
// lost, as storetest.LoseClaim leaves it) goes on: it yields the lost
// turn's turn_stop, which no longer has a turn in the log to name, then the
// next turns as the log has them — the lost one sent again by the client
// (its answer said to), and the one after.
func TestFollowSessionEventsBegunInsideATurnLaterLost(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv := startServer(t)
	c := srv.client(t)
	sid := echoSession(t, c)
	if _, err := c.SendTurn(ctx, sid, userTurn(aap.StreamNone, "one")); err != nil {
		t.Fatal(err)
	}
	logged := func() []aapclient.SessionEvent {
		var out []aapclient.SessionEvent
		for e, err := range c.SessionEvents(ctx, sid, aapclient.ListOptions{}) {
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, e)
		}
		return out
	}
	before := logged()

	lostDone := make(chan struct{})
	go func() {
		defer close(lostDone)
		// Lost, answered 503, and sent again by the client with its key.
		if _, err := c.SendTurn(ctx, sid, userTurn(aap.StreamNone, "/slow 600\n/words 2")); err != nil {
			t.Errorf("the lost turn sent again: %v", err)
		}
	}()
	var start aapclient.SessionEvent // the running turn's turn_start
	for deadline := time.Now().Add(5 * time.Second); start.ID == ""; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the second turn's turn_start was not logged")
		}
		if all := logged(); len(all) > len(before) {
			start = all[len(before)]
		}
	}
	if start.Event != aap.EventTurnStart {
		t.Fatalf("the second turn's first logged event is %s", start.Event)
	}

	followed := make(chan []aapclient.SessionEvent, 1)
	go func() {
		var out []aapclient.SessionEvent
		defer func() { followed <- out }()
		stops := 0
		for e, err := range c.FollowSessionEvents(ctx, sid, start.ID) {
			if err != nil {
				t.Errorf("after %d events: %v", len(out), err)
				return
			}
			out = append(out, e)
			if e.Event == aap.EventTurnStop {
				if stops++; stops == 3 {
					return
				}
			}
		}
	}()
	time.Sleep(200 * time.Millisecond) // the follow is waiting inside the turn
	var tenantID string
	storetest.Scan(t, storetest.URL(t), `SELECT tenant_id::text FROM sessions WHERE id = $1`, []any{sid}, &tenantID)
	storetest.LoseClaim(t, storetest.URL(t), tenantID, sid, start.TurnID)
	<-lostDone
	res, err := c.SendTurn(ctx, sid, userTurn(aap.StreamNone, "three"))
	if err != nil {
		t.Fatal(err)
	}
	got := <-followed

	want := logged()[len(before):] // the lost turn sent again, and the next, whole
	if len(want) == 0 || want[0].TurnID == start.TurnID || want[len(want)-1].TurnID != res.TurnID {
		t.Fatalf("the log after the lost turn: %+v", want)
	}
	if len(got) != 1+len(want) {
		t.Fatalf("followed %d events, want the lost turn's turn_stop and %d: %+v", len(got), len(want), got)
	}
	if stop := got[0]; stop.Event != aap.EventTurnStop || stop.Data.Error == nil || stop.TurnID != "" || stop.ID == "" {
		t.Errorf("the lost turn's end followed as %+v", stop)
	}
	for i, w := range want {
		if g := got[1+i]; g.ID != w.ID || g.TurnID != w.TurnID || g.Seq != w.Seq || g.Event != w.Event {
			t.Errorf("event %d followed as %s %s #%d %s, the log has %s %s #%d %s", i, g.ID, g.TurnID, g.Seq, g.Event, w.ID, w.TurnID, w.Seq, w.Event)
		}
	}
}
