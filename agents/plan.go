package agents

import (
	"maps"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/store"
)

// Texts of the tool messages the server writes on the model's behalf.
const (
	// CancelledToolCallText closes a pending tool call when the user sends a
	// new message instead of answering it, so the history stays valid for
	// every provider (each tool call followed by its result).
	CancelledToolCallText = "Tool call cancelled: the user sent a new message"
	// InterruptedToolCallText closes a granted tool call whose turn stopped
	// before the tool's result was recorded.
	InterruptedToolCallText = "Tool call interrupted: the turn running it stopped before it finished"
	// DeniedToolCallText is the result of a tool call the client denied.
	DeniedToolCallText = "Tool call denied"
)

// DenialText is the tool result recorded for a denied tool call.
func DenialText(reason string) string {
	if reason == "" {
		return DeniedToolCallText
	}
	return DeniedToolCallText + ": " + reason
}

// planTurn decides what a turn request changes in its session: overrides,
// the messages to store before the model runs, and the pending tool calls
// left for the worker (granted server calls, which it runs first). It is
// pure: it runs inside the claiming transaction. ids are the client's ids of
// req.Messages, index by index (see StartParams.MessageIDs): each message
// stored is recorded with its own.
//
// It runs deep in a request's stack (the claim), so what only some turns
// need — overrides, tool results — is planned in functions of its own,
// whose frames a plain user message never puts on the stack.
func planTurn(agent *Agent, sess *store.Session, req *aap.TurnRequest, ids []string) (store.TurnPlan, error) {
	if sess.EndedAt != nil {
		return store.TurnPlan{}, store.ErrSessionEnded
	}
	if err := aap.ValidateTurn(*req, sess.AgentName, sess.AgentTools, agent.Info); err != nil {
		return store.TurnPlan{}, err
	}
	var plan store.TurnPlan
	if req.Agent != nil || req.Tools != nil {
		if err := planOverrides(&plan, agent, sess, req); err != nil {
			return store.TurnPlan{}, err
		}
	}
	// Granted calls a dead turn never ran can no longer be answered by the
	// client: close them first, whatever this turn carries.
	var open []aap.PendingToolCall
	for _, p := range sess.Pending {
		if p.Granted {
			plan.Messages = append(plan.Messages, serverNote(p.ToolCallID, InterruptedToolCallText))
			continue
		}
		open = append(open, p)
	}
	if req.Messages[0].Role != aap.RoleUser {
		tools := sess.AgentTools
		if plan.SetAgentTools {
			tools = plan.AgentTools
		}
		if err := planToolResults(&plan, open, tools, req, ids); err != nil {
			return store.TurnPlan{}, err
		}
		return plan, nil
	}
	for _, p := range open {
		plan.Messages = append(plan.Messages, serverNote(p.ToolCallID, CancelledToolCallText))
	}
	plan.Messages = append(plan.Messages, store.NewMessage{Message: req.Messages[0], Origin: store.OriginClient, ClientID: idAt(ids, 0)})
	return plan, nil
}

// planOverrides adds to plan the request's overrides of the session's
// server tools, options and client tools.
func planOverrides(plan *store.TurnPlan, agent *Agent, sess *store.Session, req *aap.TurnRequest) error {
	if o := req.Agent; o != nil {
		if o.Tools != nil {
			// Names stay unique across client and server tools also when
			// only the server tools change (ValidateTurn checks new client
			// tools against them).
			if req.Tools == nil {
				if err := aap.ValidateServerTools("agent.tools", o.Tools, sess.ClientTools); err != nil {
					return err
				}
			}
			plan.SetAgentTools, plan.AgentTools = true, o.Tools
		}
		if len(o.Options) > 0 {
			merged := sess.AllOptions()
			if merged == nil {
				merged = map[string]string{}
			}
			maps.Copy(merged, keepRedactedSecrets(o.Options, sess.SecretOptions))
			plan.SetOptions = true
			plan.Options, plan.SecretOptions = agent.SplitOptions(merged)
		}
	}
	if req.Tools != nil {
		plan.SetClientTools, plan.ClientTools = true, req.Tools
	}
	return nil
}

// planToolResults adds to plan the request's answers to the open tool
// calls: results and denials to store, granted server calls to run, and
// the permissions to record on the turn (a grant is for the rest of the
// session when the turn also trusts the call's tool: tools are the
// session's server tools once the turn's overrides apply).
func planToolResults(plan *store.TurnPlan, open []aap.PendingToolCall, tools []aap.ServerToolRef, req *aap.TurnRequest, ids []string) error {
	res, err := aap.ResolveToolCalls(open, req.Messages)
	if err != nil {
		return err
	}
	// Results come in the order of the calls, not of the request.
	byCall := map[string]string{}
	for i, m := range req.Messages {
		if m.Role == aap.RoleTool {
			byCall[m.ToolCallID] = idAt(ids, i)
		}
	}
	for _, m := range res.Results {
		plan.Messages = append(plan.Messages, store.NewMessage{Message: m, Origin: store.OriginClient, ClientID: byCall[m.ToolCallID]})
	}
	for _, p := range res.Permissions {
		plan.Permissions = append(plan.Permissions, store.TurnPermission{
			ToolCallID: p.Call.ToolCallID, Granted: p.Granted, ForSession: p.Granted && trusted(tools, p.Call.Name)})
		if !p.Granted {
			plan.Messages = append(plan.Messages, store.NewMessage{
				Message: aap.ToolMessage(p.Call.ToolCallID, DenialText(p.Reason)), Origin: store.OriginAgent})
			continue
		}
		plan.Pending = append(plan.Pending, aap.PendingToolCall{ToolCall: p.Call, Server: true, Granted: true})
	}
	return nil
}

// trusted reports whether the server tool is enabled and trusted.
func trusted(tools []aap.ServerToolRef, name string) bool {
	for _, t := range tools {
		if t.Name == name {
			return t.Trust
		}
	}
	return false
}

// idAt returns ids[i], or "" past its end.
func idAt(ids []string, i int) string {
	if i < len(ids) {
		return ids[i]
	}
	return ""
}

// keepRedactedSecrets drops from a turn's option overrides each secret the
// client sent back as it reads it, the placeholder "***" (a client that
// resends the whole session's options, as a playground does): the stored
// value stays. A secret the session has no value for is taken as sent.
func keepRedactedSecrets(overrides, stored map[string]string) map[string]string {
	out := make(map[string]string, len(overrides))
	for k, v := range overrides {
		if _, ok := stored[k]; ok && v == aap.SecretPlaceholder {
			continue
		}
		out[k] = v
	}
	return out
}

func serverNote(toolCallID, text string) store.NewMessage {
	return store.NewMessage{Message: aap.ToolMessage(toolCallID, text), Origin: store.OriginServer}
}
