package agents

import (
	"fmt"
	"hash/fnv"
	"regexp"
	"strings"

	"github.com/aapd/aapd/aap"
)

// providerToolName is the form of a tool name every supported model
// provider accepts (OpenAI's and Anthropic's function names). AAP tool
// names may be wider (aap.ValidToolName: '.' and up to 128 characters), so
// the names of a model call are mapped to this form on the way to the
// model and back.
var providerToolName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// toolNames maps the tool names of one model call that a provider would
// refuse to names it accepts, and back. The mapping is a function of the
// names alone, so the same name maps alike in every call; a name that is
// already acceptable is never mapped, and no mapped name equals another
// name of the call.
type toolNames struct {
	toProvider   map[string]string
	fromProvider map[string]string
}

// newToolNames builds the mapping for a call's tools and history.
func newToolNames(req ModelRequest) toolNames {
	var odd []string
	taken := map[string]bool{}
	note := func(name string) {
		if taken[name] {
			return
		}
		taken[name] = true
		if !providerToolName.MatchString(name) {
			odd = append(odd, name)
		}
	}
	for _, t := range req.Tools {
		note(t.Name)
	}
	for _, m := range req.Messages {
		for _, c := range m.ToolCalls() {
			note(c.Name)
		}
	}
	if len(odd) == 0 {
		return toolNames{}
	}
	n := toolNames{toProvider: map[string]string{}, fromProvider: map[string]string{}}
	for _, name := range odd {
		safe := providerSafe(name, 0)
		for i := 1; taken[safe]; i++ {
			safe = providerSafe(name, i)
		}
		taken[safe] = true
		n.toProvider[name], n.fromProvider[safe] = safe, name
	}
	return n
}

// providerSafe is name with every character a provider refuses replaced by
// '_', cut to leave room for a suffix that tells apart names that differ
// only in those characters (a hash of the name, and attempt when it is not
// the first).
func providerSafe(name string, attempt int) string {
	var b strings.Builder
	for _, r := range name {
		if r < 128 && (r == '_' || r == '-' || ('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z') || ('0' <= r && r <= '9')) {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	h := fnv.New32a()
	h.Write([]byte(name))
	suffix := fmt.Sprintf("_%08x", h.Sum32())
	if attempt > 0 {
		suffix += fmt.Sprintf("_%d", attempt)
	}
	base := b.String()
	if len(base) > 64-len(suffix) {
		base = base[:64-len(suffix)]
	}
	return base + suffix
}

// request returns req with the tools' names and the history's tool calls
// mapped; req itself is not changed.
func (n toolNames) request(req ModelRequest) ModelRequest {
	if len(n.toProvider) == 0 {
		return req
	}
	tools := make([]aap.ToolSpec, len(req.Tools))
	for i, t := range req.Tools {
		t.Name = n.mapName(n.toProvider, t.Name)
		tools[i] = t
	}
	req.Tools = tools
	if tc := req.ToolChoice; tc != nil && tc.Name != "" {
		req.ToolChoice = &ToolChoice{Name: n.mapName(n.toProvider, tc.Name)}
	}
	msgs := make([]Message, len(req.Messages))
	for i, m := range req.Messages {
		msgs[i] = Message{Message: n.message(n.toProvider, m.Message), Extra: m.Extra}
	}
	req.Messages = msgs
	return req
}

// response maps the tool calls of a model's answer back to AAP names.
func (n toolNames) response(resp ModelResponse) ModelResponse {
	if len(n.fromProvider) == 0 {
		return resp
	}
	resp.Message.Message = n.message(n.fromProvider, resp.Message.Message)
	return resp
}

// message maps the names of a message's tool calls through names.
func (n toolNames) message(names map[string]string, m aap.Message) aap.Message {
	if m.Role != aap.RoleAssistant || !m.Content.IsBlocks() {
		return m
	}
	blocks := make([]aap.ContentBlock, len(m.Content.Blocks))
	for i, b := range m.Content.Blocks {
		if b.Type == aap.BlockToolUse {
			b.Name = n.mapName(names, b.Name)
		}
		blocks[i] = b
	}
	m.Content = aap.BlockContent(blocks...)
	return m
}

func (n toolNames) mapName(names map[string]string, name string) string {
	if mapped, ok := names[name]; ok {
		return mapped
	}
	return name
}
