package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/agents"
)

// SSE writes Server-Sent Events, flushing each batch so the client sees
// every event as soon as it happens.
type SSE struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

// turnLost ends the stream of a turn a database crash took before it
// ended (agents.ErrTurnLost).
var turnLost = aap.TurnError{Type: aap.TurnErrorInterrupted,
	Message: "the turn was lost with a database crash before it ended; nothing of it was kept, and it may be sent again"}

// startSSE begins a stream and sends its headers at once.
func startSSE(w http.ResponseWriter) *SSE {
	s := prepareSSE(w)
	_ = s.flush()
	return s
}

// prepareSSE begins a stream whose headers go out with its first flush: a
// stream whose first event is at hand sends both in one write.
func prepareSSE(w http.ResponseWriter) *SSE {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // tell nginx-style proxies not to buffer
	w.WriteHeader(http.StatusOK)
	return &SSE{w: w, rc: http.NewResponseController(w)}
}

// event writes one event with its id (its position in the turn's stream).
func (s *SSE) event(id int, e aap.Event) error {
	return s.namedEvent(strconv.Itoa(id), e)
}

// namedEvent writes one event with the id given (a cursor of the session
// event log).
func (s *SSE) namedEvent(id string, e aap.Event) error {
	data, err := json.Marshal(e)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(s.w, "id: %s\nevent: %s\ndata: %s\n\n", id, e.Type, data)
	return err
}

// Event writes one event: its id (none when empty), its name (none when
// empty: a "message") and its data, one line of JSON. It is sent with the
// next Flush.
func (s *SSE) Event(id, name string, data []byte) error {
	var b []byte
	if id != "" {
		b = append(append(append(b, "id: "...), id...), '\n')
	}
	if name != "" {
		b = append(append(append(b, "event: "...), name...), '\n')
	}
	b = append(append(append(b, "data: "...), data...), "\n\n"...)
	_, err := s.w.Write(b)
	return err
}

// Raw writes events already framed ("event: …\ndata: …\n\n" each), sent
// with the next Flush: a door that frames a batch of events itself
// writes them at once.
func (s *SSE) Raw(framed []byte) error {
	_, err := s.w.Write(framed)
	return err
}

// Comment writes a comment (a keep-alive) and flushes it.
func (s *SSE) Comment(text string) error { return s.comment(text) }

// Flush sends what was written.
func (s *SSE) Flush() error { return s.flush() }

func (s *SSE) comment(text string) error {
	if _, err := fmt.Fprintf(s.w, ": %s\n\n", text); err != nil {
		return err
	}
	return s.flush()
}

func (s *SSE) flush() error { return s.rc.Flush() }

// openStream begins a stream of a door's own events (Edge.OpenStream),
// counted in the streams gauge until it is closed; its context ends when
// the client leaves or the server drains.
func (s *Server) openStream(w http.ResponseWriter, r *http.Request) (*SSE, context.Context, func()) {
	ctx, cancel := context.WithCancel(r.Context())
	go func() {
		select {
		case <-s.drain.streams:
			cancel()
		case <-ctx.Done():
		}
	}()
	s.metrics.streams.Inc()
	out := startSSE(w)
	return out, ctx, func() {
		cancel()
		s.metrics.streams.Dec()
	}
}

// streamEvents writes the events of src after position after until the turn
// ends, the client goes away, or — for a stream that only follows a turn
// (follow) — the server drains, with a keep-alive comment whenever the turn
// is quiet for KeepAlive. The turn goes on if the stream ends. Any failure
// to read ends the stream at once: its client resumes with Last-Event-ID.
func (s *Server) streamEvents(w http.ResponseWriter, r *http.Request, src agents.EventSource, after int, follow bool) error {
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	if follow {
		go func() {
			select {
			case <-s.drain.streams:
				cancel()
			case <-ctx.Done():
			}
		}()
	}
	// Counted before its headers go out: a client that has them may read
	// the gauge at once.
	s.metrics.streams.Inc()
	defer s.metrics.streams.Dec()
	out := prepareSSE(w)
	pos := after
	for first := true; ; first = false {
		var (
			readCtx    context.Context
			cancelRead context.CancelFunc
		)
		if first {
			// What is at hand at once goes out with the headers, in one
			// write (a new turn's turn_start always is); else they go alone.
			readCtx, cancelRead = context.WithCancel(ctx)
			cancelRead()
		} else {
			readCtx, cancelRead = context.WithTimeout(ctx, s.cfg.KeepAlive)
		}
		events, done, err := src.Read(readCtx, pos)
		quiet := errors.Is(readCtx.Err(), context.DeadlineExceeded)
		cancelRead()
		switch {
		case ctx.Err() != nil:
			return nil // the client left, or the server drains: the turn goes on
		case first && err != nil:
			// Nothing at hand: the headers alone, then a read that waits.
			if out.flush() != nil {
				return nil
			}
			continue
		case err != nil && quiet:
			if out.comment("keep-alive") != nil {
				return nil
			}
			continue
		case errors.Is(err, agents.ErrTurnGone):
			// Deleted with its session: the turn's log is gone with it, so
			// the end said here can contradict no other.
			_ = out.event(pos+1, aap.TurnStopError(aap.TurnError{Type: aap.TurnErrorSessionDeleted, Message: "the session was deleted while the turn ran"}))
			_ = out.flush()
			return nil
		case errors.Is(err, agents.ErrTurnLost):
			// A database crash took the turn's claim: nothing of it was
			// kept, and no later reader finds its log to contradict this.
			_ = out.event(pos+1, aap.TurnStopError(turnLost))
			_ = out.flush()
			return nil
		case err != nil:
			s.log.InfoContext(r.Context(), "stream ended early", "at_event", pos, "reason", err.Error())
			return nil
		}
		for _, e := range events {
			pos++
			if out.event(pos, e) != nil {
				return nil
			}
		}
		if out.flush() != nil || done {
			return nil
		}
	}
}

// streamSessionEvents writes a session's log as it grows until the client
// goes away, the session is deleted, or the server drains (the client
// resumes on another replica with Last-Event-ID), with a keep-alive comment
// whenever the log is quiet for KeepAlive.
func (s *Server) streamSessionEvents(w http.ResponseWriter, r *http.Request, f *agents.SessionFollower) error {
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	go func() {
		select {
		case <-s.drain.streams:
			cancel()
		case <-ctx.Done():
		}
	}()
	s.metrics.streams.Inc() // before the headers, as in streamEvents
	defer s.metrics.streams.Dec()
	out := startSSE(w)
	for {
		readCtx, cancelRead := context.WithTimeout(ctx, s.cfg.KeepAlive)
		events, err := f.Read(readCtx)
		quiet := errors.Is(readCtx.Err(), context.DeadlineExceeded)
		cancelRead()
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil && quiet:
			if out.comment("keep-alive") != nil {
				return nil
			}
			continue
		case errors.Is(err, agents.ErrTurnGone):
			// Deleted while a turn ran: that turn's stream ends as the
			// per-turn streams end it, and so does the log.
			gone := f.Gone(aap.TurnError{Type: aap.TurnErrorSessionDeleted, Message: "the session was deleted while the turn ran"})
			_ = out.namedEvent(gone.ID, gone.Event)
			_ = out.flush()
			return nil
		case errors.Is(err, agents.ErrTurnLost):
			// A database crash took the running turn's claim: its stream
			// ends here, and the log goes on without the turn
			// (docs/durability.md), as does a resume from any of its ids.
			gone := f.Gone(turnLost)
			if out.namedEvent(gone.ID, gone.Event) != nil || out.flush() != nil {
				return nil
			}
			continue
		case err != nil:
			// The session is gone (deleted between turns), or the log
			// could not be read: the client resumes, or learns of the 404.
			s.log.InfoContext(r.Context(), "session event stream ended", "reason", err.Error())
			return nil
		}
		for _, e := range events {
			if out.namedEvent(e.ID, e.Event) != nil {
				return nil
			}
		}
		if out.flush() != nil {
			return nil
		}
	}
}
