package agents

import (
	"context"
	"errors"
	"time"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/store"
)

// How often a turn's events are recorded while it runs. A stream shows an
// event once it is recorded, so for delta and message streams this is how
// coarsely the answer arrives (in pieces 25 ms apart at most); a turn
// nobody streams records rarely (only followers of it elsewhere would
// see); one that ends sooner records everything once, with its end. Under
// load the intervals stretch with the number of turns running in the
// process (see recordInterval), so that recording stays a small share of
// the database's work.
const (
	recordIntervalStreamed = 25 * time.Millisecond
	recordIntervalNone     = time.Second
	// recordStretchAbove is the number of running turns beyond which the
	// intervals grow in proportion.
	recordStretchAbove = 64
)

// recordInterval is how long a turn's events wait to be recorded together
// while running turns of the process number running.
func recordInterval(mode aap.StreamMode, running int) time.Duration {
	iv := recordIntervalStreamed
	if mode == aap.StreamNone {
		iv = recordIntervalNone
	}
	if running > recordStretchAbove {
		iv = iv * time.Duration(running) / recordStretchAbove
	}
	return iv
}

// recorder writes a turn's events to the database in batches while the
// turn runs, so that its stream shows them and can be resumed from any
// process. The last events are not written by it but with the turn's end
// (TurnFinish), in the same statement.
type recorder struct {
	store   *store.Store
	ref     store.TurnRef
	stream  *Stream
	mode    aap.StreamMode
	running func() int
	wake    chan struct{}
	// onGone is called once the turn is found no longer running.
	onGone func()
}

func newRecorder(st *store.Store, ref store.TurnRef, stream *Stream, mode aap.StreamMode, running func() int, onGone func()) *recorder {
	return &recorder{store: st, ref: ref, stream: stream, mode: mode, running: running, wake: make(chan struct{}, 1), onGone: onGone}
}

// added tells the recorder there are events to record.
func (r *recorder) added() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// run records events until ctx is done.
func (r *recorder) run(ctx context.Context) {
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.wake:
		}
		if wait := recordInterval(r.mode, r.running()) - time.Since(last); wait > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
		}
		last = time.Now()
		if !r.flush(ctx) {
			return
		}
	}
}

// flush records what is not recorded yet; false once the turn is gone.
func (r *recorder) flush(ctx context.Context) bool {
	first, events := r.stream.unrecorded()
	if len(events) == 0 {
		return true
	}
	ok, err := r.store.TurnEventsAppend(ctx, r.ref, first, events)
	switch {
	case err != nil:
		// Unrecorded events wait for the next flush, or the turn's end.
		if !errors.Is(err, context.Canceled) {
			r.added()
		}
		return true
	case !ok:
		r.onGone()
		return false
	}
	r.stream.markRecorded(first + len(events) - 1)
	return true
}
