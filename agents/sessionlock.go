package agents

import (
	"context"
	"sync"
)

// sessionLocks serializes work on one session within the process: two
// compactions of a session computed from the same snapshot would otherwise
// race, and the loser would have done its work (maybe a model call) for
// nothing. Across replicas, the database decides (store.CompactionApply);
// this only keeps one process from racing itself.
//
// An entry lives while someone holds or waits for it, so the map never
// holds more entries than there are goroutines using it. The zero value is
// ready to use.
type sessionLocks struct {
	mu    sync.Mutex
	locks map[string]*sessionLock
}

type sessionLock struct {
	// token is held (sent into) by the owner of the lock; a channel rather
	// than a sync.Mutex so that a waiter can give up with its context.
	token chan struct{}
	// refs counts the holder and the waiters.
	refs int
}

// lock waits until the caller holds the lock of key, or ctx ends (then it
// returns the context's cause). The caller calls unlock exactly once.
func (l *sessionLocks) lock(ctx context.Context, key string) (unlock func(), err error) {
	l.mu.Lock()
	if l.locks == nil {
		l.locks = map[string]*sessionLock{}
	}
	e, ok := l.locks[key]
	if !ok {
		e = &sessionLock{token: make(chan struct{}, 1)}
		l.locks[key] = e
	}
	e.refs++
	l.mu.Unlock()

	select {
	case e.token <- struct{}{}:
		return func() {
			<-e.token
			l.release(key, e)
		}, nil
	case <-ctx.Done():
		l.release(key, e)
		return nil, context.Cause(ctx)
	}
}

// release drops one reference to e, and the entry with the last one.
func (l *sessionLocks) release(key string, e *sessionLock) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e.refs--; e.refs == 0 {
		delete(l.locks, key)
	}
}

// size is the number of entries, for tests.
func (l *sessionLocks) size() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.locks)
}
