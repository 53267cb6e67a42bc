package v3

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/agents"
	"github.com/aapd/aapd/httpapi"
	"github.com/aapd/aapd/store"
)

// Page sizes of the session event log.
const (
	DefaultEventPageLimit = 100
	MaxEventPageLimit     = 1000
)

// SessionEventItem is one event of the session event log as a JSON page
// shows it: its cursor, its turn, its id in the turn's stream, its type and
// its data (the SSE data of the turn's stream).
type SessionEventItem struct {
	ID     string        `json:"id"`
	TurnID string        `json:"turnId"`
	Seq    int           `json:"seq"`
	Event  aap.EventType `json:"event"`
	Data   aap.Event     `json:"data"`
}

// UnmarshalJSON reads an item, its data by its event type (aap.ParseEvent).
func (e *SessionEventItem) UnmarshalJSON(b []byte) error {
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
		return err
	}
	*e = SessionEventItem{ID: raw.ID, TurnID: raw.TurnID, Seq: raw.Seq, Event: raw.Event, Data: data}
	return nil
}

// SessionEventList is the body of GET /sessions/:id/events as JSON.
type SessionEventList struct {
	Events []SessionEventItem `json:"events"`
	// Next is the cursor to pass as after for what follows the page.
	Next string `json:"next,omitempty"`
	// HasMore is true when the log already holds events after the page.
	HasMore bool `json:"hasMore"`
}

// sessionEvents is GET /sessions/:id/events (extension, docs/protocols.md):
// every event of every turn of the session, in order, after a cursor: a
// JSON page, or with Accept: text/event-stream the log followed live,
// resumable with Last-Event-ID.
func (d *Door) sessionEvents(w http.ResponseWriter, r *http.Request) error {
	id, err := sessionID(r)
	if err != nil {
		return err
	}
	q, err := httpapi.Query(r)
	if err != nil {
		return err
	}
	limit, err := eventPageLimit(q)
	if err != nil {
		return err
	}
	after, field := q.Get("after"), "after"
	if v := strings.TrimSpace(r.Header.Get("Last-Event-ID")); v != "" {
		after, field = v, "Last-Event-ID"
	}
	p := agents.SessionLogParams{TenantID: httpapi.TenantOf(r), Owner: httpapi.OwnerOf(r), SessionID: id, After: after, Limit: limit}
	page, err := d.cfg.Runner.SessionEvents(r.Context(), p)
	switch {
	case errors.Is(err, store.ErrBadCursor):
		return &aap.Error{Field: field, Msg: fmt.Sprintf("%q is not a cursor of this session's event log: pass the id of an event it gave", after)}
	case errors.Is(err, agents.ErrBeyondLog):
		return &aap.Error{Field: field, Msg: fmt.Sprintf("%q is beyond the session's event log: no event has that id yet", after)}
	case err != nil:
		return err
	}
	if !wantsEventStream(r) {
		out := SessionEventList{Events: make([]SessionEventItem, len(page.Events)), Next: page.Next, HasMore: page.HasMore}
		for i, e := range page.Events {
			out.Events[i] = SessionEventItem{ID: e.ID, TurnID: e.TurnID, Seq: e.Seq, Event: e.Event.Type, Data: e.Event}
		}
		return httpapi.WriteJSON(w, http.StatusOK, out)
	}
	f, err := d.cfg.Runner.FollowSession(p)
	if err != nil {
		return err
	}
	return d.edge.StreamSession(w, r, f)
}

// wantsEventStream reports whether the request asks for Server-Sent Events.
func wantsEventStream(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept") {
		for _, part := range strings.Split(v, ",") {
			mt, _, _ := strings.Cut(part, ";")
			if strings.EqualFold(strings.TrimSpace(mt), "text/event-stream") {
				return true
			}
		}
	}
	return false
}

// eventPageLimit reads the optional ?limit= of the session event log.
func eventPageLimit(q url.Values) (int, error) {
	v := q.Get("limit")
	if v == "" {
		return DefaultEventPageLimit, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > MaxEventPageLimit {
		return 0, &aap.Error{Field: "limit", Msg: fmt.Sprintf("must be a whole number from 1 to %d", MaxEventPageLimit)}
	}
	return n, nil
}
