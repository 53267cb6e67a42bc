package agui

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/aapd/aapd/aap"
)

// issuedPattern is the form of the message ids aapd gives what its agents
// produce in a run's events (translator.newID): the turn's id, '-', a
// number. A message with such an id is the agent's own, already in the
// session's history: it is never stored again, whatever the client's copy
// of it says.
var issuedPattern = regexp.MustCompile(`^turn_[0-9a-f]{32}-[0-9]+$`)

// issued reports whether id is one aapd gave a message of a run.
func issued(id string) bool { return issuedPattern.MatchString(id) }

// plan is what a run adds to its session: the seed of a session created by
// the run, and the turn's messages, each with the client's id.
type plan struct {
	seed    []aap.Message
	seedIDs []string
	turn    []aap.Message
	turnIDs []string
	// seedFields and turnFields name where each message came from in the
	// input ("messages[4]", "resume[0]"), for errors the pipeline reports
	// by the seed's or the turn's own indexes (inputError).
	seedFields, turnFields []string
}

// planRun picks the messages of the thread the session has not stored (not
// aapd's own, not among stored ids) and arranges them as AAP wants them. A
// new session (fresh) takes the thread's start as its seed and the last user
// message, or the trailing tool results, as its first turn; a stored
// session takes one user message or tool results per run. Resume entries
// become permissions (interrupt.go); context goes with the user message.
func planRun(in RunAgentInput, stored map[string]bool, fresh bool) (plan, error) {
	type incoming struct {
		index int
		id    string
		msg   aap.Message
	}
	var news []incoming
	for i, m := range in.Messages {
		if issued(m.ID) || stored[m.ID] || m.Role == RoleActivity || m.Role == RoleReasoning {
			continue
		}
		msg, err := toAAP(fmt.Sprintf("messages[%d]", i), m)
		if err != nil {
			return plan{}, err
		}
		news = append(news, incoming{index: i, id: m.ID, msg: msg})
	}

	// The turn: the last user message, or the trailing tool results.
	start := len(news)
	switch {
	case start > 0 && news[start-1].msg.Role == aap.RoleUser:
		start--
	default:
		for start > 0 && news[start-1].msg.Role == aap.RoleTool {
			start--
		}
	}
	var p plan
	for _, n := range news[:start] {
		if !fresh {
			return plan{}, &aap.Error{Field: fmt.Sprintf("messages[%d]", n.index), Msg: fmt.Sprintf(
				"message %q is new to the thread but is not its last user message or one of its last tool results: "+
					"after a thread's first run, a run adds one user message, or tool results, at the end of the thread", n.id)}
		}
		p.seed, p.seedIDs = append(p.seed, n.msg), append(p.seedIDs, n.id)
		p.seedFields = append(p.seedFields, fmt.Sprintf("messages[%d]", n.index))
	}
	for _, n := range news[start:] {
		p.turn, p.turnIDs = append(p.turn, n.msg), append(p.turnIDs, n.id)
		p.turnFields = append(p.turnFields, fmt.Sprintf("messages[%d]", n.index))
	}
	if len(p.turn) == 1 && p.turn[0].Role == aap.RoleUser {
		p.turn[0] = withContext(p.turn[0], in.Context)
	}
	perms, err := permissions(in.Resume)
	if err != nil {
		return plan{}, err
	}
	if len(perms) > 0 && len(p.turn) == 1 && p.turn[0].Role == aap.RoleUser {
		return plan{}, &aap.Error{Field: "resume", Msg: "a run answers its interrupts or sends a user message, not both"}
	}
	for i, perm := range perms {
		p.turn, p.turnIDs = append(p.turn, perm), append(p.turnIDs, "")
		p.turnFields = append(p.turnFields, fmt.Sprintf("resume[%d]", i))
	}
	if len(p.turn) == 0 {
		return plan{}, &aap.Error{Field: "messages", Msg: "the thread has nothing new to run on: a run needs a new user message, " +
			"or the results of the pending tool calls, at the end of the thread (messages aapd stored or produced are not run again)"}
	}
	return p, nil
}

// turnMessageField matches the field of an error about a turn's message.
var turnMessageField = regexp.MustCompile(`^messages\[(\d+)\]`)

// inputError renames the field of a pipeline's error about the messages
// of the turn (or, given the seed's fields, of the seed) after the input
// member each came from: the turn's messages[0] may be the thread's
// messages[6], or a resume entry.
func inputError(err error, fields []string) error {
	var e *aap.Error
	if !errors.As(err, &e) {
		return err
	}
	if strings.HasPrefix(e.Field, "agent.") {
		return &aap.Error{Field: "forwardedProps." + e.Field, Msg: e.Msg}
	}
	m := turnMessageField.FindStringSubmatch(e.Field)
	if m == nil {
		return err
	}
	i, _ := strconv.Atoi(m[1])
	if i >= len(fields) {
		return err
	}
	field := fields[i] + strings.TrimPrefix(e.Field, m[0])
	if strings.HasPrefix(field, "resume[") {
		field = strings.SplitN(field, ".", 2)[0] + ".interruptId"
	}
	return &aap.Error{Field: field, Msg: e.Msg}
}

// toAAP converts one AG-UI message; field names it in errors.
func toAAP(field string, m Message) (aap.Message, error) {
	switch m.Role {
	case RoleUser:
		c, err := content(field+".content", m.Content)
		return aap.Message{Role: aap.RoleUser, Content: c}, err
	case RoleSystem, RoleDeveloper:
		var s string
		if err := json.Unmarshal(m.Content, &s); err != nil {
			return aap.Message{}, &aap.Error{Field: field + ".content", Msg: "must be a string"}
		}
		return aap.SystemMessage(s), nil
	case RoleAssistant:
		return assistant(field, m)
	case RoleTool:
		if m.ToolCallID == "" {
			return aap.Message{}, &aap.Error{Field: field + ".toolCallId", Msg: "required"}
		}
		c, err := content(field+".content", m.Content)
		if err != nil {
			return aap.Message{}, err
		}
		if m.Error != nil && *m.Error != "" {
			c = withError(c, *m.Error)
		}
		return aap.Message{Role: aap.RoleTool, ToolCallID: m.ToolCallID, Content: c}, nil
	}
	return aap.Message{}, &aap.Error{Field: field + ".role", Msg: fmt.Sprintf("role %q is not stored", m.Role)}
}

// assistant converts an assistant message the client wrote (in the seed of
// a new thread): its text, then its tool calls.
func assistant(field string, m Message) (aap.Message, error) {
	var text string
	if len(m.Content) > 0 && string(m.Content) != "null" {
		if err := json.Unmarshal(m.Content, &text); err != nil {
			return aap.Message{}, &aap.Error{Field: field + ".content", Msg: "must be a string"}
		}
	}
	if len(m.ToolCalls) == 0 {
		return aap.Message{Role: aap.RoleAssistant, Content: aap.TextContent(text)}, nil
	}
	var blocks []aap.ContentBlock
	if text != "" {
		blocks = append(blocks, aap.TextBlock(text))
	}
	for i, c := range m.ToolCalls {
		f := fmt.Sprintf("%s.toolCalls[%d]", field, i)
		if c.ID == "" || c.Function.Name == "" {
			return aap.Message{}, &aap.Error{Field: f, Msg: "a tool call needs an id and a function name"}
		}
		args := json.RawMessage(strings.TrimSpace(c.Function.Arguments))
		if len(args) == 0 {
			args = json.RawMessage(`{}`)
		}
		var obj map[string]any
		if json.Unmarshal(args, &obj) != nil || obj == nil {
			return aap.Message{}, &aap.Error{Field: f + ".function.arguments", Msg: "must be a JSON object, as text"}
		}
		var buf bytes.Buffer
		_ = json.Compact(&buf, args)
		blocks = append(blocks, aap.ToolUseBlock(aap.ToolCall{ToolCallID: c.ID, Name: c.Function.Name, Input: buf.Bytes()}))
	}
	return aap.AssistantMessage(blocks...), nil
}

// content converts a string or an array of parts: text and images (an
// image's url or inline data).
func content(field string, raw json.RawMessage) (aap.Content, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return aap.Content{}, &aap.Error{Field: field, Msg: "required"}
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return aap.TextContent(s), nil
	}
	var parts []part
	if err := json.Unmarshal(raw, &parts); err != nil {
		return aap.Content{}, &aap.Error{Field: field, Msg: "must be a string or an array of content parts"}
	}
	blocks := make([]aap.ContentBlock, 0, len(parts))
	for i, p := range parts {
		f := fmt.Sprintf("%s[%d]", field, i)
		switch {
		case p.Type == "text":
			blocks = append(blocks, aap.TextBlock(p.Text))
		case p.Type == "image" && p.Source != nil && p.Source.Type == "url":
			blocks = append(blocks, aap.ContentBlock{Type: aap.BlockImage, URL: p.Source.Value})
		case p.Type == "image" && p.Source != nil && p.Source.Type == "data":
			blocks = append(blocks, aap.ContentBlock{Type: aap.BlockImage, URL: "data:" + p.Source.MimeType + ";base64," + p.Source.Value})
		case p.Type == "image":
			return aap.Content{}, &aap.Error{Field: f + ".source", Msg: `an image's source must be "url" or "data" (aapd cannot read a provider's file handle)`}
		default:
			return aap.Content{}, &aap.Error{Field: f + ".type", Msg: fmt.Sprintf("aapd's agents take text and image parts, not %q", p.Type)}
		}
	}
	return aap.BlockContent(blocks...), nil
}

// withError adds a failed tool's error to what it returned, so the model
// sees both.
func withError(c aap.Content, msg string) aap.Content {
	note := "Error: " + msg
	if !c.IsBlocks() {
		if c.Text == "" {
			return aap.TextContent(note)
		}
		return aap.TextContent(c.Text + "\n" + note)
	}
	return aap.BlockContent(append(c.Blocks, aap.TextBlock(note))...)
}

// ContextHeading introduces the run's context in the user message the
// model sees.
const ContextHeading = "Context from the application:"

// withContext adds the run's context entries to its user message, as a
// last text block: AG-UI's context is information for the agent, and the
// user message is where a turn carries it. It is stored with the message,
// so the history shows what the model was told.
func withContext(m aap.Message, ctx []Context) aap.Message {
	if len(ctx) == 0 {
		return m
	}
	var b strings.Builder
	b.WriteString(ContextHeading)
	for _, c := range ctx {
		fmt.Fprintf(&b, "\n- %s: %s", c.Description, c.Value)
	}
	blocks := m.Content.AsBlocks()
	m.Content = aap.BlockContent(append(blocks[:len(blocks):len(blocks)], aap.TextBlock(b.String()))...)
	return m
}
