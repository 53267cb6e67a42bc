package aapclient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"

	"github.com/aapd/aapd/aap"
)

// FollowSessionEvents follows a session's event log live (aapd: GET
// /sessions/:id/events as Server-Sent Events): the events after after (""
// for the whole log), then each turn as it runs, from whichever replica runs
// it, for as long as the loop over it goes on. A connection that ends — a
// replica shutting down, a network cut — is reopened after the last event
// yielded, with Last-Event-ID, on whichever replica answers, so each event
// comes once and in order.
//
// It ends, yielding the error, when ctx ends, when the session is gone (a
// *Error with status 404, after the turn_stop of a turn its deletion cut
// short), or when the stream cannot be reopened within the client's retry
// policy.
func (c *Client) FollowSessionEvents(ctx context.Context, sessionID, after string) iter.Seq2[SessionEvent, error] {
	return func(yield func(SessionEvent, error) bool) {
		f := &sessionFollow{c: c, ctx: ctx, sessionID: sessionID, last: after}
		defer f.close()
		drops := 0 // connections in a row that ended without an event
		for {
			if f.body == nil {
				if err := f.open(drops); err != nil {
					yield(SessionEvent{}, err)
					return
				}
			}
			raw, err := f.sse.next()
			if err != nil {
				f.close()
				if ctx.Err() != nil {
					yield(SessionEvent{}, fmt.Errorf("aap: session %s event log: %w", sessionID, context.Cause(ctx)))
					return
				}
				drops++
				continue
			}
			drops = 0
			e, err := f.event(raw)
			if err != nil {
				yield(SessionEvent{}, err)
				return
			}
			if !yield(e, nil) {
				return
			}
		}
	}
}

// sessionFollow is the state of a FollowSessionEvents: where it is in the
// log, and in which turn.
type sessionFollow struct {
	c         *Client
	ctx       context.Context
	sessionID string
	last      string // the cursor of the last event yielded, or the start

	body io.ReadCloser // the current connection's, nil between connections
	sse  *sseReader

	// turn and seq are the turn of the last event and its id in the turn's
	// stream; turn is "" until known.
	turn string
	seq  int
}

// open (re)opens the stream after f.last, after its drops-th drop in a row,
// waiting first when the last one brought no event.
func (f *sessionFollow) open(drops int) error {
	if err := f.c.beforeReopen(f.ctx, drops); err != nil {
		return fmt.Errorf("aap: session %s event log: %w", f.sessionID, err)
	}
	h := http.Header{}
	if f.last != "" {
		h.Set("Last-Event-ID", f.last)
	}
	r := request{method: http.MethodGet, path: sessionPath(f.sessionID, "events"), header: h, resend: true, accept: "text/event-stream"}
	res, _, err := f.c.do(f.ctx, r, true)
	if err != nil {
		return err
	}
	if err := checkEventStream(res, r); err != nil {
		return err
	}
	f.body, f.sse = res.Body, newSSEReader(res.Body)
	return nil
}

func (f *sessionFollow) close() {
	if f.body != nil {
		f.body.Close()
		f.body = nil
	}
}

// event reads a streamed event of the log. The stream carries each event
// with its cursor, as its turn's own stream sends it; its turn is the one
// the last turn_start named, and its seq follows. Only when the follow
// began inside a turn is that turn learnt from the log's JSON form, once.
func (f *sessionFollow) event(raw sseEvent) (SessionEvent, error) {
	data, err := aap.ParseEvent(aap.EventType(raw.typ), raw.data)
	if err != nil {
		return SessionEvent{}, fmt.Errorf("aap: session %s event log, event %s: %w", f.sessionID, raw.rawID, err)
	}
	if raw.rawID == "" {
		return SessionEvent{}, fmt.Errorf("aap: session %s event log: a %s event without an id", f.sessionID, raw.typ)
	}
	switch {
	case data.Type == aap.EventTurnStart:
		f.turn, f.seq = data.TurnID, 1
	case f.turn != "":
		f.seq++
	default:
		page, err := f.c.ListSessionEvents(f.ctx, f.sessionID, ListOptions{After: f.last, Limit: 1})
		if err != nil {
			return SessionEvent{}, err
		}
		switch {
		case len(page.Events) > 0 && page.Events[0].ID == raw.rawID:
			f.turn, f.seq = page.Events[0].TurnID, page.Events[0].Seq
		case data.Type == aap.EventTurnStop:
			// The turn the follow began inside was lost (a database
			// crash took its claim) before any more of it came: the log
			// goes on without it, its id included. Its end is yielded
			// without them; the next turn_start names the next turn.
			f.last = raw.rawID
			return SessionEvent{ID: raw.rawID, Event: data.Type, Data: data}, nil
		default:
			return SessionEvent{}, errors.New("aap: session " + f.sessionID + " event log: event " + raw.rawID + " is not the one that follows in its JSON form")
		}
	}
	f.last = raw.rawID
	return SessionEvent{ID: raw.rawID, TurnID: f.turn, Seq: f.seq, Event: data.Type, Data: data}, nil
}
