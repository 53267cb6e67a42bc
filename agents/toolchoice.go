package agents

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/store"
)

// ToolChoice is a tool call a turn forces on its model
// (StartParams.ToolChoice): the turn's first model call must call a tool,
// the one named or any of those offered. Only the first call is forced, as
// OpenAI's own agents do: a model forced on every call would call tools for
// ever, and the turn would never end with an answer.
type ToolChoice struct {
	// Name is the tool the model must call; "" for any tool offered.
	Name string `json:"name,omitempty"`
	// Only, when not nil, names the only tools offered to the forced call
	// (OpenAI's allowed_tools in mode "required"); the calls after it are
	// offered every tool of the turn again. Nil offers every tool; empty,
	// none (a choice the claim refuses).
	Only []string `json:"only"`
}

// ToolForcer is a Model that can make its provider call a tool
// (ModelRequest.ToolChoice). A turn that forces a call on an agent whose
// model is not one, or is one that says it cannot, is refused with a
// *ToolChoiceError before anything is stored.
type ToolForcer interface {
	// ForcesToolCalls reports whether the model honours
	// ModelRequest.ToolChoice as configured (a provider may refuse it in
	// some modes, such as Anthropic's extended thinking).
	ForcesToolCalls() bool
}

// CanForceToolCalls reports whether the agent's model can be made to call
// a tool (ToolForcer).
func (a *Agent) CanForceToolCalls() bool {
	f, ok := a.Model.(ToolForcer)
	return ok && f.ForcesToolCalls()
}

// ToolChoiceError refuses a turn's ToolChoice: the agent's model cannot
// force a call (Unsupported), or the call cannot be made because the turn
// offers no such tool. Doors render it as a bad request.
type ToolChoiceError struct {
	// Unsupported is true when the agent's model cannot force a call at
	// all, false when the choice names a tool the turn does not offer.
	Unsupported bool
	// Agent is the session's agent.
	Agent string
	Msg   string
}

func (e *ToolChoiceError) Error() string { return e.Msg }

// Unwrap makes the refusal an *aap.Error too, so that a door that knows
// nothing of tool choices still answers it as a bad request.
func (e *ToolChoiceError) Unwrap() error { return &aap.Error{Field: "toolChoice", Msg: e.Msg} }

// LabelToolChoice is the turn label (store.Turn.Labels) that keeps a
// turn's ToolChoice, as JSON: a background turn that waits in the queue,
// or is resumed before its first step committed, is forced on the worker
// that runs it as on the one that started it.
const LabelToolChoice = "agents.toolChoice"

// labelsWith returns the labels a turn is stored with: the door's, and its
// tool choice.
func labelsWith(labels map[string]string, tc *ToolChoice) map[string]string {
	if tc == nil {
		return labels
	}
	b, err := json.Marshal(tc)
	if err != nil {
		return labels // a struct of strings always marshals
	}
	out := make(map[string]string, len(labels)+1)
	maps.Copy(out, labels)
	out[LabelToolChoice] = string(b)
	return out
}

// toolChoiceOf reads the tool choice a turn was stored with; nil for none
// (or one that cannot be read, which forces nothing).
func toolChoiceOf(labels map[string]string) *ToolChoice {
	v, ok := labels[LabelToolChoice]
	if !ok {
		return nil
	}
	var tc ToolChoice
	if err := json.Unmarshal([]byte(v), &tc); err != nil {
		return nil
	}
	return &tc
}

// checkToolChoice refuses a tool choice the turn cannot honour: on an
// agent whose model cannot force a call, or naming no tool the model would
// be offered once the turn's plan applies to the session. It runs in the
// claim, with the session as the claim reads it.
func checkToolChoice(agent *Agent, tc *ToolChoice, sess *store.Session, plan *store.TurnPlan) error {
	if !agent.CanForceToolCalls() {
		return &ToolChoiceError{Unsupported: true, Agent: agent.Info.Name,
			Msg: fmt.Sprintf("agent %q cannot be made to call a tool: its model decides whether it calls one", agent.Info.Name)}
	}
	agentTools, clientTools := sess.AgentTools, sess.ClientTools
	if plan.SetAgentTools {
		agentTools = plan.AgentTools
	}
	if plan.SetClientTools {
		clientTools = plan.ClientTools
	}
	var offered []string
	for _, ref := range agentTools {
		if agent.tool(ref.Name) != nil {
			offered = append(offered, ref.Name)
		}
	}
	for _, t := range clientTools {
		offered = append(offered, t.Name)
	}
	if tc.Only != nil {
		offered = slices.DeleteFunc(offered, func(name string) bool { return !slices.Contains(tc.Only, name) })
	}
	switch {
	case tc.Name != "" && !slices.Contains(offered, tc.Name):
		return &ToolChoiceError{Agent: agent.Info.Name,
			Msg: fmt.Sprintf("the model cannot be made to call %q: the response offers no tool of that name", tc.Name)}
	case len(offered) == 0:
		return &ToolChoiceError{Agent: agent.Info.Name,
			Msg: "the model cannot be made to call a tool: the response offers none"}
	}
	return nil
}

// force returns the model call req forced to call a tool as tc asks: its
// tools cut to tc.Only, and its ToolChoice set. A call left with no tool
// is not forced (the claim checked there was one; the session's tools
// cannot change while the turn holds it).
func (tc *ToolChoice) force(req ModelRequest) ModelRequest {
	if tc.Only != nil {
		var kept []aap.ToolSpec
		for _, t := range req.Tools {
			if slices.Contains(tc.Only, t.Name) {
				kept = append(kept, t)
			}
		}
		req.Tools = kept
	}
	if len(req.Tools) > 0 {
		req.ToolChoice = &ToolChoice{Name: tc.Name}
	}
	return req
}
