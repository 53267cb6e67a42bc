package httpapi

import (
	"sync"
	"sync/atomic"
)

// drainState is what a server shutting down tells its handlers: readiness
// fails first (so load balancers stop sending new requests), then streams
// that only follow a turn end where they are (their clients resume on
// another replica with Last-Event-ID).
type drainState struct {
	draining atomic.Bool
	once     sync.Once
	streams  chan struct{} // closed by StopStreams
}

func newDrainState() *drainState { return &drainState{streams: make(chan struct{})} }

// BeginDrain makes /readyz fail from now on; every request is still served.
func (s *Server) BeginDrain() { s.drain.draining.Store(true) }

// Draining reports whether BeginDrain was called.
func (s *Server) Draining() bool { return s.drain.draining.Load() }

// StopStreams ends every stream that follows a turn without running it
// (resumed streams, idempotent replays, followers of a turn of another
// process): each ends after the last event it sent, and its client resumes
// elsewhere. Streams of turns this process runs end with their turn.
func (s *Server) StopStreams() { s.drain.once.Do(func() { close(s.drain.streams) }) }
