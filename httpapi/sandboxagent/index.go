package sandboxagent

import (
	"container/list"
	"sync"
)

// DefaultIndexSessions is how many sessions' log indexes a door keeps.
const DefaultIndexSessions = 10000

// logIndex remembers, for the sessions read recently, where each of their
// ended turns begins in their universal log: its first sequence number and
// the AAP log cursor before it. A read after an offset then starts at the
// turn holding that offset, translating only that turn and what follows,
// instead of the whole session. The index is a cache: every replica builds
// its own from the same stored log, and finds the same numbers (the
// translation is a pure function of it, translate.go). A session missing
// from it costs one read of its log from the start, which also indexes it.
// The least recently read sessions are dropped first.
type logIndex struct {
	mu      sync.Mutex
	max     int
	entries map[string]*list.Element
	order   *list.List // of *sessionIndex, most recently used first
}

func newLogIndex(max int) *logIndex {
	if max <= 0 {
		max = DefaultIndexSessions
	}
	return &logIndex{max: max, entries: map[string]*list.Element{}, order: list.New()}
}

// session returns the index of a session, empty if it has none yet.
func (x *logIndex) session(key string) *sessionIndex {
	x.mu.Lock()
	defer x.mu.Unlock()
	if el, ok := x.entries[key]; ok {
		x.order.MoveToFront(el)
		return el.Value.(*sessionIndex)
	}
	si := &sessionIndex{key: key}
	x.entries[key] = x.order.PushFront(si)
	for x.order.Len() > x.max {
		last := x.order.Back()
		x.order.Remove(last)
		delete(x.entries, last.Value.(*sessionIndex).key)
	}
	return si
}

// sessionIndex is one session's index: how many events its start has, and
// its ended turns, each right after the one before, from its first turn.
type sessionIndex struct {
	key   string
	mu    sync.Mutex
	start int64 // events of the session's start; 0 while unknown
	turns []span
}

// span is where one ended turn's events are.
type span struct {
	turnID string
	// after is the AAP log cursor before the turn's first event ("" for
	// the start of the log); end the cursor of its last.
	after, end string
	// first is the sequence of its first event; n how many it has.
	first, n int64
}

// startEvents returns how many events the session's start has (0: not
// known yet).
func (si *sessionIndex) startEvents() int64 {
	si.mu.Lock()
	defer si.mu.Unlock()
	return si.start
}

func (si *sessionIndex) setStart(n int64) {
	si.mu.Lock()
	defer si.mu.Unlock()
	si.start = n
}

// locate returns where to read from to reach the event after offset: the
// first sequence and the AAP cursor of the indexed turn holding it, or the
// end of what is indexed. The start must be known.
func (si *sessionIndex) locate(offset int64) (next int64, after string) {
	si.mu.Lock()
	defer si.mu.Unlock()
	// Turns are in order: the first one ending after offset holds it.
	lo, hi := 0, len(si.turns)
	for lo < hi {
		mid := (lo + hi) / 2
		if s := si.turns[mid]; s.first+s.n-1 > offset {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	switch {
	case lo < len(si.turns):
		return si.turns[lo].first, si.turns[lo].after
	case len(si.turns) > 0:
		last := si.turns[len(si.turns)-1]
		return last.first + last.n, last.end
	}
	return si.start + 1, ""
}

// record adds an ended turn, if it comes right after the turns indexed.
func (si *sessionIndex) record(s span) {
	si.mu.Lock()
	defer si.mu.Unlock()
	next := si.start + 1
	if len(si.turns) > 0 {
		last := si.turns[len(si.turns)-1]
		next = last.first + last.n
	}
	if si.start > 0 && s.first == next {
		si.turns = append(si.turns, s)
	}
}
