package aapclient_test

import (
	"context"
	"testing"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/aapclient"
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
