package sandboxagent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/agents"
	"github.com/aapd/aapd/httpapi"
)

// Page sizes of GET /v1/sessions/{session_id}/events.
const (
	DefaultEventLimit = 1000
	MaxEventLimit     = 1000
)

// endPoll is how often a stream that waits on a quiet session looks
// whether it was ended on another replica (this replica's own are seen
// as soon as the turn they cancelled ends).
const endPoll = time.Second

// eventsResponse is an EventsResponse.
type eventsResponse struct {
	Events  []UniversalEvent `json:"events"`
	HasMore bool             `json:"hasMore"`
}

// getEvents is GET /v1/sessions/{session_id}/events: the events after
// offset (the last sequence the client has; 0 for all), limit of them at
// most (DefaultEventLimit, at most MaxEventLimit), and whether the log
// holds more.
func (d *Door) getEvents(w http.ResponseWriter, r *http.Request) error {
	rd, offset, err := d.eventsAfter(r)
	if err != nil {
		return err
	}
	limit, err := queryInt(r, "limit", DefaultEventLimit, MaxEventLimit)
	if err != nil {
		return err
	}
	events, more, err := rd.readPage(r.Context(), offset, int(limit))
	if err != nil {
		return err
	}
	return writeJSON(w, eventsResponse{Events: events, HasMore: more})
}

// getEventsSSE is GET /v1/sessions/{session_id}/events/sse: the events
// after offset (or after Last-Event-ID, each event's id being its
// sequence), then the log followed live — whichever replica runs each turn
// — until the client leaves, the session ends (session.ended is its last
// event) or is deleted, or the server drains.
func (d *Door) getEventsSSE(w http.ResponseWriter, r *http.Request) error {
	rd, offset, err := d.eventsAfter(r)
	if err != nil {
		return err
	}
	if v := strings.TrimSpace(r.Header.Get("Last-Event-ID")); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return &aap.Error{Field: "Last-Event-ID", Msg: fmt.Sprintf("%q is not an event's sequence", v)}
		}
		offset = n
	}
	pre, err := rd.seek(r.Context(), offset)
	if err != nil {
		return err
	}
	out, ctx, done := d.edge.OpenStream(w, r)
	defer done()
	after := func(events []UniversalEvent) []UniversalEvent {
		var keep []UniversalEvent
		for _, e := range events {
			if e.Sequence > offset {
				keep = append(keep, e)
			}
		}
		return keep
	}
	if !write(out, after(pre)) {
		return nil
	}
	return d.follow(ctx, out, rd, after, nil)
}

// eventsAfter reads what the events routes share: the session, a reader
// of its events (with include_raw) and the offset.
func (d *Door) eventsAfter(r *http.Request) (*logReader, int64, error) {
	sess, name, err := d.session(r)
	if err != nil {
		return nil, 0, err
	}
	offset, err := queryInt(r, "offset", 0, -1)
	if err != nil {
		return nil, 0, err
	}
	raw, err := includeRaw(r)
	if err != nil {
		return nil, 0, err
	}
	return d.newReader(sess, name, raw), offset, nil
}

// follow writes the session's events from where rd is, as they are
// recorded: what the log holds, then live (agents.Runner.FollowSession).
// filter picks the events to write. until, when it holds after a batch,
// ends the stream (after session.ended, if the session was ended
// meanwhile); without it the stream lasts until the client leaves, the
// session ends or is deleted, or the server drains.
func (d *Door) follow(ctx context.Context, out *httpapi.SSE, rd *logReader, filter func([]UniversalEvent) []UniversalEvent, until func() bool) error {
	finish := func() error {
		if rd.tr == nil && !rd.endSent {
			if ended, err := d.reloadEnded(ctx, rd); err == nil && ended {
				if events, err := rd.end(); err == nil {
					write(out, events)
				}
			}
		}
		return nil
	}
	for {
		events, done, err := rd.pull(ctx)
		if err != nil {
			return d.streamFailed(ctx, err)
		}
		if !write(out, filter(events)) || rd.endSent {
			return nil
		}
		if until != nil && until() {
			return finish()
		}
		if done {
			break
		}
	}
	f, err := d.cfg.Runner.FollowSession(agents.SessionLogParams{
		TenantID: rd.sess.TenantID, SessionID: rd.sess.ID, After: rd.cursor, Limit: logPage})
	if err != nil {
		return d.streamFailed(ctx, err)
	}
	quiet := time.Now()
	for {
		readCtx, cancel := context.WithTimeout(ctx, endPoll)
		events, err := f.Read(readCtx)
		idle := errors.Is(readCtx.Err(), context.DeadlineExceeded)
		cancel()
		switch {
		case ctx.Err() != nil:
			return nil // the client left, or the server drains: it resumes with its offset
		case err != nil && idle:
			if until == nil {
				if ended, err := d.reloadEnded(ctx, rd); err == nil && ended && rd.tr == nil {
					return finish()
				}
			}
			if time.Since(quiet) >= d.edge.KeepAlive() {
				if out.Comment("keep-alive") != nil {
					return nil
				}
				quiet = time.Now()
			}
			continue
		case errors.Is(err, agents.ErrTurnLost):
			// A database crash took the running turn before it ended: the
			// log goes on without it, from what preceded it.
			f.Gone(aap.TurnError{})
			rd.forget()
			continue
		case err != nil:
			return d.streamFailed(ctx, err)
		}
		translated, err := rd.consume(ctx, events)
		if err != nil {
			return d.streamFailed(ctx, err)
		}
		if !write(out, filter(translated)) {
			return nil
		}
		quiet = time.Now()
		if until != nil && until() {
			return finish()
		}
	}
}

// reloadEnded reads the session again and tells whether it has ended.
func (d *Door) reloadEnded(ctx context.Context, rd *logReader) (bool, error) {
	sess, err := d.cfg.Store.SessionGet(ctx, rd.sess.TenantID, rd.sess.ID)
	if err != nil {
		return false, err
	}
	rd.sess.EndedAt = sess.EndedAt
	return sess.EndedAt != nil, nil
}

// streamFailed ends a stream that could not go on (its session was
// deleted, the database is away): the client learns of it when it reads
// again.
func (d *Door) streamFailed(ctx context.Context, err error) error {
	if ctx.Err() == nil {
		d.edge.Logger().InfoContext(ctx, "sandbox-agent event stream ended", "reason", err.Error())
	}
	return nil
}

// write writes events, each as one Server-Sent Event whose id is its
// sequence (the SDK reads only the data; a browser's EventSource resumes
// with it as Last-Event-ID), and flushes them.
func write(out *httpapi.SSE, events []UniversalEvent) bool {
	if len(events) == 0 {
		return true
	}
	for _, e := range events {
		b, err := json.Marshal(e)
		if err != nil || out.Event(strconv.FormatInt(e.Sequence, 10), "", b) != nil {
			return false
		}
	}
	return out.Flush() == nil
}

// queryInt reads an optional whole-number query parameter from 0 (to max,
// unless max < 0).
func queryInt(r *http.Request, name string, def, max int64) (int64, error) {
	q, err := httpapi.Query(r)
	if err != nil {
		return 0, err
	}
	v := q.Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 || (max >= 0 && n > max) {
		msg := "must be a whole number from 0"
		if max >= 0 {
			msg = fmt.Sprintf("must be a whole number from 0 to %d", max)
		}
		return 0, &aap.Error{Field: name, Msg: msg}
	}
	return n, nil
}

// includeRaw reads include_raw (the document's name) or includeRaw (what
// the SDK sends).
func includeRaw(r *http.Request) (bool, error) {
	q, err := httpapi.Query(r)
	if err != nil {
		return false, err
	}
	for _, name := range []string{"include_raw", "includeRaw"} {
		if v := q.Get(name); v != "" {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return false, &aap.Error{Field: name, Msg: "must be true or false"}
			}
			return b, nil
		}
	}
	return false, nil
}
