package agents_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
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

// choiceModel can force a tool call (agents.ToolForcer). It calls the
// calculator when the user has spoken last, and answers once it has the
// result; it records what each call was sent. Its first call may be held
// until hold is closed.
type choiceModel struct {
	mu    sync.Mutex
	calls []agents.ModelRequest
	hold  chan struct{}
	held  chan struct{} // closed when the first call is held
}

func (m *choiceModel) ForcesToolCalls() bool { return true }

func (m *choiceModel) Generate(ctx context.Context, req agents.ModelRequest, _ func(agents.ModelDelta)) (agents.ModelResponse, error) {
	m.mu.Lock()
	m.calls = append(m.calls, req)
	first := len(m.calls) == 1
	m.mu.Unlock()
	if first && m.hold != nil {
		close(m.held)
		select {
		case <-m.hold:
		case <-ctx.Done():
			return agents.ModelResponse{}, ctx.Err()
		}
	}
	if req.Messages[len(req.Messages)-1].Role == aap.RoleUser {
		call := aap.ContentBlock{Type: aap.BlockToolUse, ToolCallID: "call_1", Name: "calculator", Input: []byte(`{"expression":"6*7"}`)}
		return agents.ModelResponse{Message: agents.Message{Message: aap.AssistantMessage(call)}, StopReason: aap.StopToolUse}, nil
	}
	return agents.ModelResponse{Message: agents.Message{Message: aap.AssistantMessage(aap.TextBlock("42"))}, StopReason: aap.StopEndTurn}, nil
}

// sent is what the model's calls were sent: each call's tool choice (nil
// for none) and the names of the tools offered.
func (m *choiceModel) sent() (choices []*agents.ToolChoice, tools [][]string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, c := range m.calls {
		choices = append(choices, c.ToolChoice)
		var names []string
		for _, t := range c.Tools {
			names = append(names, t.Name)
		}
		tools = append(tools, names)
	}
	return choices, tools
}

// choiceRunner runs the agent "forcer" on model, with the calculator, and
// the echo agent, whose model cannot force a call; workers bounds its
// turns at once.
func choiceRunner(t *testing.T, st *store.Store, model agents.Model, workers int) *agents.Runner {
	t.Helper()
	forcer := &agents.Agent{
		Info:  aap.AgentInfo{Name: "forcer", Capabilities: echo.NewAgent().Info.Capabilities},
		Model: model, Tools: []agents.Tool{tools.Calculator()},
	}
	registry, err := agents.NewRegistry(forcer, echo.NewAgent())
	if err != nil {
		t.Fatal(err)
	}
	runner := agents.NewRunner(agents.RunnerConfig{Store: st, Agents: registry, Owner: func() int32 { return 1 },
		Lease: 30 * time.Second, Workers: workers})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = runner.Shutdown(ctx)
	})
	return runner
}

// choiceSession is a session of the agent with the calculator enabled
// and trusted, and the client tools a and b.
func choiceSession(t *testing.T, st *store.Store, tenantID, agent string) store.Session {
	t.Helper()
	params := json.RawMessage(`{"type":"object","properties":{}}`)
	sess, _, err := st.SessionCreate(context.Background(), store.SessionCreateParams{TenantID: tenantID, AgentName: agent,
		AgentTools:  []aap.ServerToolRef{{Name: "calculator", Trust: true}},
		ClientTools: []aap.ToolSpec{{Name: "a", Parameters: params}, {Name: "b", Parameters: params}}})
	if err != nil {
		t.Fatal(err)
	}
	return sess
}

// A turn's tool choice forces its first model call only: the call after
// the tool's result is the model's to decide, offered every tool again.
// A choice of one tool names it; allowed tools offer only those.
func TestAToolChoiceForcesTheTurnsFirstModelCallOnly(t *testing.T) {
	st := storetest.Open(t)
	ctx := context.Background()
	tn := storetest.NewTenant(t, st)
	all := []string{"calculator", "a", "b"}
	for _, tc := range []struct {
		name      string
		choice    agents.ToolChoice
		want      agents.ToolChoice // what the first call is sent
		firstTool []string
	}{
		{"required", agents.ToolChoice{}, agents.ToolChoice{}, all},
		{"one tool", agents.ToolChoice{Name: "calculator"}, agents.ToolChoice{Name: "calculator"}, all},
		{"allowed tools", agents.ToolChoice{Only: []string{"b", "calculator"}}, agents.ToolChoice{}, []string{"calculator", "b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			model := &choiceModel{}
			runner := choiceRunner(t, st, model, 4)
			sess := choiceSession(t, st, tn.ID, "forcer")
			choice := tc.choice
			h, err := runner.Run(ctx, agents.StartParams{TenantID: tn.ID, SessionID: sess.ID, ToolChoice: &choice,
				Request: aap.TurnRequest{Messages: []aap.Message{aap.UserMessage("what is 6*7?")}}})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := h.Response(ctx); err != nil {
				t.Fatal(err)
			}
			choices, offered := model.sent()
			if len(choices) != 2 {
				t.Fatalf("%d model calls, want 2 (the forced call, then the answer)", len(choices))
			}
			if choices[0] == nil || !reflect.DeepEqual(*choices[0], tc.want) {
				t.Errorf("first call's choice %+v, want %+v", choices[0], tc.want)
			}
			if !reflect.DeepEqual(offered[0], tc.firstTool) {
				t.Errorf("first call offered %q, want %q", offered[0], tc.firstTool)
			}
			if choices[1] != nil {
				t.Errorf("second call forced too (%+v): only the first is", *choices[1])
			}
			if !reflect.DeepEqual(offered[1], all) {
				t.Errorf("second call offered %q, want %q", offered[1], all)
			}
		})
	}
}

// A tool choice the turn cannot honour is refused before anything is
// stored: on an agent whose model cannot force a call (echo), or naming
// no tool the turn offers. The refusal is a bad request for every door.
func TestAToolChoiceTheTurnCannotHonourIsRefused(t *testing.T) {
	st := storetest.Open(t)
	ctx := context.Background()
	tn := storetest.NewTenant(t, st)
	model := &choiceModel{}
	runner := choiceRunner(t, st, model, 4)
	for _, tc := range []struct {
		name        string
		agent       string
		choice      agents.ToolChoice
		unsupported bool
	}{
		{"echo cannot force a call", "echo", agents.ToolChoice{}, true},
		{"a tool not offered", "forcer", agents.ToolChoice{Name: "c"}, false},
		{"no allowed tool offered", "forcer", agents.ToolChoice{Only: []string{"c"}}, false},
		{"a tool left out of the allowed ones", "forcer", agents.ToolChoice{Name: "a", Only: []string{"b"}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sess := choiceSession(t, st, tn.ID, tc.agent)
			choice := tc.choice
			_, err := runner.Start(ctx, agents.StartParams{TenantID: tn.ID, SessionID: sess.ID, ToolChoice: &choice,
				Request: aap.TurnRequest{Messages: []aap.Message{aap.UserMessage("hi")}}})
			var refused *agents.ToolChoiceError
			if !errors.As(err, &refused) || refused.Unsupported != tc.unsupported || refused.Agent != tc.agent {
				t.Fatalf("Start: %v (%+v), want a ToolChoiceError, unsupported %v", err, refused, tc.unsupported)
			}
			var bad *aap.Error
			if !errors.As(err, &bad) {
				t.Errorf("the refusal %v is no *aap.Error: a door would answer it with a 500", err)
			}
			page, err := st.TurnList(ctx, store.TurnListParams{TenantID: tn.ID, SessionID: sess.ID, Limit: 10})
			if err != nil || len(page.Turns) != 0 {
				t.Errorf("turns after the refusal: %+v, %v", page.Turns, err)
			}
		})
	}
	if choices, _ := model.sent(); len(choices) != 0 {
		t.Errorf("the model was called %d times", len(choices))
	}
}

// A background turn that waits in the queue for a worker is forced on the
// worker that runs it, as it was asked: the choice is kept with the turn.
func TestAQueuedBackgroundTurnIsForcedWhenItRuns(t *testing.T) {
	st := storetest.Open(t)
	ctx := context.Background()
	tn := storetest.NewTenant(t, st)
	model := &choiceModel{hold: make(chan struct{}), held: make(chan struct{})}
	runner := choiceRunner(t, st, model, 1)
	long, err := runner.Start(ctx, agents.StartParams{TenantID: tn.ID, SessionID: choiceSession(t, st, tn.ID, "forcer").ID,
		Request: aap.TurnRequest{Messages: []aap.Message{aap.UserMessage("hold on")}}})
	if err != nil {
		t.Fatal(err)
	}
	<-model.held
	h, err := runner.StartBackground(ctx, agents.StartParams{TenantID: tn.ID, SessionID: choiceSession(t, st, tn.ID, "forcer").ID,
		ToolChoice: &agents.ToolChoice{Name: "b"}, Request: aap.TurnRequest{Messages: []aap.Message{aap.UserMessage("what is 6*7?")}}})
	if err != nil {
		t.Fatal(err)
	}
	ref := h.Turn.Ref()
	if h.Turn.Status != store.TurnQueued {
		t.Fatalf("turn = %+v, want queued", h.Turn)
	}
	close(model.hold)
	if _, err := long.Response(ctx); err != nil {
		t.Fatal(err)
	}
	choices, _ := model.sent()
	if n := len(choices); n != 2 || choices[0] != nil || choices[1] != nil {
		t.Fatalf("the unforced turn's calls: %d, %+v", n, choices)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := runner.Resume(ctx, ref); err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatal(err)
		}
	}
	waitTurn(t, st, ref, func(r store.Turn) bool { return r.Status.Ended() })
	choices, _ = model.sent()
	if len(choices) != 4 || choices[2] == nil || choices[2].Name != "b" || choices[3] != nil {
		t.Fatalf("the queued turn's calls were sent %+v, want the choice of b, then none", choices[2:])
	}
}
