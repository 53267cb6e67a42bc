package agents

import (
	"context"
	"time"

	"github.com/aapd/aapd/store"
)

// cancelPoll is how often CancelTurn looks whether the turn has stopped.
const cancelPoll = 50 * time.Millisecond

// CancelTurn cancels a turn for a client (AAP v3's POST .../cancel, the
// OpenAI door's POST /responses/{id}/cancel) and waits up to wait for it
// to stop: the cancel is recorded (so that the process running it, here
// or elsewhere, stops it), the turn is stopped here if it runs here, and
// a turn no live process runs (its process gone, or a background turn
// still queued) is ended by this call. It returns the turn as it last
// read it: ended, or still stopping once wait has passed. A turn that
// has ended already is returned as it is. ctx ending returns its error.
func (r *Runner) CancelTurn(ctx context.Context, t store.Turn, wait time.Duration) (store.Turn, error) {
	ref := t.Ref()
	if !t.Status.Ended() {
		var err error
		if t, err = r.store.TurnRequestCancel(ctx, ref); err != nil {
			return store.Turn{}, err
		}
		r.Cancel(t.ID)
	}
	deadline := time.Now().Add(wait)
	for !t.Status.Ended() {
		end := r.store.TurnInterruptIfDead
		if t.Background {
			end = r.store.TurnCancelUnowned
		}
		if _, err := end(ctx, ref); err != nil {
			return store.Turn{}, err
		}
		if time.Now().After(deadline) {
			return t, nil
		}
		select {
		case <-ctx.Done():
			return store.Turn{}, ctx.Err()
		case <-time.After(cancelPoll):
		}
		var err error
		if t, err = r.store.TurnGet(ctx, ref.TenantID, ref.SessionID, ref.TurnID); err != nil {
			return store.Turn{}, err
		}
	}
	return t, nil
}
