package agents

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/store"
)

// ErrBeyondLog: a stream was asked to resume after an event id the turn's
// log does not have (yet): no client can have been sent such an id.
var ErrBeyondLog = errors.New("the event id is beyond the turn's log")

// ErrTurnGone: the turn no longer exists (its session was deleted). It is
// a store.ErrNotFound.
var ErrTurnGone = fmt.Errorf("the turn no longer exists: its session was deleted: %w", store.ErrNotFound)

// ErrTurnLost: the turn's record is gone while its session stays. Only a
// database crash does this, to a turn whose claim did not wait for the
// disk (a stream "none" turn, docs/durability.md) and whose end was not
// written yet: nothing of the turn was kept, so it never happened, and its
// client may send it again. It is a store.ErrUnavailable.
var ErrTurnLost = fmt.Errorf("the turn was lost with a database crash before it ended; nothing of it was kept, send it again: %w", store.ErrUnavailable)

// EventSource is where a turn's events can be read from, from any position:
// the live stream of a turn running in this process, or the recorded events
// of a turn running (or finished) anywhere.
type EventSource interface {
	// Read returns the events after position after, waiting until there is
	// at least one or the turn has ended; done reports the end. Under a
	// context already done it returns what is at hand without waiting if
	// it can (a turn's live stream), else the context's error.
	Read(ctx context.Context, after int) (events []aap.Event, done bool, err error)
}

// Follow returns the events of a turn: its live stream while it runs in
// this process, else (and after) its recorded events, read as they are
// recorded by whichever process runs it.
func (r *Runner) Follow(ref store.TurnRef) EventSource {
	return &follower{runner: r, ref: ref, live: r.liveStream(ref.TurnID)}
}

// FollowAfter is Follow for a stream that resumes after event after, with
// what its request is checked against: how many events can be read now
// (n) and whether the turn has ended. A turn not live here costs one read
// of its log, which the source returns first: a finished turn's whole
// stream is that one read.
func (r *Runner) FollowAfter(ctx context.Context, ref store.TurnRef, after int) (src EventSource, n int, finished bool, err error) {
	if s := r.liveStream(ref.TurnID); s != nil {
		return &follower{runner: r, ref: ref, live: s}, s.Len(), false, nil
	}
	log, err := r.store.TurnEventsAfter(ctx, ref, int64(after))
	if errors.Is(err, store.ErrNotFound) {
		return nil, 0, false, r.whyGone(ctx, ref)
	}
	if err != nil {
		return nil, 0, false, err
	}
	if log.Trimmed {
		// Its log went with the trimmed full history: a resumed stream
		// would send a log other than the one its client was sent.
		return nil, 0, false, fmt.Errorf("follow turn %s: %w", ref.TurnID, store.ErrTurnTrimmed)
	}
	return &follower{runner: r, ref: ref, read: &log, readAfter: after}, log.Len, log.Finished, nil
}

// whyGone tells why the record of a turn is gone: its session was deleted
// (ErrTurnGone), or, with the session still there, a database crash took
// the turn's claim (ErrTurnLost).
func (r *Runner) whyGone(ctx context.Context, ref store.TurnRef) error {
	_, err := r.store.SessionGet(ctx, ref.TenantID, ref.SessionID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return ErrTurnGone
	case err != nil:
		return fmt.Errorf("look for the session of vanished turn %s: %w", ref.TurnID, err)
	}
	return ErrTurnLost
}

// Notify takes a notification from another process (see
// store.InstanceParams): a turn to cancel.
func (r *Runner) Notify(n store.Notification) {
	if n.Channel == store.CancelChannel {
		r.Cancel(n.Payload)
	}
}

// How a follower of a turn running in another process reads it: by polling
// (notifications would cost every turn's commit a global lock), and how
// long a quiet turn may go before the follower checks that its process is
// still alive (recording the turn interrupted if it is not).
const (
	followPoll      = 100 * time.Millisecond
	followDeadCheck = time.Second
	// followDeadConfirm is how long a turn must keep looking dead before
	// a follower ends it: during a database restart every process loses
	// its instance lock until it reconnects (within a few times
	// store.MaxReconnectBackoff), and a live turn must not be ended then.
	followDeadConfirm = 3 * time.Second
)

// follower reads a turn's events: the live stream first, the database
// once the live stream is gone (or if there never was one here).
type follower struct {
	runner *Runner
	ref    store.TurnRef
	live   *Stream
	// read is the log as FollowAfter read it, after readAfter: the first
	// Read from there returns it instead of reading it again.
	read      *store.TurnLog
	readAfter int
	// quietSince is when the recorded log last grew.
	quietSince time.Time
	// deadSince is when the quiet turn was first found looking dead; zero
	// while it looks alive.
	deadSince time.Time
}

func (f *follower) Read(ctx context.Context, after int) ([]aap.Event, bool, error) {
	if f.live != nil {
		events, done, err := f.live.Read(ctx, after)
		if !errors.Is(err, errAbandoned) {
			return events, done, err
		}
		f.live = nil
	}
	if f.quietSince.IsZero() {
		f.quietSince = time.Now()
	}
	for {
		var (
			log store.TurnLog
			err error
		)
		if f.read != nil && f.readAfter == after {
			log = *f.read
		} else {
			log, err = f.runner.store.TurnEventsAfter(ctx, f.ref, int64(after))
		}
		f.read = nil
		switch {
		case errors.Is(err, store.ErrNotFound):
			return nil, false, f.runner.whyGone(ctx, f.ref)
		case err != nil:
			return nil, false, err
		case len(log.Events) > 0:
			f.quietSince = time.Now()
			return log.Events, log.Finished && after+len(log.Events) == log.Len, nil
		case log.Finished:
			return nil, true, nil
		case after > log.Len:
			return nil, false, ErrBeyondLog
		}
		if time.Since(f.quietSince) >= followDeadCheck && f.runner.liveStream(f.ref.TurnID) == nil {
			// A quiet turn whose process is gone for good is ended here,
			// which writes its turn_stop.
			if err := f.checkDead(ctx); err != nil {
				return nil, false, err
			}
			f.quietSince = time.Now()
			continue
		}
		select {
		case <-ctx.Done():
			return nil, false, ctx.Err()
		case <-time.After(followPoll):
		}
	}
}

// checkDead ends the followed turn if it has looked dead for
// followDeadConfirm: once to suspect, again to confirm, so that a process
// reconnecting after a database restart keeps its turn.
func (f *follower) checkDead(ctx context.Context) error {
	why, err := f.runner.store.TurnLooksDead(ctx, f.ref)
	switch {
	case err != nil:
		if ctx.Err() != nil {
			return nil
		}
		return err
	case why == "":
		f.deadSince = time.Time{}
		return nil
	case f.deadSince.IsZero():
		f.deadSince = time.Now()
		return nil
	case time.Since(f.deadSince) < followDeadConfirm:
		return nil
	}
	ended, err := f.runner.store.TurnInterruptIfDead(ctx, f.ref)
	if err != nil && ctx.Err() == nil {
		return err
	}
	if ended {
		f.runner.log.Warn("ended a turn that could not finish by itself", "session", f.ref.SessionID, "turn", f.ref.TurnID, "why", why)
	}
	return nil
}
