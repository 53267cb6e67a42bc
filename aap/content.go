package aap

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Content block types.
const (
	BlockText     = "text"
	BlockThinking = "thinking"
	BlockToolUse  = "tool_use"
	BlockImage    = "image"
)

// ContentBlock is one block of a message's content. Only the fields of its
// Type are meaningful; MarshalJSON writes exactly those.
type ContentBlock struct {
	Type string

	Text     string // text
	Thinking string // thinking

	ToolCallID string          // tool_use
	Name       string          // tool_use
	Input      json.RawMessage // tool_use: a JSON object

	URL string // image: https:// or data: URI
}

// TextBlock returns a text content block.
func TextBlock(text string) ContentBlock { return ContentBlock{Type: BlockText, Text: text} }

// ThinkingBlock returns a thinking content block.
func ThinkingBlock(thinking string) ContentBlock {
	return ContentBlock{Type: BlockThinking, Thinking: thinking}
}

// ToolUseBlock returns a tool_use content block for a tool call.
func ToolUseBlock(c ToolCall) ContentBlock {
	return ContentBlock{Type: BlockToolUse, ToolCallID: c.ToolCallID, Name: c.Name, Input: c.Input}
}

// ToolCall returns the tool call of a tool_use block.
func (b ContentBlock) ToolCall() ToolCall {
	return ToolCall{ToolCallID: b.ToolCallID, Name: b.Name, Input: b.Input}
}

// MarshalJSON writes the block in the shape of its type.
func (b ContentBlock) MarshalJSON() ([]byte, error) {
	switch b.Type {
	case BlockText:
		return json.Marshal(struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}{b.Type, b.Text})
	case BlockThinking:
		return json.Marshal(struct {
			Type     string `json:"type"`
			Thinking string `json:"thinking"`
		}{b.Type, b.Thinking})
	case BlockToolUse:
		return json.Marshal(struct {
			Type       string          `json:"type"`
			ToolCallID string          `json:"toolCallId"`
			Name       string          `json:"name"`
			Input      json.RawMessage `json:"input"`
		}{b.Type, b.ToolCallID, b.Name, objectOrEmpty(b.Input)})
	case BlockImage:
		return json.Marshal(struct {
			Type string `json:"type"`
			URL  string `json:"url"`
		}{b.Type, b.URL})
	}
	return nil, fmt.Errorf("content block: unknown type %q", b.Type)
}

// UnmarshalJSON reads a block and checks that it has the fields of its type.
func (b *ContentBlock) UnmarshalJSON(data []byte) error {
	var raw struct {
		Type       *string         `json:"type"`
		Text       *string         `json:"text"`
		Thinking   *string         `json:"thinking"`
		ToolCallID *string         `json:"toolCallId"`
		Name       *string         `json:"name"`
		Input      json.RawMessage `json:"input"`
		URL        *string         `json:"url"`
	}
	if err := strictObject(data, &raw); err != nil {
		return err
	}
	if raw.Type == nil {
		return errors.New(`"type" is required`)
	}
	*b = ContentBlock{Type: *raw.Type}
	switch b.Type {
	case BlockText:
		if raw.Text == nil {
			return errors.New(`a "text" block needs a string "text"`)
		}
		b.Text = *raw.Text
	case BlockThinking:
		if raw.Thinking == nil {
			return errors.New(`a "thinking" block needs a string "thinking"`)
		}
		b.Thinking = *raw.Thinking
	case BlockToolUse:
		if raw.ToolCallID == nil || *raw.ToolCallID == "" {
			return errors.New(`a "tool_use" block needs a non-empty "toolCallId"`)
		}
		if raw.Name == nil || *raw.Name == "" {
			return errors.New(`a "tool_use" block needs a non-empty "name"`)
		}
		if !isJSONObject(raw.Input) {
			return errors.New(`a "tool_use" block needs an object "input"`)
		}
		b.ToolCallID, b.Name, b.Input = *raw.ToolCallID, *raw.Name, compact(raw.Input)
	case BlockImage:
		if raw.URL == nil {
			return errors.New(`an "image" block needs a string "url"`)
		}
		b.URL = *raw.URL
	default:
		return fmt.Errorf(`unknown content block type %q (want "text", "thinking", "tool_use" or "image")`, b.Type)
	}
	return nil
}

// Content is a message's content: either a plain string or an array of
// content blocks. It remembers which form it holds so that a message is
// written back exactly as it was received.
type Content struct {
	Text   string
	Blocks []ContentBlock // non-nil when the content is an array
}

// TextContent returns string content.
func TextContent(s string) Content { return Content{Text: s} }

// BlockContent returns array content holding blocks (an empty array if none).
func BlockContent(blocks ...ContentBlock) Content {
	if blocks == nil {
		blocks = []ContentBlock{}
	}
	return Content{Blocks: blocks}
}

// IsBlocks reports whether the content is an array of blocks.
func (c Content) IsBlocks() bool { return c.Blocks != nil }

// AsBlocks returns the content as blocks; string content becomes one text
// block (none if the string is empty).
func (c Content) AsBlocks() []ContentBlock {
	if c.IsBlocks() {
		return c.Blocks
	}
	if c.Text == "" {
		return nil
	}
	return []ContentBlock{TextBlock(c.Text)}
}

// PlainText joins the text of the content: the string itself, or the text
// blocks' text separated by newlines.
func (c Content) PlainText() string {
	if !c.IsBlocks() {
		return c.Text
	}
	var parts []string
	for _, b := range c.Blocks {
		if b.Type == BlockText {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// MarshalJSON writes a string or an array.
func (c Content) MarshalJSON() ([]byte, error) {
	if c.IsBlocks() {
		return json.Marshal(c.Blocks)
	}
	return json.Marshal(c.Text)
}

// UnmarshalJSON reads a string or an array of blocks.
func (c *Content) UnmarshalJSON(data []byte) error {
	data = bytes.TrimSpace(data)
	switch {
	case len(data) > 0 && data[0] == '"':
		*c = Content{}
		return json.Unmarshal(data, &c.Text)
	case len(data) > 0 && data[0] == '[':
		var raws []json.RawMessage
		if err := json.Unmarshal(data, &raws); err != nil {
			return err
		}
		blocks := make([]ContentBlock, len(raws))
		for i, r := range raws {
			if err := json.Unmarshal(r, &blocks[i]); err != nil {
				return fmt.Errorf("[%d]: %w", i, err)
			}
		}
		*c = Content{Blocks: blocks}
		return nil
	}
	return errors.New("must be a string or an array of content blocks")
}

// objectOrEmpty returns an empty object for missing input so tool_use blocks
// always carry an object.
func objectOrEmpty(r json.RawMessage) json.RawMessage {
	if len(r) == 0 || string(r) == "null" {
		return json.RawMessage(`{}`)
	}
	return r
}

func isJSONObject(r json.RawMessage) bool {
	r = bytes.TrimSpace(r)
	return len(r) > 0 && r[0] == '{'
}

// compact removes insignificant whitespace so stored JSON is canonical in size.
func compact(r json.RawMessage) json.RawMessage {
	var buf bytes.Buffer
	if err := json.Compact(&buf, r); err != nil {
		return r
	}
	return buf.Bytes()
}

// strictObject decodes data, which must be a JSON object, into v.
func strictObject(data []byte, v any) error {
	if !isJSONObject(data) {
		return fmt.Errorf("must be of type object, not %s", kindOf(data))
	}
	return json.Unmarshal(data, v)
}
