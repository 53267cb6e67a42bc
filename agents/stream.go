package agents

import (
	"context"
	"errors"
	"sync"

	"github.com/aapd/aapd/aap"
)

// errAbandoned: the process stopped writing this stream's turn before its
// end was recorded (it lost its claim, or could not reach the database);
// the rest of the turn's log is in the database.
var errAbandoned = errors.New("the turn's live stream ended before its end was recorded")

// Stream is the live event log of one turn. The turn appends; any number of
// readers follow from any position without ever slowing the turn down: a
// reader that falls behind simply reads more at once.
//
// Readers see an event only once it is recorded in the database (turn_start
// excepted: every log starts with it, even one a crash cut short), so an id
// a client has seen is never given to another event, whatever happens to
// this process.
type Stream struct {
	mu       sync.Mutex
	events   []aap.Event
	recorded int  // events recorded in the database
	visible  int  // events readers may see
	ended    bool // no event will become visible any more
	lost     bool // ended by abandon, not by turn_stop
	changed  chan struct{}
}

// newStream returns a stream that starts with turn_start.
func newStream() *Stream {
	return &Stream{events: []aap.Event{aap.TurnStart()}, visible: 1, changed: make(chan struct{})}
}

// resumedStream returns the stream of a resumed turn: its recorded log,
// visible at once, which its new events follow (a log that recorded
// nothing starts with turn_start, as a new one does).
func resumedStream(recorded []aap.Event) *Stream {
	if len(recorded) == 0 {
		return newStream()
	}
	n := len(recorded)
	return &Stream{events: recorded[:n:n], recorded: n, visible: n, changed: make(chan struct{})}
}

func (s *Stream) notify() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// add appends an event, not yet visible.
func (s *Stream) add(e aap.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events = append(s.events, e)
}

// unrecorded returns the events not recorded yet and the id of the first.
func (s *Stream) unrecorded() (first int, events []aap.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.recorded + 1, s.events[s.recorded:len(s.events):len(s.events)]
}

// markRecorded makes the events up to id n visible: they are recorded.
func (s *Stream) markRecorded(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n <= s.recorded || s.ended {
		return
	}
	s.recorded = n
	if n > s.visible {
		s.visible = n
		s.notify()
	}
}

// all returns every event so far, and how many are recorded.
func (s *Stream) all() ([]aap.Event, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.events[:len(s.events):len(s.events)], s.recorded
}

// Len is the number of events readers may see.
func (s *Stream) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.visible
}

// finish makes every event visible and ends the stream: the turn's end,
// turn_stop last, is recorded.
func (s *Stream) finish() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.recorded, s.visible, s.ended = len(s.events), len(s.events), true
	s.notify()
}

// abandon ends the stream where it is: readers go on from the database.
func (s *Stream) abandon() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.ended {
		s.ended, s.lost = true, true
		s.notify()
	}
}

// Read returns the visible events after position after (0 for all),
// waiting until there is at least one or the stream has ended. done reports
// that the stream has ended and every event up to its end has been
// returned; errAbandoned that it ended without its end.
func (s *Stream) Read(ctx context.Context, after int) (events []aap.Event, done bool, err error) {
	for {
		s.mu.Lock()
		if after < s.visible {
			events = append(events, s.events[after:s.visible]...)
		}
		ended, lost, changed, total := s.ended, s.lost, s.changed, len(s.events)
		s.mu.Unlock()
		switch {
		case len(events) > 0:
			return events, ended && !lost && after+len(events) == total, nil
		case ended && lost:
			return nil, false, errAbandoned
		case ended:
			return nil, true, nil
		}
		select {
		case <-ctx.Done():
			return nil, false, ctx.Err()
		case <-changed:
		}
	}
}
