package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/store"
)

// BeginTurn begins a turn, with a user message, on a new session of the
// tenant.
func BeginTurn(t testing.TB, st *store.Store, tenantID string) *store.TurnBegun {
	t.Helper()
	ctx := context.Background()
	sess, _, err := st.SessionCreate(ctx, store.SessionCreateParams{TenantID: tenantID, AgentName: "echo"})
	if err != nil {
		t.Fatal(err)
	}
	begun, err := st.TurnBegin(ctx, &store.TurnBeginParams{
		TenantID: tenantID, SessionID: sess.ID, TurnID: store.NewTurnID(), Stream: aap.StreamNone, Owner: 1, Lease: time.Minute,
		Prepare: func(store.Session) (store.TurnPlan, error) {
			return store.TurnPlan{Messages: []store.NewMessage{{Message: aap.UserMessage("hi"), Origin: store.OriginClient}}}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return begun
}

// FinishTurn ends a begun turn as p says; its Ref, Step, FirstSeq and
// Events are filled in.
func FinishTurn(t testing.TB, st *store.Store, begun *store.TurnBegun, p store.TurnFinishParams) {
	t.Helper()
	p.Ref, p.Step, p.FirstSeq = begun.Turn.Ref(), 1, begun.LastSeq+1
	p.Events = []aap.Event{aap.TurnStart(), aap.TurnStop(p.StopReason)}
	if _, err := st.TurnFinish(context.Background(), p); err != nil {
		t.Fatal(err)
	}
}

// CompletedTurn runs a turn that completes on a new session of the tenant,
// and returns it.
func CompletedTurn(t testing.TB, st *store.Store, tenantID string) store.TurnRef {
	t.Helper()
	begun := BeginTurn(t, st, tenantID)
	FinishTurn(t, st, begun, store.TurnFinishParams{Status: store.TurnCompleted, StopReason: aap.StopEndTurn, InputTokens: 5, OutputTokens: 2})
	return begun.Turn.Ref()
}
