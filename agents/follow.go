package agents

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/store"
)

// EventSource is where a turn's events can be read from, from any position:
// the live stream of a turn running in this process, or the recorded events
// of a turn running (or finished) anywhere.
type EventSource interface {
	// Read returns the events after position after, waiting until there is
	// at least one or the turn has ended; done reports the end.
	Read(ctx context.Context, after int) (events []aap.Event, done bool, err error)
}

// Follow returns the events of a turn: its live stream if it runs in this
// process, else its recorded events, followed as they are recorded by
// whichever process runs it.
func (r *Runner) Follow(ref store.TurnRef) EventSource {
	if s := r.liveStream(ref.TurnID); s != nil {
		return s
	}
	return &recorded{runner: r, ref: ref}
}

// Notify takes a notification from another process (see
// store.InstanceParams): a turn to cancel, or new events of a turn.
func (r *Runner) Notify(n store.Notification) {
	switch n.Channel {
	case store.CancelChannel:
		r.Cancel(n.Payload)
	case store.EventsChannel:
		r.wakeups.wake(n.Payload)
	}
}

// followPoll is how often a follower looks for events it was not notified
// of (notifications are best effort: one can be missed while the
// connection that listens is re-established).
const followPoll = time.Second

// recorded reads a turn's recorded events.
type recorded struct {
	runner *Runner
	ref    store.TurnRef
	// deadChecks counts the checks in a row that found the turn running
	// with no process of this one running it.
	deadChecks int
}

func (f *recorded) Read(ctx context.Context, after int) ([]aap.Event, bool, error) {
	for {
		// Wait first, read next: a notification during the read is not lost.
		wake := f.runner.wakeups.wait(f.ref.TurnID)
		events, done, err := f.next(ctx, after)
		if err != nil || len(events) > 0 {
			f.runner.wakeups.done(f.ref.TurnID, wake)
			return events, done, err
		}
		if err := f.checkAlive(ctx); err != nil {
			f.runner.wakeups.done(f.ref.TurnID, wake)
			return nil, false, err
		}
		select {
		case <-ctx.Done():
		case <-wake:
		case <-time.After(followPoll):
		}
		f.runner.wakeups.done(f.ref.TurnID, wake)
		if ctx.Err() != nil {
			return nil, false, ctx.Err()
		}
	}
}

func (f *recorded) next(ctx context.Context, after int) ([]aap.Event, bool, error) {
	batch, err := f.runner.store.TurnEventsAfter(ctx, f.ref, after, 1000)
	if err != nil || len(batch) == 0 {
		return nil, false, err
	}
	events := make([]aap.Event, len(batch))
	for i, e := range batch {
		events[i] = e.Event
	}
	return events, events[len(events)-1].Type == aap.EventTurnStop, nil
}

// checkAlive ends the log of a turn whose process died: once the process
// has been seen gone twice in a row (a second apart), the turn is recorded
// as interrupted, which writes its final turn_stop.
func (f *recorded) checkAlive(ctx context.Context) error {
	t, err := f.runner.store.TurnGet(ctx, f.ref.TenantID, f.ref.SessionID, f.ref.TurnID)
	if errors.Is(err, store.ErrNotFound) {
		return err
	}
	if err != nil || t.Status != store.TurnRunning || f.runner.liveStream(f.ref.TurnID) != nil {
		f.deadChecks = 0
		return nil
	}
	f.deadChecks++
	if f.deadChecks < 2 {
		return nil
	}
	_, err = f.runner.store.TurnInterruptIfDead(ctx, f.ref)
	return err
}

// wakeups lets followers of a turn wait for its next notification.
type wakeups struct {
	mu sync.Mutex
	// chans holds, per turn, the channel closed by the next wake and the
	// number of followers waiting on it.
	chans map[string]*wakeup
}

type wakeup struct {
	ch      chan struct{}
	waiters int
}

// wait returns a channel closed at the turn's next notification; the caller
// calls done when it stops waiting on it.
func (w *wakeups) wait(turnID string) <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.chans == nil {
		w.chans = map[string]*wakeup{}
	}
	wu, ok := w.chans[turnID]
	if !ok {
		wu = &wakeup{ch: make(chan struct{})}
		w.chans[turnID] = wu
	}
	wu.waiters++
	return wu.ch
}

func (w *wakeups) done(turnID string, ch <-chan struct{}) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if wu, ok := w.chans[turnID]; ok && wu.ch == ch {
		if wu.waiters--; wu.waiters <= 0 {
			delete(w.chans, turnID)
		}
	}
}

func (w *wakeups) wake(turnID string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if wu, ok := w.chans[turnID]; ok {
		close(wu.ch)
		delete(w.chans, turnID)
	}
}
