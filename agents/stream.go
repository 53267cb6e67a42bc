package agents

import (
	"context"
	"sync"

	"github.com/aapd/aapd/aap"
)

// Stream is the live event log of one turn. The turn appends; any number of
// readers follow from any position without ever slowing the turn down: a
// reader that falls behind simply reads more at once.
type Stream struct {
	mu      sync.Mutex
	events  []aap.Event
	closed  bool
	changed chan struct{} // closed and replaced on every change
}

func newStream() *Stream { return &Stream{changed: make(chan struct{})} }

// append adds an event and returns its sequence number: its position,
// from 1.
func (s *Stream) append(e aap.Event) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return len(s.events)
	}
	s.events = append(s.events, e)
	if e.Type == aap.EventTurnStop {
		s.closed = true
	}
	close(s.changed)
	s.changed = make(chan struct{})
	return len(s.events)
}

// Len is the number of events so far.
func (s *Stream) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.events)
}

// Read returns the events after position after (0 for all), waiting until
// there is at least one or the stream has ended. done reports that the
// stream has ended and every event up to its end has been returned.
func (s *Stream) Read(ctx context.Context, after int) (events []aap.Event, done bool, err error) {
	for {
		s.mu.Lock()
		if after < len(s.events) {
			events = append(events, s.events[after:]...)
		}
		done, changed := s.closed, s.changed
		s.mu.Unlock()
		if len(events) > 0 || done {
			return events, done, nil
		}
		select {
		case <-ctx.Done():
			return nil, false, ctx.Err()
		case <-changed:
		}
	}
}
