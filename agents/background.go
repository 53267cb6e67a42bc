package agents

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/store"
)

// Background turns (docs/background.md) are turns nobody waits on. They are
// claimed, run, recorded and ended as every turn is; what differs is who
// runs them. One that finds every worker busy is claimed without a worker
// and waits in the durable queue (store/turnqueue.go); a dispatcher
// (package turnqueue) gives it to the first free worker of any process
// (Resume). One whose process dies is not interrupted but resumed the same
// way, from its last committed step: only the step that had not committed
// is asked of the model again.

// DefaultMaxAttempts is how many workers may begin a background turn
// before it fails with attempts_exhausted (RunnerConfig.MaxAttempts).
const DefaultMaxAttempts = 3

// errHandedBack ends the run of a background turn a shutdown cut: another
// process resumes it.
var errHandedBack = errors.New("the background turn was handed back to the queue at shutdown")

// StartBackground starts a background turn. It runs at once when a worker
// is free for it, as Start runs a turn; when none is (every worker busy, or
// the tenant running as many turns as it may), it is claimed without a
// worker and waits in the queue: Handle.Turn.Status is then queued. It
// returns once the claim is decided, with Start's errors but the
// admission's, and *store.QueueFullError when the tenant has as many turns
// waiting as its maxQueuedTurns.
func (r *Runner) StartBackground(ctx context.Context, p StartParams) (*Handle, error) {
	if r.stopping.Load() {
		return nil, ErrShutdown
	}
	p.background = true
	release, err := r.admit.admit(p.TenantID, r.maxRunning(ctx, p.TenantID))
	switch {
	case err == nil:
		h, err := r.launch(&p, release, false)
		if err == nil && !h.Replay {
			r.metrics.backgroundTurn(backgroundStarted)
		}
		return h, err
	case errors.Is(err, ErrOverloaded), errors.Is(err, ErrOverFairShare), errors.Is(err, ErrTooManyTurns):
		return r.enqueue(ctx, &p)
	}
	return nil, err
}

// enqueue claims the session for a background turn that no worker runs
// yet: its messages are stored and the turn waits in the queue.
func (r *Runner) enqueue(ctx context.Context, p *StartParams) (*Handle, error) {
	ref := store.TurnRef{TenantID: p.TenantID, SessionID: p.SessionID, TurnID: store.NewTurnID()}
	params, _ := r.beginParams(ref, p)
	params.Queued = true
	if r.cfg.MaxQueuedTurns != nil {
		params.MaxQueued = r.cfg.MaxQueuedTurns(ctx, p.TenantID)
	}
	life := logContext(r.life, p.RequestID, ref)
	begun, err := r.begin1(life, ref, p, params)
	switch {
	case err != nil:
		return nil, err
	case begun.Replay:
		return &Handle{Turn: begun.Turn, Events: r.Follow(begun.Turn.Ref()), Replay: true, runner: r}, nil
	}
	r.metrics.backgroundTurn(backgroundQueued)
	r.log.InfoContext(life, "background turn queued: every worker is busy")
	r.wakeSession(ref.TenantID, ref.SessionID)
	r.signalFreed() // a worker may have become free meanwhile
	return &Handle{Turn: begun.Turn, Events: r.Follow(ref), Session: begun.Session, runner: r}, nil
}

// Resume runs a background turn that waits for a worker
// (store.TurnQueueWaiting) in this process, if a worker is free for it: it
// adopts the turn (store.TurnAdopt) and runs it from its last committed
// step. It returns the turn as adopted: running, or ended instead (its
// cancel was asked, or its attempts are exhausted). It fails with the
// admission's errors when no worker is free for it, and with
// store.ErrNotAdoptable when it is no longer waiting.
func (r *Runner) Resume(ctx context.Context, ref store.TurnRef) (store.Turn, error) {
	if r.stopping.Load() {
		return store.Turn{}, ErrShutdown
	}
	if r.liveStream(ref.TurnID) != nil {
		return store.Turn{}, store.ErrNotAdoptable
	}
	release, err := r.admit.admit(ref.TenantID, r.maxRunning(ctx, ref.TenantID))
	if err != nil {
		return store.Turn{}, err
	}
	release = r.freeing(release)
	life := logContext(r.life, "", ref)
	adopted, err := r.store.TurnAdopt(ctx, store.TurnAdoptParams{Ref: ref, Owner: r.cfg.Owner(), Lease: r.cfg.Lease, MaxAttempts: r.cfg.MaxAttempts})
	switch {
	case err != nil:
		release()
		return store.Turn{}, err
	case adopted.Ended:
		release()
		r.wakeSession(ref.TenantID, ref.SessionID)
		if adopted.Turn.ErrorType == aap.TurnErrorAttemptsExhausted {
			r.metrics.backgroundTurn(backgroundExhausted)
			r.log.WarnContext(life, "background turn failed: its attempts are exhausted", "attempts", adopted.Turn.Attempts)
		} else {
			r.metrics.backgroundTurn(backgroundCancelled)
		}
		return adopted.Turn, nil
	}
	if adopted.Turn.Attempts > 1 {
		r.metrics.backgroundTurn(backgroundResumed)
		r.log.InfoContext(life, "resuming a background turn from its last committed step", "attempt", adopted.Turn.Attempts, "step", adopted.Step)
	} else {
		r.metrics.backgroundTurn(backgroundStarted)
	}
	agent, ok := r.cfg.Agents.Get(adopted.Session.AgentName)
	if !ok {
		defer release()
		return adopted.Turn, r.failAdopted(life, adopted, fmt.Sprintf("the session's agent %q is not served by this server", adopted.Session.AgentName))
	}
	r.heartbeat.Do(func() { go r.heartbeatLoop() })
	r.wg.Add(1)
	run := r.resumedRun(agent, adopted)
	turnLife, span := r.startTurnSpan(&StartParams{Request: aap.TurnRequest{Stream: adopted.Turn.Stream}}, ref)
	traceClaim(span, run, &store.TurnBegun{}, nil)
	t := r.claimed(logContext(turnLife, "", ref), span, run)
	go func() {
		defer r.wg.Done()
		defer release()
		t.execute(release)
	}()
	return adopted.Turn, nil
}

// resumedRun is the loop of an adopted turn, where its last commit left
// it: the session, history and pending calls as committed, its usage so
// far, and its log as recorded, which it goes on after.
func (r *Runner) resumedRun(agent *Agent, a *store.TurnAdopted) *turnRun {
	history := make([]Message, len(a.History))
	for i, m := range a.History {
		history[i] = Message{Message: m.Message, Extra: m.Extra}
	}
	ref := a.Turn.Ref()
	run := &turnRun{
		runner: r, agent: agent, turn: a.Turn, session: a.Session, history: history,
		stream: resumedStream(a.Events), version: a.CompactionVersion, lastSeq: a.LastSeq, step: a.Step,
		usage:   Usage{InputTokens: a.Turn.InputTokens, OutputTokens: a.Turn.OutputTokens},
		pending: a.Session.Pending, pendingCommitted: a.Session.Pending, done: make(chan struct{}),
	}
	if a.Step == 0 {
		// Nothing of it committed, so its first model call is made here,
		// forced as it was asked; after a step committed that call may
		// have been made, and the turn goes on unforced.
		run.force = toolChoiceOf(a.Turn.Labels)
	}
	run.recorder = newRecorder(r.store, a.Turn, run.stream, r.Running, func() { r.cancelTurn(ref.TurnID, store.ErrClaimLost) })
	return run
}

// failAdopted ends an adopted turn that cannot run here, failed, keeping
// what it had committed.
func (r *Runner) failAdopted(ctx context.Context, a *store.TurnAdopted, why string) error {
	r.log.ErrorContext(ctx, "background turn failed", "why", why)
	e := aap.TurnError{Type: aap.TurnErrorInternal, Message: why}
	events := a.Events
	if len(events) == 0 {
		events = []aap.Event{aap.TurnStart()}
	}
	ref := a.Turn.Ref()
	err := r.retry(r.life, 0, func() error {
		_, err := r.store.TurnFinish(r.life, store.TurnFinishParams{
			Ref: ref, Step: a.Step + 1, FirstSeq: a.LastSeq + 1, Pending: a.Session.Pending,
			Status: store.TurnFailed, StopReason: aap.StopError, ErrorType: e.Type, Error: e.Message,
			InputTokens: a.Turn.InputTokens, OutputTokens: a.Turn.OutputTokens, Attempt: a.Turn.Attempts,
			Events: append(events[:len(events):len(events)], aap.TurnStopError(e)),
		})
		return err
	})
	r.wakeSession(ref.TenantID, ref.SessionID)
	return err
}

// handBack gives a background turn that a shutdown cut back to the queue,
// for another process to resume from its last committed step; what the cut
// step had produced is dropped, as a crash would drop it. The caller has
// stopped its recorder.
func (r *Runner) handBack(ctx context.Context, run *turnRun, release func()) {
	life := r.lifeOf(run)
	ref := run.turn.Ref()
	err := r.retry(life, 5*time.Second, func() error { return r.store.TurnRelease(life, ref, run.turn.Attempts) })
	if err != nil {
		// Its process exits soon: it is resumed once it has.
		r.log.WarnContext(ctx, "hand a background turn back to the queue", "err", err)
	} else {
		r.log.InfoContext(ctx, "background turn handed back to the queue at shutdown", "step", run.step)
	}
	r.metrics.backgroundTurn(backgroundHandedBack)
	release()
	r.mu.Lock()
	delete(r.running, ref.TurnID)
	r.mu.Unlock()
	run.err = errHandedBack
	run.stream.abandon()
	close(run.done)
	endTurnSpan(run, store.TurnRunning, errHandedBack)
}

// Freed receives when a worker of this process becomes free, or a turn is
// queued here: the moment to look for background turns to run. It is
// meant for one reader, the queue's dispatcher.
func (r *Runner) Freed() <-chan struct{} { return r.freed }

// FreeWorkers reports how many turns could start here now, as far as the
// process's pool goes (a tenant's own limit may still refuse one).
func (r *Runner) FreeWorkers() int {
	total, _ := r.admit.running("")
	return max(r.cfg.Workers-total, 0)
}

func (r *Runner) signalFreed() {
	select {
	case r.freed <- struct{}{}:
	default:
	}
}

// freeing makes a worker's release also signal Freed, once.
func (r *Runner) freeing(release func()) func() {
	return sync.OnceFunc(func() {
		release()
		r.signalFreed()
	})
}

// maxRunning is the tenant's limit of running turns in this process (0:
// none).
func (r *Runner) maxRunning(ctx context.Context, tenantID string) int {
	if r.cfg.MaxRunningTurns == nil {
		return 0
	}
	return r.cfg.MaxRunningTurns(ctx, tenantID)
}
