package agents_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/agents"
	"github.com/aapd/aapd/agents/echo"
	"github.com/aapd/aapd/agents/tools"
	"github.com/aapd/aapd/store"
	"github.com/aapd/aapd/store/storetest"
)

// stepModel calls the calculator, then, once it has its result, answers.
// Each call is counted, with the last message it was shown; the first
// answer may be held until hold is closed (a process that died mid-step).
type stepModel struct {
	mu      sync.Mutex
	calls   []string // the role of the last message each call saw
	hold    chan struct{}
	wasHeld bool
	held    chan struct{} // closed when a call is held
}

func (m *stepModel) Generate(ctx context.Context, req agents.ModelRequest, _ func(agents.ModelDelta)) (agents.ModelResponse, error) {
	last := req.Messages[len(req.Messages)-1].Message
	m.mu.Lock()
	m.calls = append(m.calls, string(last.Role))
	hold := m.hold
	if last.Role == aap.RoleUser || m.wasHeld {
		hold = nil
	}
	m.wasHeld = m.wasHeld || hold != nil // one call is held
	m.mu.Unlock()
	if last.Role == aap.RoleUser {
		call := aap.ContentBlock{Type: aap.BlockToolUse, ToolCallID: "call_1", Name: "calculator", Input: []byte(`{"expression":"6*7"}`)}
		return agents.ModelResponse{Message: agents.Message{Message: aap.AssistantMessage(call)}, StopReason: aap.StopToolUse,
			Usage: agents.Usage{InputTokens: 10, OutputTokens: 5}}, nil
	}
	if hold != nil {
		close(m.held)
		select {
		case <-hold:
		case <-ctx.Done():
			return agents.ModelResponse{}, ctx.Err()
		}
	}
	return agents.ModelResponse{Message: agents.Message{Message: aap.AssistantMessage(aap.TextBlock("the answer is " + last.Content.PlainText()))},
		StopReason: aap.StopEndTurn, Usage: agents.Usage{InputTokens: 20, OutputTokens: 7}}, nil
}

func (m *stepModel) seen() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.calls...)
}

// stepRunner is a runner of a process of its own: its instance (closed to
// let the process die) and an agent on model.
func stepRunner(t *testing.T, st *store.Store, model agents.Model, workers int) (*agents.Runner, *store.Instance) {
	t.Helper()
	in, err := st.StartInstance(context.Background(), store.InstanceParams{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(in.Close)
	agent := &agents.Agent{
		Info:  aap.AgentInfo{Name: "stepper", Capabilities: echo.NewAgent().Info.Capabilities},
		Model: model, Tools: []agents.Tool{tools.Calculator()},
	}
	registry, err := agents.NewRegistry(agent)
	if err != nil {
		t.Fatal(err)
	}
	runner := agents.NewRunner(agents.RunnerConfig{Store: st, Agents: registry, Owner: in.ID, Lease: 30 * time.Second, Workers: workers})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = runner.Shutdown(ctx)
	})
	return runner, in
}

func stepSession(t *testing.T, st *store.Store, tenantID string) store.Session {
	t.Helper()
	sess, _, err := st.SessionCreate(context.Background(), store.SessionCreateParams{TenantID: tenantID, AgentName: "stepper",
		AgentTools: []aap.ServerToolRef{{Name: "calculator", Trust: true}}})
	if err != nil {
		t.Fatal(err)
	}
	return sess
}

func waitTurn(t *testing.T, st *store.Store, ref store.TurnRef, what func(store.Turn) bool) store.Turn {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		rec, err := st.TurnGet(context.Background(), ref.TenantID, ref.SessionID, ref.TurnID)
		if err != nil {
			t.Fatal(err)
		}
		if what(rec) {
			return rec
		}
		if time.Now().After(deadline) {
			t.Fatalf("turn %s stayed %+v", ref.TurnID, rec)
		}
	}
}

func historyOf(t *testing.T, st *store.Store, ref store.TurnRef) []string {
	t.Helper()
	h, err := st.History(context.Background(), store.HistoryParams{TenantID: ref.TenantID, SessionID: ref.SessionID, Type: aap.HistoryFull})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range h {
		out = append(out, fmt.Sprintf("%d %s %s", m.Seq, m.Message.Role, m.Message.Content.PlainText()))
	}
	return out
}

// A background turn whose process dies mid-step is resumed by another
// process from its last committed step: the model is asked again only for
// the step that had not committed, every message is stored once, and the
// worker that was replaced (its process alive after all) writes nothing.
func TestBackgroundTurnResumesFromItsLastCommittedStep(t *testing.T) {
	st := storetest.Open(t)
	ctx := context.Background()
	tn := storetest.NewTenant(t, st)
	sess := stepSession(t, st, tn.ID)

	first := &stepModel{hold: make(chan struct{}), held: make(chan struct{})}
	a, instanceA := stepRunner(t, st, first, 4)
	h, err := a.StartBackground(ctx, agents.StartParams{TenantID: tn.ID, SessionID: sess.ID,
		Request: aap.TurnRequest{Stream: aap.StreamMessage, Messages: []aap.Message{aap.UserMessage("what is 6*7?")}}})
	if err != nil {
		t.Fatal(err)
	}
	if h.Turn.Status != store.TurnRunning || !h.Turn.Background || h.Turn.Attempts != 1 {
		t.Fatalf("started turn = %+v", h.Turn)
	}
	ref := h.Turn.Ref()
	<-first.held // step 1 (the tool call and its result) committed; step 2 asked
	instanceA.Close()

	second := &stepModel{}
	b, _ := stepRunner(t, st, second, 4)
	var waiting []store.WaitingTurn
	for deadline := time.Now().Add(5 * time.Second); len(waiting) == 0; time.Sleep(20 * time.Millisecond) {
		if waiting, err = st.TurnQueueWaiting(ctx, 10); err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatal("the dead process's turn never waited for a worker")
		}
	}
	if len(waiting) != 1 || waiting[0].Ref != ref || !waiting[0].Orphaned {
		t.Fatalf("waiting = %+v", waiting)
	}
	resumed, err := b.Resume(ctx, ref)
	if err != nil || resumed.Attempts != 2 {
		t.Fatalf("resume = %+v, %v", resumed, err)
	}
	done := waitTurn(t, st, ref, func(r store.Turn) bool { return r.Status.Ended() })
	if done.Status != store.TurnCompleted || done.Attempts != 2 || done.InputTokens != 30 || done.OutputTokens != 12 {
		t.Errorf("record = %+v", done)
	}
	if got := second.seen(); fmt.Sprint(got) != "[tool]" {
		t.Errorf("the resuming process asked the model %v: want only the step after the tool's result", got)
	}

	// The replaced worker wakes up: its step is refused.
	close(first.hold)
	waitIdle(t, a)
	want := []string{"1 user what is 6*7?", "2 assistant ", "3 tool 42", "4 assistant the answer is 42"}
	if got := historyOf(t, st, ref); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("history = %q\nwant %q", got, want)
	}
	log, err := st.TurnEventsAfter(ctx, ref, 0)
	if err != nil || !log.Finished || log.Events[0].Type != aap.EventTurnStart || log.Events[len(log.Events)-1].Type != aap.EventTurnStop {
		t.Fatalf("log = %+v, %v", log, err)
	}
	for _, e := range log.Events[1 : len(log.Events)-1] {
		if e.Type == aap.EventTurnStart || e.Type == aap.EventTurnStop {
			t.Errorf("a second %s in the log: %+v", e.Type, log.Events)
		}
	}
}

// When every worker is busy, a background turn is not refused: it is
// claimed without a worker, its messages stored, and it runs once a
// worker takes it.
func TestBackgroundTurnWaitsInTheQueueWhileEveryWorkerIsBusy(t *testing.T) {
	st := storetest.Open(t)
	ctx := context.Background()
	tn := storetest.NewTenant(t, st)
	busy := &stepModel{hold: make(chan struct{}), held: make(chan struct{})}
	runner, _ := stepRunner(t, st, busy, 1)
	long, err := runner.Start(ctx, agents.StartParams{TenantID: tn.ID, SessionID: stepSession(t, st, tn.ID).ID,
		Request: aap.TurnRequest{Messages: []aap.Message{aap.UserMessage("hold on")}}})
	if err != nil {
		t.Fatal(err)
	}
	<-busy.held
	if _, err := runner.Start(ctx, agents.StartParams{TenantID: tn.ID, SessionID: stepSession(t, st, tn.ID).ID,
		Request: aap.TurnRequest{Messages: []aap.Message{aap.UserMessage("hi")}}}); !errors.Is(err, agents.ErrOverFairShare) {
		t.Fatalf("a foreground turn with every worker busy with the tenant's turns: %v, want ErrOverFairShare", err)
	}
	h, err := runner.StartBackground(ctx, agents.StartParams{TenantID: tn.ID, SessionID: stepSession(t, st, tn.ID).ID,
		Request: aap.TurnRequest{Messages: []aap.Message{aap.UserMessage("what is 6*7?")}}})
	if err != nil {
		t.Fatal(err)
	}
	ref := h.Turn.Ref()
	if h.Turn.Status != store.TurnQueued || h.Turn.Attempts != 0 {
		t.Fatalf("turn = %+v, want queued", h.Turn)
	}
	if got := historyOf(t, st, ref); fmt.Sprint(got) != "[1 user what is 6*7?]" {
		t.Errorf("history of the queued turn = %q", got)
	}
	if _, err := runner.Resume(ctx, ref); !errors.Is(err, agents.ErrOverFairShare) {
		t.Errorf("resume with every worker busy: %v", err)
	}
	close(busy.hold)
	if _, err := long.Response(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-runner.Freed():
	case <-time.After(5 * time.Second):
		t.Fatal("a freed worker was not signalled")
	}
	if _, err := runner.Resume(ctx, ref); err != nil {
		t.Fatal(err)
	}
	done := waitTurn(t, st, ref, func(r store.Turn) bool { return r.Status.Ended() })
	if done.Status != store.TurnCompleted || done.Attempts != 1 {
		t.Errorf("record = %+v", done)
	}
}

// A shutdown that cannot wait for a background turn hands it back to the
// queue instead of interrupting it: any process resumes it at once.
func TestShutdownHandsBackgroundTurnsBack(t *testing.T) {
	st := storetest.Open(t)
	tn := storetest.NewTenant(t, st)
	model := &stepModel{hold: make(chan struct{}), held: make(chan struct{})}
	runner, _ := stepRunner(t, st, model, 2)
	h, err := runner.StartBackground(context.Background(), agents.StartParams{TenantID: tn.ID, SessionID: stepSession(t, st, tn.ID).ID,
		Request: aap.TurnRequest{Messages: []aap.Message{aap.UserMessage("what is 6*7?")}}})
	if err != nil {
		t.Fatal(err)
	}
	<-model.held
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := runner.Shutdown(ctx); err == nil {
		t.Error("a shutdown past its drain timeout reported nothing")
	}
	rec, err := st.TurnGet(context.Background(), tn.ID, h.Turn.SessionID, h.Turn.ID)
	if err != nil || rec.Status != store.TurnRunning || rec.Attempts != 1 {
		t.Fatalf("record after the shutdown = %+v, %v", rec, err)
	}
	waiting, err := st.TurnQueueWaiting(context.Background(), 10)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, w := range waiting {
		found = found || (w.Ref == h.Turn.Ref() && !w.Orphaned)
	}
	if !found {
		t.Errorf("the handed-back turn is not waiting for a worker: %+v", waiting)
	}
}
