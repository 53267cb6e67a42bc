package aap

import (
	"fmt"
	"strings"
)

// Error is a request that breaks a protocol rule. Field is the JSON path of
// the offending value (e.g. "messages[2].content[0].url"), empty for the
// request as a whole.
type Error struct {
	Field string
	Msg   string
}

func (e *Error) Error() string {
	if e.Field == "" {
		return e.Msg
	}
	return e.Field + ": " + e.Msg
}

func errorf(field, format string, args ...any) *Error {
	return &Error{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// ValidateCreateSession checks a POST /sessions body against the agent it
// names. The caller has already resolved r.Agent.Name to agent. A refusal
// names the members of the body a create-session request does not have.
func ValidateCreateSession(r CreateSessionRequest, agent AgentInfo) error {
	return r.unknown.explain(validateCreateSession(r, agent), "a create-session request", &CreateSessionRequest{})
}

func validateCreateSession(r CreateSessionRequest, agent AgentInfo) error {
	if err := validateToolRefs("agent.tools", r.Agent.Tools, agent); err != nil {
		return err
	}
	if err := ValidateOptions("agent.options", r.Agent.Options, agent); err != nil {
		return err
	}
	if err := ValidateClientTools("tools", r.Tools, r.Agent.Tools, agent); err != nil {
		return err
	}
	return validateSeed(r.Messages, agent)
}

// ValidateTurn checks the parts of a POST /sessions/:id/turns body that do
// not depend on the session's pending tool calls (see ResolveToolCalls):
// agent is the session's agent, and serverTools its currently enabled tools.
// A refusal names the members of the body a turn request does not have
// ({"message": ...}: did you mean "messages"?).
func ValidateTurn(r TurnRequest, agentName string, serverTools []ServerToolRef, agent AgentInfo) error {
	return r.unknown.explain(validateTurn(r, agentName, serverTools, agent), "a turn request", &TurnRequest{})
}

func validateTurn(r TurnRequest, agentName string, serverTools []ServerToolRef, agent AgentInfo) error {
	switch r.Mode() {
	case StreamNone, StreamDelta, StreamMessage:
		if !agent.SupportsStream(r.Mode()) {
			return errorf("stream", "agent %q does not support stream mode %q", agent.Name, r.Stream)
		}
	default:
		return errorf("stream", `unknown stream mode %q (want "none", "delta" or "message")`, r.Stream)
	}
	if r.Agent != nil {
		if r.Agent.Name != nil && *r.Agent.Name != agentName {
			return errorf("agent.name", "the agent of a session cannot change (session uses %q)", agentName)
		}
		if r.Agent.Tools != nil {
			if err := validateToolRefs("agent.tools", r.Agent.Tools, agent); err != nil {
				return err
			}
			serverTools = r.Agent.Tools
		}
		if err := ValidateOptions("agent.options", r.Agent.Options, agent); err != nil {
			return err
		}
	}
	if r.Tools != nil {
		if err := ValidateClientTools("tools", r.Tools, serverTools, agent); err != nil {
			return err
		}
	}
	if len(r.Messages) == 0 {
		return errorf("messages", "at least one message is required")
	}
	seen := map[string]bool{}
	for i, m := range r.Messages {
		field := fmt.Sprintf("messages[%d]", i)
		switch m.Role {
		case RoleUser:
			if len(r.Messages) != 1 {
				return errorf(field, "a user message must be sent alone: a turn is a single user message, or tool results and permissions")
			}
		case RoleTool, RoleToolPermission:
			if seen[m.ToolCallID] {
				return errorf(field+".toolCallId", "tool call %q is answered twice", m.ToolCallID)
			}
			seen[m.ToolCallID] = true
		default:
			return errorf(field+".role", "a turn may only carry user, tool and tool_permission messages, not %q", m.Role)
		}
		if err := validateContent(field, m, agent); err != nil {
			return err
		}
	}
	return nil
}

// ValidateOptions checks option values against the agent's declared options.
func ValidateOptions(field string, opts map[string]string, agent AgentInfo) error {
	for name, v := range opts {
		o, ok := agent.Option(name)
		if !ok {
			return errorf(field+"."+name, "agent %q has no option %q%s", agent.Name, name, declared(optionNames(agent)))
		}
		if o.Type == OptionSelect && !contains(o.Options, v) {
			return errorf(field+"."+name, "%q is not one of %s", v, quoteList(o.Options))
		}
	}
	return nil
}

// ValidateClientTools checks client tool declarations: allowed by the agent,
// valid unique names, none clashing with an enabled server tool.
func ValidateClientTools(field string, tools []ToolSpec, serverTools []ServerToolRef, agent AgentInfo) error {
	if len(tools) > 0 && !agent.AcceptsClientTools() {
		return errorf(field, "agent %q does not accept client-side tools", agent.Name)
	}
	seen := map[string]bool{}
	for i, t := range tools {
		f := fmt.Sprintf("%s[%d].name", field, i)
		if !ValidToolName(t.Name) {
			return errorf(f, "%q is not a valid tool name (%s)", t.Name, ToolNameRule)
		}
		if seen[t.Name] {
			return errorf(f, "tool %q is declared twice", t.Name)
		}
		seen[t.Name] = true
		for _, s := range serverTools {
			if s.Name == t.Name {
				return errorf(f, "tool %q clashes with the enabled server tool of the same name", t.Name)
			}
		}
	}
	return nil
}

// ValidateServerTools checks that enabling the server tools refs keeps
// every tool name unique across the session's client tools and its server
// tools, as the specification requires: it is the check of
// ValidateClientTools seen from agent.tools, for a turn that changes
// agent.tools without sending tools.
func ValidateServerTools(field string, refs []ServerToolRef, clientTools []ToolSpec) error {
	for i, ref := range refs {
		for _, t := range clientTools {
			if t.Name == ref.Name {
				return errorf(fmt.Sprintf("%s[%d].name", field, i), "server tool %q clashes with the session's client tool of the same name: rename the client tool (send tools) or leave the server tool off", ref.Name)
			}
		}
	}
	return nil
}

func validateToolRefs(field string, refs []ServerToolRef, agent AgentInfo) error {
	seen := map[string]bool{}
	for i, ref := range refs {
		f := fmt.Sprintf("%s[%d].name", field, i)
		if _, ok := agent.Tool(ref.Name); !ok {
			names := make([]string, len(agent.Tools))
			for j, t := range agent.Tools {
				names[j] = t.Name
			}
			return errorf(f, "agent %q has no server tool %q%s", agent.Name, ref.Name, declared(names))
		}
		if seen[ref.Name] {
			return errorf(f, "server tool %q is listed twice", ref.Name)
		}
		seen[ref.Name] = true
	}
	return nil
}

// validateSeed checks seed history: allowed roles, well-formed content, and
// that every tool result answers a call of the assistant message before it,
// with all calls answered before the conversation moves on (the seed may end
// with calls still pending).
func validateSeed(msgs []Message, agent AgentInfo) error {
	open := map[string]bool{} // calls of the last assistant message, unanswered
	seen := map[string]bool{} // every tool call id so far
	for i, m := range msgs {
		field := fmt.Sprintf("messages[%d]", i)
		switch m.Role {
		case RoleSystem, RoleUser, RoleAssistant:
			if len(open) > 0 {
				return errorf(field, "tool call %s has no result before this message", firstKey(open))
			}
		case RoleTool:
			if !open[m.ToolCallID] {
				return errorf(field+".toolCallId", "no pending tool call %q precedes this result", m.ToolCallID)
			}
			delete(open, m.ToolCallID)
		default:
			return errorf(field+".role", "seed history may only hold system, user, assistant and tool messages, not %q", m.Role)
		}
		if err := validateContent(field, m, agent); err != nil {
			return err
		}
		for _, c := range m.ToolCalls() {
			if seen[c.ToolCallID] {
				return errorf(field+".content", "tool call id %q is used twice", c.ToolCallID)
			}
			seen[c.ToolCallID] = true
			open[c.ToolCallID] = true
		}
	}
	return nil
}

// allowedBlocks lists the content block types each role may carry. The
// specification allows any block in any message's content; tool_use stays
// the assistant's, since a tool call in another's message could be neither
// run nor answered.
var allowedBlocks = map[Role][]string{
	RoleUser:      {BlockText, BlockThinking, BlockImage},
	RoleAssistant: {BlockText, BlockThinking, BlockToolUse, BlockImage},
	RoleTool:      {BlockText, BlockThinking, BlockImage},
}

func validateContent(field string, m Message, agent AgentInfo) error {
	for j, b := range m.Content.Blocks {
		f := fmt.Sprintf("%s.content[%d]", field, j)
		if !contains(allowedBlocks[m.Role], b.Type) {
			return errorf(f+".type", "a %s message cannot hold a %q block", m.Role, b.Type)
		}
		if b.Type == BlockImage {
			if imageScheme(b.URL) == "" {
				return errorf(f+".url", "an image url must be https:// or a data:image/...;base64, URI (the specification's two kinds; a data: URI that is not base64 is not one of them)")
			}
			if !agent.AcceptsImage(b.URL) {
				return errorf(f+".url", "agent %q does not accept %s images", agent.Name, imageScheme(b.URL))
			}
		}
		if b.Type == BlockToolUse && !ValidToolName(b.Name) {
			return errorf(f+".name", "%q is not a valid tool name (%s)", b.Name, ToolNameRule)
		}
	}
	return nil
}

// imageScheme returns "https" or "data" for a usable image URL, else "".
// Schemes and media types are case-insensitive (RFC 3986, RFC 2397), so
// HTTPS:// is https://. A data: URI must be base64, the only kind the
// specification names ("data: URIs (base64)").
func imageScheme(url string) string {
	switch {
	case hasPrefixFold(url, "https://") && len(url) > len("https://"):
		return "https"
	case hasPrefixFold(url, "data:image/"):
		meta, _, ok := strings.Cut(url, ",")
		if ok && len(meta) > len(";base64") && strings.EqualFold(meta[len(meta)-len(";base64"):], ";base64") {
			return "data"
		}
	}
	return ""
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

func optionNames(a AgentInfo) []string {
	names := make([]string, len(a.Options))
	for i, o := range a.Options {
		names[i] = o.Name
	}
	return names
}

func declared(names []string) string {
	if len(names) == 0 {
		return " (it declares none)"
	}
	return " (it declares " + quoteList(names) + ")"
}

func quoteList(s []string) string {
	q := make([]string, len(s))
	for i, v := range s {
		q[i] = fmt.Sprintf("%q", v)
	}
	return strings.Join(q, ", ")
}

func contains(list []string, v string) bool {
	for _, s := range list {
		if s == v {
			return true
		}
	}
	return false
}

func firstKey(m map[string]bool) string {
	best := ""
	for k := range m {
		if best == "" || k < best {
			best = k
		}
	}
	return fmt.Sprintf("%q", best)
}
