package agents

import (
	"context"

	"github.com/aapd/aapd/logctx"
	"github.com/aapd/aapd/store"
)

// logContext is parent carrying the turn's log fields: the id of the
// request that started it, its tenant, session and turn. A turn runs off
// its request, on the runner's context; lines logged with this context
// (r.log.WarnContext and the like) are still tied to that request.
func logContext(parent context.Context, requestID string, ref store.TurnRef) context.Context {
	f := logctx.New(requestID)
	f.SetTenant(ref.TenantID)
	f.SetSession(ref.SessionID)
	f.SetTurn(ref.TurnID)
	return logctx.NewContext(parent, f)
}

// detachedLogContext is parent carrying the log fields of ctx: for work
// that follows a turn (its compaction) on the runner's context.
func detachedLogContext(parent, ctx context.Context) context.Context {
	if f := logctx.FromContext(ctx); f != nil {
		return logctx.NewContext(parent, f)
	}
	return parent
}
