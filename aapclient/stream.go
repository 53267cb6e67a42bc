package aapclient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"

	"github.com/aapd/aapd/aap"
)

// Stream is the event stream of one turn. Read it once with Events; it is
// not safe for concurrent use. Close it if Events was not read to the end.
//
// On aapd (which names the turn in the Aapd-Turn-Id header and numbers its
// events), a connection that ends before turn_stop is resumed from the last
// event read, with Last-Event-ID, so Events yields every event once and in
// order whatever happens to connections. On other servers a cut stream is
// an error.
type Stream struct {
	c         *Client
	ctx       context.Context
	sessionID string
	turnID    string
	replayed  bool

	body io.ReadCloser // the current connection's, nil once closed
	sse  *sseReader
	last int  // id of the last event yielded (or the resume point)
	read bool // Events has been called
	done bool // turn_stop has been read, or the turn had no more events
	// resumes counts the times the stream was resumed.
	resumes int
}

// TurnID is the turn's id, empty when the server did not say it.
func (s *Stream) TurnID() string { return s.turnID }

// Replayed is true when the stream replays the turn an earlier request with
// the same Idempotency-Key started.
func (s *Stream) Replayed() bool { return s.replayed }

// LastEventID is the id of the last event read: pass it to TurnEvents to
// continue this stream elsewhere (aapd). Zero before the first event.
func (s *Stream) LastEventID() int { return s.last }

// Resumes is how many times the stream was resumed after a dropped
// connection.
func (s *Stream) Resumes() int { return s.resumes }

// Close ends the stream's connection. The turn goes on on the server.
func (s *Stream) Close() error {
	if s.body == nil {
		return nil
	}
	err := s.body.Close()
	s.body = nil
	return err
}

// Events yields the turn's events up to and including turn_stop, resuming
// dropped connections where it can. It ends after turn_stop, at the first
// error (which it yields), or when the loop over it breaks; the connection
// is closed then. It can be ranged over once.
func (s *Stream) Events() iter.Seq2[aap.Event, error] {
	return func(yield func(aap.Event, error) bool) {
		if s.read {
			yield(aap.Event{}, errors.New("aapclient: a stream's events can be read once"))
			return
		}
		s.read = true
		defer s.Close()
		drops := 0 // drops in a row without an event between them
		for !s.done {
			if s.body == nil {
				// Dropped: resume after the last event read.
				if err := s.resume(drops); err != nil {
					yield(aap.Event{}, err)
					return
				}
				continue
			}
			raw, err := s.sse.next()
			if err != nil {
				s.Close()
				if s.ctx.Err() != nil {
					yield(aap.Event{}, fmt.Errorf("aap: turn stream: %w", context.Cause(s.ctx)))
					return
				}
				if s.turnID == "" {
					yield(aap.Event{}, fmt.Errorf("aap: turn stream ended before turn_stop: %w", noEOF(err)))
					return
				}
				drops++
				continue
			}
			if raw.id > 0 && raw.id <= s.last {
				continue // read before a resume
			}
			e, err := aap.ParseEvent(aap.EventType(raw.typ), raw.data)
			if err != nil {
				yield(aap.Event{}, fmt.Errorf("aap: turn stream, event %d: %w", raw.id, err))
				return
			}
			if raw.id > 0 {
				s.last = raw.id
			}
			drops = 0
			s.done = e.Type == aap.EventTurnStop
			if !yield(e, nil) {
				return
			}
		}
	}
}

// resume reopens the stream after its drops-th drop in a row, waiting
// first when the last resume brought no event.
func (s *Stream) resume(drops int) error {
	if err := s.c.beforeReopen(s.ctx, drops); err != nil {
		return fmt.Errorf("aap: turn %s: %w", s.turnID, err)
	}
	res, err := s.open()
	if err != nil {
		return fmt.Errorf("aap: resume turn %s after event %d: %w", s.turnID, s.last, err)
	}
	s.resumes++
	if res == nil {
		// 204: the last event read was the turn's last.
		s.done = true
		return fmt.Errorf("aap: turn %s: the turn's events ended at %d without turn_stop", s.turnID, s.last)
	}
	s.body, s.sse = res.Body, newSSEReader(res.Body)
	return nil
}

// noEOF turns the clean end of a body that should have gone on into
// io.ErrUnexpectedEOF.
func noEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}
