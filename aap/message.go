package aap

import (
	"encoding/json"
	"errors"
	"fmt"
)

// Role names the author of a message.
type Role string

// Message roles. RoleToolPermission only appears in turn requests; it is
// never stored in history.
const (
	RoleSystem         Role = "system"
	RoleUser           Role = "user"
	RoleAssistant      Role = "assistant"
	RoleTool           Role = "tool"
	RoleToolPermission Role = "tool_permission"
)

// Message is any AAP message: a history message (system, user, assistant,
// tool) or a tool permission. Only the fields of its Role are meaningful.
type Message struct {
	Role       Role
	Content    Content // system (string only), user, assistant, tool
	ToolCallID string  // tool, tool_permission
	Granted    bool    // tool_permission
	Reason     string  // tool_permission, optional
}

// SystemMessage returns a system message.
func SystemMessage(text string) Message {
	return Message{Role: RoleSystem, Content: TextContent(text)}
}

// UserMessage returns a user message with string content.
func UserMessage(text string) Message {
	return Message{Role: RoleUser, Content: TextContent(text)}
}

// AssistantMessage returns an assistant message with block content.
func AssistantMessage(blocks ...ContentBlock) Message {
	return Message{Role: RoleAssistant, Content: BlockContent(blocks...)}
}

// ToolMessage returns a tool result message with string content.
func ToolMessage(toolCallID, text string) Message {
	return Message{Role: RoleTool, ToolCallID: toolCallID, Content: TextContent(text)}
}

// ToolCalls returns the tool calls of an assistant message, in order.
func (m Message) ToolCalls() []ToolCall {
	if m.Role != RoleAssistant {
		return nil
	}
	var calls []ToolCall
	for _, b := range m.Content.Blocks {
		if b.Type == BlockToolUse {
			calls = append(calls, b.ToolCall())
		}
	}
	return calls
}

// MarshalJSON writes the message in the shape of its role.
func (m Message) MarshalJSON() ([]byte, error) {
	switch m.Role {
	case RoleSystem, RoleUser, RoleAssistant:
		return json.Marshal(struct {
			Role    Role    `json:"role"`
			Content Content `json:"content"`
		}{m.Role, m.Content})
	case RoleTool:
		return json.Marshal(struct {
			Role       Role    `json:"role"`
			ToolCallID string  `json:"toolCallId"`
			Content    Content `json:"content"`
		}{m.Role, m.ToolCallID, m.Content})
	case RoleToolPermission:
		return json.Marshal(struct {
			Role       Role   `json:"role"`
			ToolCallID string `json:"toolCallId"`
			Granted    bool   `json:"granted"`
			Reason     string `json:"reason,omitempty"`
		}{m.Role, m.ToolCallID, m.Granted, m.Reason})
	}
	return nil, fmt.Errorf("message: unknown role %q", m.Role)
}

// UnmarshalJSON reads a message and checks that it has the fields of its role.
func (m *Message) UnmarshalJSON(data []byte) error {
	var raw struct {
		Role       *Role           `json:"role"`
		Content    json.RawMessage `json:"content"`
		ToolCallID *string         `json:"toolCallId"`
		Granted    *bool           `json:"granted"`
		Reason     *string         `json:"reason"`
	}
	if err := strictObject(data, &raw); err != nil {
		return err
	}
	if raw.Role == nil {
		return errors.New(`"role" is required`)
	}
	*m = Message{Role: *raw.Role}
	switch m.Role {
	case RoleSystem, RoleUser, RoleAssistant, RoleTool:
		if len(raw.Content) == 0 || string(raw.Content) == "null" {
			return fmt.Errorf(`a %q message needs "content"`, m.Role)
		}
		if err := json.Unmarshal(raw.Content, &m.Content); err != nil {
			return fmt.Errorf("content%s", prefixed(err))
		}
		if m.Role == RoleSystem && m.Content.IsBlocks() {
			return errors.New(`content: a "system" message's content must be a string`)
		}
	case RoleToolPermission:
	default:
		return fmt.Errorf(`unknown role %q (want "system", "user", "assistant", "tool" or "tool_permission")`, m.Role)
	}
	if m.Role == RoleTool || m.Role == RoleToolPermission {
		if raw.ToolCallID == nil || *raw.ToolCallID == "" {
			return fmt.Errorf(`a %q message needs a non-empty "toolCallId"`, m.Role)
		}
		m.ToolCallID = *raw.ToolCallID
	}
	if m.Role == RoleToolPermission {
		if raw.Granted == nil {
			return errors.New(`a "tool_permission" message needs a boolean "granted"`)
		}
		m.Granted = *raw.Granted
		if raw.Reason != nil {
			m.Reason = *raw.Reason
		}
	}
	return nil
}

// prefixed formats a nested decoding error after a field name: index errors
// ("[2]: ...") attach directly, others after a colon.
func prefixed(err error) string {
	s := err.Error()
	if len(s) > 0 && s[0] == '[' {
		return s
	}
	return ": " + s
}

// decodeList decodes a JSON array element by element so that an error names
// the element's index (field[3]: ...).
func decodeList[T any](field string, data json.RawMessage, out *[]T) error {
	if len(data) == 0 || string(data) == "null" {
		return nil
	}
	var raws []json.RawMessage
	if err := json.Unmarshal(data, &raws); err != nil {
		return fmt.Errorf("%s: must be of type array, not %s", field, kindOf(data))
	}
	list := make([]T, len(raws))
	for i, r := range raws {
		if err := json.Unmarshal(r, &list[i]); err != nil {
			return fmt.Errorf("%s[%d]%s", field, i, prefixed(err))
		}
	}
	*out = list
	return nil
}
