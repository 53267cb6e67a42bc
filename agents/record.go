package agents

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/store"
)

// recordInterval is how long events wait to be recorded together: a client
// resuming on another process lags the live stream by about this much.
const recordInterval = 50 * time.Millisecond

// recorder writes a turn's events to the database in small batches, so that
// a stream can be resumed from any process and a retried request replayed.
// The turn's last events are not flushed by it but handed to TurnFinish
// (take), so that a finished turn's log is whole in the same transaction
// that ends it.
type recorder struct {
	store *store.Store
	ref   store.TurnRef

	mu      sync.Mutex
	pending []store.TurnEvent
	gone    bool // the turn no longer exists: stop recording
	wake    chan struct{}
}

func newRecorder(st *store.Store, ref store.TurnRef) *recorder {
	return &recorder{store: st, ref: ref, wake: make(chan struct{}, 1)}
}

func (r *recorder) add(seq int, e aap.Event) {
	r.mu.Lock()
	if !r.gone {
		r.pending = append(r.pending, store.TurnEvent{Seq: seq, Event: e})
	}
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// take removes and returns the events not yet recorded.
func (r *recorder) take() []store.TurnEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.pending
	r.pending = nil
	return out
}

// run records events until ctx is done.
func (r *recorder) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.wake:
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(recordInterval):
		}
		r.flush(ctx)
	}
}

func (r *recorder) flush(ctx context.Context) {
	batch := r.take()
	if len(batch) == 0 {
		return
	}
	err := r.store.TurnEventsAppend(ctx, r.ref, batch)
	switch {
	case err == nil:
	case errors.Is(err, store.ErrNotFound):
		r.mu.Lock()
		r.gone, r.pending = true, nil
		r.mu.Unlock()
	default:
		// Keep them for the next flush, or for TurnFinish.
		r.mu.Lock()
		r.pending = append(batch, r.pending...)
		r.mu.Unlock()
	}
}
