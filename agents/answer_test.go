package agents_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/agents"
	"github.com/aapd/aapd/store"
	"github.com/aapd/aapd/store/storetest"
)

// Answers given one at a time wait on the session until every pending
// call has one; the last starts the turn that carries them all, with the
// tool whose permission was granted "for the session" trusted from then
// on, and the turn records how each permission was given.
func TestAnswersOneAtATimeStartOneTurn(t *testing.T) {
	st, _, runner := countedRunner(t)
	ctx := context.Background()
	tn := storetest.NewTenant(t, st)
	sess, _, err := runner.CreateSession(ctx, store.SessionCreateParams{TenantID: tn.ID, AgentName: "echo",
		AgentTools: []aap.ServerToolRef{{Name: "clock"}, {Name: "calculator"}}, ClientTools: []aap.ToolSpec{agents.QuestionTool()}})
	if err != nil {
		t.Fatal(err)
	}
	h, err := runner.Run(ctx, agents.StartParams{TenantID: tn.ID, SessionID: sess.ID, Request: aap.TurnRequest{
		Messages: []aap.Message{aap.UserMessage("/tool clock\n/tool calculator {\"expression\":\"1+1\"}\n/ask Sure? | yes | no")}}})
	if err != nil {
		t.Fatal(err)
	}
	resp, _ := h.Response(ctx)
	calls := toolCallsOf(resp.Messages)
	if len(calls) != 3 {
		t.Fatalf("calls %+v", calls)
	}
	clock, calc, ask := calls[0].ToolCallID, calls[1].ToolCallID, calls[2].ToolCallID
	answer := func(m aap.Message, trust bool) (*agents.Handle, error) {
		return runner.Answer(ctx, agents.AnswerParams{TenantID: tn.ID, SessionID: sess.ID, Answer: m, TrustTool: trust})
	}
	grant := func(id string) aap.Message {
		return aap.Message{Role: aap.RoleToolPermission, ToolCallID: id, Granted: true}
	}
	if _, err := answer(aap.ToolMessage(clock, "x"), false); err == nil || !strings.Contains(err.Error(), "awaits a permission") {
		t.Fatalf("a result for a permission: %v", err)
	}
	if _, err := answer(grant("call_nope"), false); !errors.Is(err, store.ErrNotPending) {
		t.Fatalf("an unknown call: %v, want ErrNotPending", err)
	}
	if h, err := answer(grant(clock), true); h != nil || err != nil {
		t.Fatalf("first of three answers: %v, %v; want it kept", h, err)
	}
	if h, err := answer(aap.ToolMessage(ask, "yes"), false); h != nil || err != nil {
		t.Fatalf("second of three answers: %v, %v; want it kept", h, err)
	}
	h, err = answer(aap.Message{Role: aap.RoleToolPermission, ToolCallID: calc, Granted: false}, false)
	if err != nil || h == nil {
		t.Fatalf("the last answer: %v, %v; want the turn started", h, err)
	}
	resp, err = h.Response(ctx)
	if err != nil || resp.StopReason != aap.StopEndTurn {
		t.Fatalf("the answers' turn: %+v, %v", resp, err)
	}
	after, err := st.SessionGet(ctx, tn.ID, sess.ID)
	if err != nil || len(after.AgentTools) != 2 || !after.AgentTools[0].Trust || after.AgentTools[1].Trust {
		t.Fatalf("tools after \"always\" on clock: %+v, %v", after.AgentTools, err)
	}
	in, err := st.TurnInputs(ctx, tn.ID, sess.ID, []string{h.Turn.ID})
	perms := in[h.Turn.ID].Permissions
	if err != nil || len(perms) != 2 || !perms[0].ForSession || perms[1].Granted {
		t.Fatalf("permissions recorded %+v, %v", perms, err)
	}
}

// An ended session takes no turn, through any door, and answers to its
// calls are refused; a turn running when it ends is cancelled.
func TestAnEndedSessionTakesNoMoreTurns(t *testing.T) {
	st, runner, tn, sess := echoSession(t)
	ctx := context.Background()
	h, err := runner.Start(ctx, agents.StartParams{TenantID: tn.ID, SessionID: sess.ID,
		Request: aap.TurnRequest{Stream: aap.StreamDelta, Messages: []aap.Message{aap.UserMessage("/slow 200\n/words 50")}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := runner.EndSession(ctx, tn.ID, "", sess.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Response(ctx); err != nil {
		t.Fatal(err)
	}
	turn, err := st.TurnGet(ctx, tn.ID, sess.ID, h.Turn.ID)
	if err != nil || turn.Status != store.TurnCancelled {
		t.Fatalf("the running turn: %+v, %v; want it cancelled", turn, err)
	}
	waitIdle(t, runner)
	if _, err := runner.Start(ctx, agents.StartParams{TenantID: tn.ID, SessionID: sess.ID,
		Request: aap.TurnRequest{Messages: []aap.Message{aap.UserMessage("again")}}}); !errors.Is(err, store.ErrSessionEnded) {
		t.Fatalf("a turn after the end: %v, want ErrSessionEnded", err)
	}
	if _, err := runner.Answer(ctx, agents.AnswerParams{TenantID: tn.ID, SessionID: sess.ID, Answer: aap.ToolMessage("c", "x")}); !errors.Is(err, store.ErrSessionEnded) {
		t.Fatalf("an answer after the end: %v, want ErrSessionEnded", err)
	}
	if err := runner.EndSession(ctx, tn.ID, "someone", sess.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("another owner ends it: %v, want ErrNotFound", err)
	}
}

func toolCallsOf(msgs []aap.Message) []aap.ToolCall {
	var out []aap.ToolCall
	for _, m := range msgs {
		out = append(out, m.ToolCalls()...)
	}
	return out
}
