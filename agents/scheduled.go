package agents

import (
	"context"
	"errors"

	"github.com/aapd/aapd/store"
)

// Scheduled turns (docs/background.md#schedules) are background turns
// started by a clock. A schedule's tick claims its session for a queued
// background turn in the transaction that advances the schedule
// (store.ScheduleFire), so that a tick starts its turn exactly once; the
// turn then runs as a background turn queued by StartBackground does,
// adopted by a free worker of any process.

// QueuedClaim returns the claim of a background turn that waits in the
// queue for a worker, planned by the pipeline as any turn's is (the
// session's agent, its pending tool calls, the request's rules): what a
// schedule's tick writes with its advance. ref names the new turn.
func (r *Runner) QueuedClaim(ctx context.Context, ref store.TurnRef, p StartParams) *store.TurnBeginParams {
	p.background = true
	params, _ := r.beginParams(ref, &p)
	params.Queued = true
	if r.cfg.MaxQueuedTurns != nil {
		params.MaxQueued = r.cfg.MaxQueuedTurns(ctx, p.TenantID)
	}
	return params
}

// StartQueued runs a turn claimed with QueuedClaim, once its claim has
// committed: it is counted queued, and runs at once here if a worker is
// free for it (Resume); if not, it waits for the dispatcher of any process
// (package turnqueue), like any queued turn.
func (r *Runner) StartQueued(ctx context.Context, ref store.TurnRef) {
	r.metrics.backgroundTurn(backgroundQueued)
	r.wakeSession(ref.TenantID, ref.SessionID)
	_, err := r.Resume(ctx, ref)
	switch {
	case err == nil, errors.Is(err, store.ErrNotAdoptable):
	default:
		// No worker free here (or the tenant at its limit): the queue's
		// dispatchers take it.
		r.signalFreed()
	}
}
