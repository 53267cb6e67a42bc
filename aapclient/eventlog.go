package aapclient

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"

	"github.com/aapd/aapd/aap"
)

// SessionEvent is an event of a session's event log (aapd,
// docs/protocols.md): an event of one of its turns, with where it is.
type SessionEvent struct {
	// ID is the event's cursor in the session's log (ListOptions.After).
	ID string `json:"id"`
	// TurnID is the event's turn. FollowSessionEvents leaves it, and Seq,
	// empty in one case: the turn_stop of a turn a database crash took
	// before the follow, begun inside it, saw more of it — the log no
	// longer has the turn.
	TurnID string `json:"turnId"`
	// Seq is the event's id in its turn's own stream.
	Seq   int           `json:"seq"`
	Event aap.EventType `json:"event"`
	Data  aap.Event     `json:"data"`
}

// UnmarshalJSON reads an event, its data by its type.
func (e *SessionEvent) UnmarshalJSON(b []byte) error {
	var raw struct {
		ID     string          `json:"id"`
		TurnID string          `json:"turnId"`
		Seq    int             `json:"seq"`
		Event  aap.EventType   `json:"event"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	data, err := aap.ParseEvent(raw.Event, raw.Data)
	if err != nil {
		return fmt.Errorf("event %s of the session log: %w", raw.ID, err)
	}
	*e = SessionEvent{ID: raw.ID, TurnID: raw.TurnID, Seq: raw.Seq, Event: raw.Event, Data: data}
	return nil
}

// SessionEventList is a page of a session's event log.
type SessionEventList struct {
	Events []SessionEvent `json:"events"`
	// Next is the cursor of what follows the page; on the last page it
	// stays, for whatever the session's next turns add.
	Next string `json:"next,omitempty"`
	// HasMore is true when the log already holds events after the page.
	HasMore bool `json:"hasMore"`
}

// ListSessionEvents is GET /sessions/:id/events (aapd): one page of every
// event of every turn of the session, oldest first, after opts.After.
func (c *Client) ListSessionEvents(ctx context.Context, sessionID string, opts ListOptions) (SessionEventList, error) {
	var out SessionEventList
	if opts.Owner != "" {
		return out, fmt.Errorf("aap: GET %s: ListOptions.Owner selects sessions, not events", sessionPath(sessionID, "events"))
	}
	err := c.getJSON(ctx, sessionPath(sessionID, "events"), opts.query(), &out)
	return out, err
}

// SessionEvents iterates over a session's event log from opts.After to
// what it holds now, page after page (aapd). To go on later from where it
// stopped, pass the last event's ID as the next call's After.
func (c *Client) SessionEvents(ctx context.Context, sessionID string, opts ListOptions) iter.Seq2[SessionEvent, error] {
	return func(yield func(SessionEvent, error) bool) {
		for {
			page, err := c.ListSessionEvents(ctx, sessionID, opts)
			if err != nil {
				yield(SessionEvent{}, err)
				return
			}
			for _, e := range page.Events {
				if !yield(e, nil) {
					return
				}
			}
			if !page.HasMore {
				return
			}
			if page.Next == "" || page.Next == opts.After {
				yield(SessionEvent{}, fmt.Errorf("aap: GET %s: the server said there is more but gave no new cursor", sessionPath(sessionID, "events")))
				return
			}
			opts.After = page.Next
		}
	}
}
