package openai

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/agents"
	"github.com/aapd/aapd/store"
)

// ServerLabel is the server_label of the mcp_call items that show aapd's
// own server tools: calls the server ran, which a client must not run.
const ServerLabel = "aapd"

// Item is one item of a conversation or of a response's output, as the
// Responses and Conversations APIs have it: only the members of its Type
// are written.
type Item struct {
	ID     string `json:"id,omitempty"`
	Type   string `json:"type"`
	Status string `json:"status,omitempty"`

	// message
	Role    string `json:"role,omitempty"`
	Content []Part `json:"content,omitempty"`

	// reasoning
	Summary *[]Part `json:"summary,omitempty"`

	// function_call, function_call_output, mcp_call, mcp_approval_request
	CallID    string  `json:"call_id,omitempty"`
	Name      string  `json:"name,omitempty"`
	Arguments *string `json:"arguments,omitempty"`
	Output    *string `json:"output,omitempty"`

	// mcp_call, mcp_approval_request
	ServerLabel string  `json:"server_label,omitempty"`
	Error       *string `json:"error,omitempty"`
}

// MarshalJSON writes the item; a message has its content, empty or not
// (the SDKs' stream helpers add parts to it).
func (it Item) MarshalJSON() ([]byte, error) {
	type plain Item
	b, err := json.Marshal(plain(it))
	if err != nil || it.Type != typeMessage || len(it.Content) > 0 {
		return b, err
	}
	return append(b[:len(b)-1], `,"content":[]}`...), nil
}

// Part is a part of a message's content (input_text, output_text,
// input_image) or a reasoning summary (summary_text).
type Part struct {
	Type        string          `json:"type"`
	Text        *string         `json:"text,omitempty"`
	ImageURL    string          `json:"image_url,omitempty"`
	Detail      string          `json:"detail,omitempty"`
	Annotations json.RawMessage `json:"annotations,omitempty"`
	Logprobs    json.RawMessage `json:"logprobs,omitempty"`
}

// Item types.
const (
	typeMessage         = "message"
	typeReasoning       = "reasoning"
	typeFunctionCall    = "function_call"
	typeFunctionOutput  = "function_call_output"
	typeMCPCall         = "mcp_call"
	typeApprovalRequest = "mcp_approval_request"
	typeApproval        = "mcp_approval_response"
)

func textPart(typ, text string) Part {
	p := Part{Type: typ, Text: &text}
	if typ == "output_text" {
		p.Annotations, p.Logprobs = json.RawMessage(`[]`), json.RawMessage(`[]`)
	}
	return p
}

func ptr[T any](v T) *T { return &v }

// Item ids name a message of the session's full history by its seq, and
// the block of an assistant message the item shows by its index:
// msg_<session>_<seq> for a user or system message, <kind>_<session>_<seq>_<block>
// for what an assistant message holds (msg, rs, fc, mcp), fco_<session>_<seq>
// for a function's output. The full history never changes but by
// growing, so an item keeps its id; a compaction changes what the model
// sees, never these.
const (
	idMessage   = "msg"
	idReasoning = "rs"
	idCall      = "fc"
	idOutput    = "fco"
	idMCP       = "mcp"
	idApproval  = "mcpr"
)

func itemID(kind, sessionHex string, seq int64, block int) string {
	id := kind + "_" + sessionHex + "_" + strconv.FormatInt(seq, 10)
	if block >= 0 {
		id += "_" + strconv.Itoa(block)
	}
	return id
}

// parseItemID returns the seq an item id names, if it is one of the
// session's.
func parseItemID(id, sessionHex string) (seq int64, ok bool) {
	parts := strings.Split(id, "_")
	if len(parts) < 3 || len(parts) > 4 || parts[1] != sessionHex {
		return 0, false
	}
	n, err := strconv.ParseInt(parts[2], 10, 64)
	return n, err == nil && n > 0
}

// translator turns stored messages into items. serverTool tells the calls
// of aapd's server tools (mcp_call items, with their results) from the
// calls of the client's functions (function_call items).
type translator struct {
	sessionHex string
	serverTool func(name string) bool
	// results are the results of server tools' calls, by call id: an
	// mcp_call carries its output.
	results map[string]aap.Content
	// pending are the calls the session waits on the client for; a
	// server tool's call among them asks for approval.
	pending map[string]bool
}

func newTranslator(sess store.Session, agent *agents.Agent) *translator {
	t := &translator{sessionHex: hexOf(sess.ID), results: map[string]aap.Content{}, pending: map[string]bool{}}
	client := map[string]bool{}
	for _, c := range sess.ClientTools {
		client[c.Name] = true
	}
	t.serverTool = func(name string) bool { return !client[name] && agent != nil && agent.HasTool(name) }
	for _, p := range sess.AwaitingClient() {
		t.pending[p.ToolCallID] = true
	}
	return t
}

// see records the results of server tools' calls among msgs, which the
// items of the calls show.
func (t *translator) see(msgs []store.StoredMessage) {
	for _, m := range msgs {
		if m.Message.Role == aap.RoleTool {
			t.results[m.Message.ToolCallID] = m.Message.Content
		}
	}
}

// serverCalls returns the ids of the server tools' calls among msgs.
func (t *translator) serverCalls(msgs []store.StoredMessage) map[string]bool {
	out := map[string]bool{}
	for _, m := range msgs {
		for _, c := range m.Message.ToolCalls() {
			if t.serverTool(c.Name) {
				out[c.ToolCallID] = true
			}
		}
	}
	return out
}

// items translates messages in order; call see first with every message
// whose results the calls may need.
func (t *translator) items(msgs []store.StoredMessage, server map[string]bool) []Item {
	var out []Item
	for _, m := range msgs {
		out = append(out, t.message(m, server)...)
	}
	return out
}

// message translates one stored message.
func (t *translator) message(sm store.StoredMessage, server map[string]bool) []Item {
	m := sm.Message
	switch m.Role {
	case aap.RoleUser, aap.RoleSystem:
		return []Item{{ID: itemID(idMessage, t.sessionHex, sm.Seq, -1), Type: typeMessage, Status: "completed",
			Role: string(m.Role), Content: inputParts(m.Content)}}
	case aap.RoleTool:
		if server[m.ToolCallID] {
			return nil // shown by its call's mcp_call
		}
		out := m.Content.PlainText()
		return []Item{{ID: itemID(idOutput, t.sessionHex, sm.Seq, -1), Type: typeFunctionOutput, Status: "completed",
			CallID: m.ToolCallID, Output: &out}}
	case aap.RoleAssistant:
	default:
		return nil
	}
	var out []Item
	var text *Item
	for i, b := range m.Content.AsBlocks() {
		switch b.Type {
		case aap.BlockText:
			if text == nil {
				out = append(out, Item{ID: itemID(idMessage, t.sessionHex, sm.Seq, i), Type: typeMessage, Status: "completed",
					Role: "assistant", Content: []Part{}})
				text = &out[len(out)-1]
			}
			text.Content = append(text.Content, textPart("output_text", b.Text))
			continue
		case aap.BlockThinking:
			out = append(out, Item{ID: itemID(idReasoning, t.sessionHex, sm.Seq, i), Type: typeReasoning,
				Summary: &[]Part{textPart("summary_text", b.Thinking)}})
		case aap.BlockToolUse:
			out = append(out, t.call(b.ToolCall(), sm.Seq, i))
		}
		text = nil
	}
	return out
}

// call is a tool call's item: an mcp_call for a server tool's (its
// output, or an approval request while it waits for one), a
// function_call for a client function's.
func (t *translator) call(c aap.ToolCall, seq int64, block int) Item {
	args := string(inputOf(c))
	if !t.serverTool(c.Name) {
		return Item{ID: itemID(idCall, t.sessionHex, seq, block), Type: typeFunctionCall, Status: "completed",
			CallID: c.ToolCallID, Name: c.Name, Arguments: &args}
	}
	res, done := t.results[c.ToolCallID]
	if !done && t.pending[c.ToolCallID] {
		return Item{ID: approvalID(c.ToolCallID), Type: typeApprovalRequest, Name: c.Name, Arguments: &args, ServerLabel: ServerLabel}
	}
	item := Item{ID: itemID(idMCP, t.sessionHex, seq, block), Type: typeMCPCall, Status: "completed", Name: c.Name,
		Arguments: &args, ServerLabel: ServerLabel}
	switch out := res.PlainText(); {
	case !done:
		item.Status = "in_progress"
	case failedResult(out):
		item.Status, item.Error = "failed", &out
	default:
		item.Output = &out
	}
	return item
}

// approvalID is the id of the approval request of a server tool's call:
// the call's id, which the client's mcp_approval_response names.
func approvalID(callID string) string { return idApproval + "_" + callID }

// failedResult tells a tool result that reports a failure: the texts
// aapd writes for calls that did not run.
func failedResult(output string) bool {
	for _, prefix := range []string{agents.DeniedToolCallText, agents.CancelledToolCallText, agents.InterruptedToolCallText} {
		if strings.HasPrefix(output, prefix) {
			return true
		}
	}
	return false
}

// inputParts is a user or system message's content as parts.
func inputParts(c aap.Content) []Part {
	if !c.IsBlocks() {
		return []Part{textPart("input_text", c.Text)}
	}
	out := []Part{}
	for _, b := range c.Blocks {
		switch b.Type {
		case aap.BlockText:
			out = append(out, textPart("input_text", b.Text))
		case aap.BlockImage:
			out = append(out, Part{Type: "input_image", ImageURL: b.URL, Detail: "auto"})
		}
	}
	return out
}

// inputOf is a call's input as JSON text ({} for none).
func inputOf(c aap.ToolCall) json.RawMessage {
	if len(c.Input) == 0 || string(c.Input) == "null" {
		return json.RawMessage(`{}`)
	}
	return c.Input
}

// hexOf is the hex of an aapd id (sess_…, turn_…).
func hexOf(id string) string {
	if i := strings.IndexByte(id, '_'); i >= 0 {
		return id[i+1:]
	}
	return id
}

// inputItem is an item of a request's input or of items added to a
// conversation: a message (with or without "type", as the Agents SDK
// sends them), a function call or its output, an approval.
type inputItem struct {
	Type    string          `json:"type"`
	ID      string          `json:"id"`
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`

	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Arguments string          `json:"arguments"`
	Output    json.RawMessage `json:"output"`

	ApprovalRequestID string  `json:"approval_request_id"`
	Approve           *bool   `json:"approve"`
	Reason            *string `json:"reason"`

	Summary []struct {
		Text string `json:"text"`
	} `json:"summary"`
}

// inputPart is a part of an input message's content.
type inputPart struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	Refusal  string `json:"refusal"`
	ImageURL string `json:"image_url"`
}

// toMessages turns input items into AAP messages, field naming the member
// they came from (input, items). What an assistant said — its messages,
// reasoning, function calls — in a row is one assistant message.
func toMessages(field string, items []inputItem) ([]aap.Message, error) {
	var out []aap.Message
	var assistant *aap.Message
	addBlock := func(b aap.ContentBlock) {
		if assistant == nil {
			out = append(out, aap.AssistantMessage())
			assistant = &out[len(out)-1]
		}
		assistant.Content.Blocks = append(assistant.Content.Blocks, b)
	}
	for i, it := range items {
		f := fmt.Sprintf("%s[%d]", field, i)
		switch it.Type {
		case "", typeMessage:
			parts, err := contentParts(f+".content", it.Content)
			if err != nil {
				return nil, err
			}
			switch it.Role {
			case "assistant":
				for _, p := range parts {
					if p.Type == aap.BlockText {
						addBlock(p)
					}
				}
				continue
			case "user":
				m := aap.Message{Role: aap.RoleUser, Content: aap.BlockContent(parts...)}
				if len(parts) == 1 && parts[0].Type == aap.BlockText {
					m.Content = aap.TextContent(parts[0].Text)
				}
				out = append(out, m)
			case "system", "developer":
				var text []string
				for _, p := range parts {
					if p.Type != aap.BlockText {
						return nil, invalid(f+".content", "a %s message holds text only", it.Role)
					}
					text = append(text, p.Text)
				}
				out = append(out, aap.SystemMessage(strings.Join(text, "\n")))
			default:
				return nil, invalid(f+".role", "must be user, assistant, system or developer, not %q", it.Role)
			}
		case typeReasoning:
			var text []string
			for _, s := range it.Summary {
				text = append(text, s.Text)
			}
			if len(text) > 0 {
				addBlock(aap.ThinkingBlock(strings.Join(text, "\n")))
			}
			continue
		case typeFunctionCall:
			if it.CallID == "" || it.Name == "" {
				return nil, invalid(f, "a function_call needs call_id and name")
			}
			args := json.RawMessage(it.Arguments)
			if strings.TrimSpace(it.Arguments) == "" {
				args = json.RawMessage(`{}`)
			}
			if !json.Valid(args) {
				return nil, invalid(f+".arguments", "must be JSON text")
			}
			addBlock(aap.ToolUseBlock(aap.ToolCall{ToolCallID: it.CallID, Name: it.Name, Input: args}))
			continue
		case typeFunctionOutput:
			if it.CallID == "" {
				return nil, invalid(f+".call_id", "required")
			}
			text, err := outputText(f+".output", it.Output)
			if err != nil {
				return nil, err
			}
			out = append(out, aap.ToolMessage(it.CallID, text))
		case typeApproval:
			id, ok := strings.CutPrefix(it.ApprovalRequestID, idApproval+"_")
			if !ok || it.Approve == nil {
				return nil, invalid(f, "an mcp_approval_response names the approval_request_id of an mcp_approval_request (mcpr_…) and says approve")
			}
			m := aap.Message{Role: aap.RoleToolPermission, ToolCallID: id, Granted: *it.Approve}
			if it.Reason != nil {
				m.Reason = *it.Reason
			}
			out = append(out, m)
		default:
			return nil, invalid(f+".type", "aapd takes message, function_call, function_call_output, reasoning and mcp_approval_response items, not %q", it.Type)
		}
		assistant = nil
	}
	return out, nil
}

// contentParts reads a message's content: a string, or parts.
func contentParts(field string, raw json.RawMessage) ([]aap.ContentBlock, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return []aap.ContentBlock{aap.TextBlock(s)}, nil
	}
	var parts []inputPart
	if err := json.Unmarshal(raw, &parts); err != nil {
		return nil, invalid(field, "must be a string or a list of content parts")
	}
	var out []aap.ContentBlock
	for i, p := range parts {
		switch p.Type {
		case "input_text", "output_text", "text":
			out = append(out, aap.TextBlock(p.Text))
		case "refusal":
			out = append(out, aap.TextBlock(p.Refusal))
		case "input_image":
			if p.ImageURL == "" {
				return nil, invalid(fmt.Sprintf("%s[%d].image_url", field, i), "aapd takes images by URL (https: or data:), not by file id")
			}
			out = append(out, aap.ContentBlock{Type: aap.BlockImage, URL: p.ImageURL})
		default:
			return nil, invalid(fmt.Sprintf("%s[%d].type", field, i), "aapd takes input_text, output_text, refusal and input_image parts, not %q", p.Type)
		}
	}
	if len(out) == 0 {
		return nil, invalid(field, "must not be empty")
	}
	return out, nil
}

// outputText reads a function's output: a string, or text parts.
func outputText(field string, raw json.RawMessage) (string, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	blocks, err := contentParts(field, raw)
	if err != nil {
		return "", err
	}
	var text []string
	for _, b := range blocks {
		if b.Type == aap.BlockText {
			text = append(text, b.Text)
		}
	}
	return strings.Join(text, ""), nil
}
