package aap

import (
	"fmt"
	"strings"
)

// PendingToolCall is a tool call a session waits on after a turn stopped
// with stop reason tool_use.
type PendingToolCall struct {
	ToolCall
	// Server marks an untrusted server tool call awaiting permission; a
	// client tool call awaits its result instead.
	Server bool `json:"server,omitempty"`
	// Granted marks a server tool call the client allowed whose result is
	// not recorded yet: the turn that runs it is under way (or died).
	Granted bool `json:"granted,omitempty"`
}

// Permission is a client's decision on an untrusted server tool call.
type Permission struct {
	Call    ToolCall
	Granted bool
	Reason  string
}

// Resolution is a turn's answer to every pending tool call, in the order the
// calls were made: tool results for client calls, permissions for server calls.
type Resolution struct {
	Results     []Message
	Permissions []Permission
}

// ResolveToolCalls matches the tool results and permissions of a turn
// request against the session's pending tool calls. Every pending call must
// be answered once, client calls with a tool message and server calls with a
// tool_permission message.
func ResolveToolCalls(pending []PendingToolCall, msgs []Message) (Resolution, error) {
	if len(pending) == 0 {
		return Resolution{}, errorf("messages", "the session has no pending tool calls: send a user message")
	}
	byID := make(map[string]PendingToolCall, len(pending))
	for _, p := range pending {
		byID[p.ToolCallID] = p
	}
	answers := make(map[string]Message, len(msgs))
	for i, m := range msgs {
		field := fmt.Sprintf("messages[%d].toolCallId", i)
		p, ok := byID[m.ToolCallID]
		switch {
		case !ok:
			return Resolution{}, errorf(field, "unknown toolCallId %q: the pending tool calls are %s", m.ToolCallID, pendingIDs(pending))
		case m.Role == RoleTool && p.Server:
			return Resolution{}, errorf(field, "tool call %q is a call of server tool %q awaiting permission: answer it with a tool_permission message", m.ToolCallID, p.Name)
		case m.Role == RoleToolPermission && !p.Server:
			return Resolution{}, errorf(field, "tool call %q is a call of client tool %q: answer it with a tool message carrying its result", m.ToolCallID, p.Name)
		}
		answers[m.ToolCallID] = m
	}
	var res Resolution
	var missing []string
	for _, p := range pending {
		m, ok := answers[p.ToolCallID]
		switch {
		case !ok:
			missing = append(missing, fmt.Sprintf("%q (%s)", p.ToolCallID, p.Name))
		case p.Server:
			res.Permissions = append(res.Permissions, Permission{Call: p.ToolCall, Granted: m.Granted, Reason: m.Reason})
		default:
			res.Results = append(res.Results, m)
		}
	}
	if len(missing) > 0 {
		return Resolution{}, errorf("messages", "pending tool calls %s are not answered: submit every result and permission together", strings.Join(missing, ", "))
	}
	return res, nil
}

func pendingIDs(pending []PendingToolCall) string {
	ids := make([]string, len(pending))
	for i, p := range pending {
		ids[i] = fmt.Sprintf("%q", p.ToolCallID)
	}
	return strings.Join(ids, ", ")
}

// PendingFromHistory returns the unanswered tool calls of the last assistant
// message of a history, classifying each as a client call when its name is
// one of clientTools and as a server call otherwise.
func PendingFromHistory(history []Message, clientTools []ToolSpec) []PendingToolCall {
	last := -1
	for i := len(history) - 1; i >= 0; i-- {
		if history[i].Role == RoleAssistant {
			last = i
			break
		}
	}
	if last < 0 {
		return nil
	}
	answered := map[string]bool{}
	for _, m := range history[last+1:] {
		if m.Role == RoleTool {
			answered[m.ToolCallID] = true
		}
	}
	client := map[string]bool{}
	for _, t := range clientTools {
		client[t.Name] = true
	}
	var pending []PendingToolCall
	for _, c := range history[last].ToolCalls() {
		if !answered[c.ToolCallID] {
			pending = append(pending, PendingToolCall{ToolCall: c, Server: !client[c.Name]})
		}
	}
	return pending
}
