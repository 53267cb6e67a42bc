package agents

import (
	"context"
	"errors"
	"sync"
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
// (TurnFinish), in the same statement. It owns no goroutine: a flush is a
// timer armed when events wait, so a turn that ends within the interval —
// most do — costs a timer here, not a goroutine or a write.
type recorder struct {
	store   *store.Store
	ref     store.TurnRef
	attempt int // the turn's attempt that records (store.Turn.Attempts)
	stream  *Stream
	mode    aap.StreamMode
	running func() int
	// onGone is called once the turn is found no longer running.
	onGone func()

	mu      sync.Mutex
	ctx     context.Context // set by start; flushes run under it
	cancel  context.CancelFunc
	wanted  bool        // events wait to be recorded
	timer   *time.Timer // armed or flushing; nil otherwise
	last    time.Time   // when the last flush began (or the recorder started)
	stopped bool
	flights sync.WaitGroup // timers armed or firing
}

func newRecorder(st *store.Store, turn store.Turn, stream *Stream, running func() int, onGone func()) *recorder {
	return &recorder{store: st, ref: turn.Ref(), attempt: turn.Attempts, stream: stream, mode: turn.Stream, running: running, onGone: onGone}
}

// start lets the recorder flush, under ctx, until stop.
func (r *recorder) start(ctx context.Context) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ctx, r.cancel = context.WithCancel(ctx)
	r.last = time.Now()
	if r.wanted {
		r.arm()
	}
}

// added tells the recorder there are events to record.
func (r *recorder) added() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.wanted = true
	if r.ctx != nil && r.timer == nil && !r.stopped {
		r.arm()
	}
}

// arm schedules a flush one interval after the last began; r.mu is held.
func (r *recorder) arm() {
	r.flights.Add(1)
	wait := recordInterval(r.mode, r.running()) - time.Since(r.last)
	r.timer = time.AfterFunc(max(wait, 0), r.fire)
}

// fire flushes, then arms again if events were added meanwhile.
func (r *recorder) fire() {
	defer r.flights.Done()
	r.mu.Lock()
	if r.stopped {
		r.mu.Unlock()
		return
	}
	r.wanted, r.last = false, time.Now()
	ctx := r.ctx
	r.mu.Unlock()

	ok := r.flush(ctx)

	r.mu.Lock()
	defer r.mu.Unlock()
	r.timer = nil
	if !ok {
		r.stopped = true
		return
	}
	if r.wanted && !r.stopped {
		r.arm()
	}
}

// stop ends recording and waits for a flush under way: the turn's end
// writes what is left.
func (r *recorder) stop() {
	r.mu.Lock()
	r.stopped = true
	if r.timer != nil && r.timer.Stop() {
		r.flights.Done() // it will not fire
	}
	if r.cancel != nil {
		r.cancel()
	}
	r.mu.Unlock()
	r.flights.Wait()
}

// flush records what is not recorded yet; false once the turn is gone.
func (r *recorder) flush(ctx context.Context) bool {
	first, events := r.stream.unrecorded()
	if len(events) == 0 {
		return true
	}
	ok, err := r.store.TurnEventsAppend(ctx, r.ref, r.attempt, first, events)
	switch {
	case err != nil:
		// Unrecorded events wait for the next flush, or the turn's end.
		if !errors.Is(err, context.Canceled) {
			r.mu.Lock()
			r.wanted = true
			r.mu.Unlock()
		}
		return true
	case !ok:
		r.onGone()
		return false
	}
	r.stream.markRecorded(first + len(events) - 1)
	return true
}
