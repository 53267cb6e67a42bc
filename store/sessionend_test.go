package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/store"
	"github.com/aapd/aapd/store/storetest"
)

// Ending a session marks it ended once, names the turn holding it, and is
// confined to its owner; reading it shows when it ended, its thread and
// its labels.
func TestSessionEndEndsOnceAndNamesTheRunningTurn(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t)
	ctx := context.Background()
	tn := storetest.NewTenant(t, st)
	sess, _, err := st.SessionCreate(ctx, store.SessionCreateParams{TenantID: tn.ID, Owner: "alice", AgentName: "echo",
		ThreadID: "chat-1", Labels: map[string]string{"agentMode": "build"}})
	if err != nil {
		t.Fatal(err)
	}
	turnID := store.NewTurnID()
	if _, err := st.TurnBegin(ctx, &store.TurnBeginParams{TenantID: tn.ID, SessionID: sess.ID, TurnID: turnID,
		Stream: aap.StreamNone, Owner: 1, Lease: time.Minute,
		Prepare: func(store.Session) (store.TurnPlan, error) { return store.TurnPlan{}, nil }}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.SessionEnd(ctx, tn.ID, "bob", sess.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("bob ends alice's session: %v, want ErrNotFound", err)
	}
	active, ended, err := st.SessionEnd(ctx, tn.ID, "alice", sess.ID)
	if err != nil || !ended || active != turnID {
		t.Fatalf("SessionEnd = %q, %v, %v; want the running turn, ended", active, ended, err)
	}
	if active, ended, err := st.SessionEnd(ctx, tn.ID, "", sess.ID); err != nil || ended || active != "" {
		t.Fatalf("SessionEnd again = %q, %v, %v; want nothing changed", active, ended, err)
	}
	got, err := st.SessionGet(ctx, tn.ID, sess.ID)
	if err != nil || got.EndedAt == nil || got.ThreadID != "chat-1" || !reflect.DeepEqual(got.Labels, map[string]string{"agentMode": "build"}) {
		t.Fatalf("SessionGet = %+v, %v", got, err)
	}
	if _, _, err := st.SessionEnd(ctx, tn.ID, "", "sess_0000"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("no such session: %v", err)
	}
}

// Answers to pending calls are kept one per call, a later one replacing
// an earlier, refused when the caller's check says so, and cleared by the
// next turn's claim; the turn records the permissions it carries and, at
// its end, the calls it left pending, which the next turn reads as those
// pending before it.
func TestPendingAnswersAndTurnInputs(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t)
	ctx := context.Background()
	tn := storetest.NewTenant(t, st)
	sess, _, err := st.SessionCreate(ctx, store.SessionCreateParams{TenantID: tn.ID, AgentName: "echo",
		Messages: []aap.Message{aap.SystemMessage("be brief"), aap.UserMessage("seeded")}})
	if err != nil {
		t.Fatal(err)
	}
	pending := []aap.PendingToolCall{
		{ToolCall: aap.ToolCall{ToolCallID: "c1", Name: "clock", Input: json.RawMessage(`{}`)}, Server: true},
		{ToolCall: aap.ToolCall{ToolCallID: "c2", Name: "ask_user", Input: json.RawMessage(`{"question":"?"}`)}},
	}
	first := endedTurn(t, st, tn.ID, sess.ID, store.TurnPlan{Messages: []store.NewMessage{{Message: aap.UserMessage("hi"), Origin: store.OriginClient}}}, pending)

	answer := func(a store.PendingAnswer, check func(store.Session, []store.PendingAnswer) error) ([]store.PendingAnswer, error) {
		_, got, err := st.SessionAnswer(ctx, store.SessionAnswerParams{TenantID: tn.ID, SessionID: sess.ID, Answer: a, Check: check})
		return got, err
	}
	refuse := errors.New("refused")
	if _, err := answer(store.PendingAnswer{Message: aap.ToolMessage("c2", "x")}, func(store.Session, []store.PendingAnswer) error { return refuse }); !errors.Is(err, refuse) {
		t.Fatalf("a refused answer: %v", err)
	}
	if _, err := answer(store.PendingAnswer{Message: aap.ToolMessage("c2", "red")}, nil); err != nil {
		t.Fatal(err)
	}
	grant := store.PendingAnswer{Message: aap.Message{Role: aap.RoleToolPermission, ToolCallID: "c1", Granted: true}, TrustTool: true}
	var seen []store.PendingAnswer
	got, err := answer(grant, func(_ store.Session, held []store.PendingAnswer) error { seen = held; return nil })
	if err != nil || len(seen) != 1 || len(got) != 2 {
		t.Fatalf("second answer: held before %+v, after %+v, %v", seen, got, err)
	}
	got, err = answer(store.PendingAnswer{Message: aap.ToolMessage("c2", "green")}, nil)
	if err != nil || len(got) != 2 || got[1].Message.Content.PlainText() != "green" || !got[0].TrustTool {
		t.Fatalf("an answer given again replaces the first: %+v, %v", got, err)
	}

	perms := []store.TurnPermission{{ToolCallID: "c1", Granted: true, ForSession: true}}
	second := endedTurn(t, st, tn.ID, sess.ID, store.TurnPlan{Permissions: perms,
		Messages: []store.NewMessage{{Message: aap.ToolMessage("c2", "green"), Origin: store.OriginClient}}}, nil)
	if _, got, err := st.SessionAnswer(ctx, store.SessionAnswerParams{TenantID: tn.ID, SessionID: sess.ID,
		Answer: store.PendingAnswer{Message: aap.ToolMessage("x", "y")}}); err != nil || len(got) != 1 {
		t.Fatalf("the claim cleared the answers: %+v, %v", got, err)
	}

	inputs, err := st.TurnInputs(ctx, tn.ID, sess.ID, []string{first, second, store.NewTurnID()})
	if err != nil || len(inputs) != 2 {
		t.Fatalf("TurnInputs = %+v, %v", inputs, err)
	}
	a, b := inputs[first], inputs[second]
	if len(a.Messages) != 1 || a.Messages[0].Content.PlainText() != "hi" || a.PendingBefore != nil || !reflect.DeepEqual(a.Pending, pending) {
		t.Errorf("first turn's inputs = %+v", a)
	}
	if len(b.Messages) != 1 || b.Messages[0].ToolCallID != "c2" || !reflect.DeepEqual(b.Permissions, perms) ||
		!reflect.DeepEqual(b.PendingBefore, pending) || b.Pending == nil || len(b.Pending) != 0 || b.CreatedAt.IsZero() {
		t.Errorf("second turn's inputs = %+v", b)
	}
	other := storetest.NewTenant(t, st)
	if in, err := st.TurnInputs(ctx, other.ID, sess.ID, []string{first}); err != nil || len(in) != 0 {
		t.Errorf("another tenant reads %+v, %v", in, err)
	}
	seed, err := st.SessionSeed(ctx, tn.ID, sess.ID)
	if err != nil || len(seed) != 2 || seed[1].Content.PlainText() != "seeded" {
		t.Errorf("SessionSeed = %+v, %v", seed, err)
	}
}

// endedTurn runs a turn with the plan on the session and ends it with
// pending left, returning its id.
func endedTurn(t *testing.T, st *store.Store, tenantID, sessionID string, plan store.TurnPlan, pending []aap.PendingToolCall) string {
	t.Helper()
	ctx := context.Background()
	begun, err := st.TurnBegin(ctx, &store.TurnBeginParams{TenantID: tenantID, SessionID: sessionID, TurnID: store.NewTurnID(),
		Stream: aap.StreamNone, Owner: 1, Lease: time.Minute,
		Prepare: func(store.Session) (store.TurnPlan, error) { return plan, nil }})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.TurnFinish(ctx, store.TurnFinishParams{Ref: begun.Turn.Ref(), Step: 1, FirstSeq: begun.LastSeq + 1,
		Pending: pending, Status: store.TurnCompleted, StopReason: aap.StopToolUse,
		Events: []aap.Event{aap.TurnStart(), aap.TurnStop(aap.StopToolUse)}}); err != nil {
		t.Fatal(err)
	}
	return begun.Turn.ID
}
