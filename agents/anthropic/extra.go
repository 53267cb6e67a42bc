package anthropic

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	"github.com/anthropics/anthropic-sdk-go"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/agents"
)

// The API rejects a conversation whose earlier thinking blocks come back
// without their signatures, and it returns blocks AAP cannot show:
// redacted_thinking, and thinking whose text it withheld (display
// "omitted"). This package keeps both in agents.Message.Extra, in this
// format:
//
//	{"anthropic": {"blocks": [
//	  {"index": 0, "signature": "EqQB…", "sha256": "9f86d0…"},
//	  {"index": 2, "redacted": "EmwKAhgB…"},
//	  {"index": 2, "signature": "EqQB…", "omitted": true}
//	]}}
//
// Entries are in the order the API produced the blocks, and index is a
// position in the message's AAP content (Content.AsBlocks()):
//
//   - signature with sha256 signs the thinking block at index; sha256 is the
//     hex SHA-256 of that block's thinking text. If the block there is not
//     thinking, or its text no longer hashes to sha256 (the history was
//     edited or compacted), the signature is not used.
//   - redacted is a redacted_thinking block's data; signature with omitted
//     is a thinking block without text. Both are sent back just before the
//     AAP block at index, or at the end if index is past the last block.
//
// Thinking blocks without a usable signature (messages from elsewhere, or
// cut short by an error) are dropped when the message is sent back: the
// API would reject them, and the model does not need its old reasoning.
// Keys other than "anthropic", and Extra that is not this format, are
// ignored.
type extraData struct {
	Anthropic *extraAnthropic `json:"anthropic,omitempty"`
}

type extraAnthropic struct {
	Blocks []extraBlock `json:"blocks"`
}

type extraBlock struct {
	Index     int    `json:"index"`
	Signature string `json:"signature,omitempty"`
	SHA256    string `json:"sha256,omitempty"`
	Redacted  string `json:"redacted,omitempty"`
	Omitted   bool   `json:"omitted,omitempty"`
}

// inserted reports whether the entry is a block of its own rather than the
// signature of an AAP block.
func (e extraBlock) inserted() bool { return e.Redacted != "" || e.Omitted }

// param returns the block an inserted entry stands for.
func (e extraBlock) param() anthropic.ContentBlockParamUnion {
	if e.Redacted != "" {
		return anthropic.NewRedactedThinkingBlock(e.Redacted)
	}
	return anthropic.NewThinkingBlock(e.Signature, "")
}

func thinkingHash(text string) string {
	sum := sha256.Sum256([]byte(text))
	return hex.EncodeToString(sum[:])
}

// encodeExtra returns the Extra for a message with these entries, nil if
// there are none.
func encodeExtra(blocks []extraBlock) json.RawMessage {
	if len(blocks) == 0 {
		return nil
	}
	b, err := json.Marshal(extraData{Anthropic: &extraAnthropic{Blocks: blocks}})
	if err != nil {
		return nil // cannot happen: strings, ints and bools only
	}
	return b
}

// decodeExtra returns the entries of an Extra this package wrote; nothing
// for any other.
func decodeExtra(raw json.RawMessage) []extraBlock {
	if len(raw) == 0 {
		return nil
	}
	var d extraData
	if json.Unmarshal(raw, &d) != nil || d.Anthropic == nil {
		return nil
	}
	return d.Anthropic.Blocks
}

// assistantBlocks rebuilds the API blocks of an assistant history message:
// its AAP blocks with thinking signatures restored and the blocks AAP does
// not hold put back in place.
func assistantBlocks(m agents.Message) []anthropic.ContentBlockParamUnion {
	entries := decodeExtra(m.Extra)
	content := m.Content.AsBlocks()
	var out []anthropic.ContentBlockParamUnion
	done := make([]bool, len(entries))
	insertUpTo := func(index int) {
		for i, e := range entries {
			if !done[i] && e.inserted() && e.Index <= index {
				out = append(out, e.param())
				done[i] = true
			}
		}
	}
	for i, b := range content {
		insertUpTo(i)
		switch b.Type {
		case aap.BlockThinking:
			if sig := signatureOf(entries, i, b.Thinking); sig != "" {
				out = append(out, anthropic.NewThinkingBlock(sig, b.Thinking))
			}
		case aap.BlockText:
			if b.Text != "" {
				out = append(out, anthropic.NewTextBlock(b.Text))
			}
		case aap.BlockToolUse:
			out = append(out, anthropic.NewToolUseBlock(b.ToolCallID, jsonObject(b.Input), b.Name))
		case aap.BlockImage:
			// The API takes no images in assistant messages (a seeded
			// history may put one there): the model is told one was.
			out = append(out, anthropic.NewTextBlock("[image not shown: an assistant message cannot carry images]"))
		}
	}
	insertUpTo(int(^uint(0) >> 1))
	return out
}

// signatureOf returns the signature recorded for the thinking block at
// index, if its text is the text that was signed.
func signatureOf(entries []extraBlock, index int, thinking string) string {
	for _, e := range entries {
		if e.Index == index && !e.inserted() && e.Signature != "" && e.SHA256 == thinkingHash(thinking) {
			return e.Signature
		}
	}
	return ""
}

// jsonObject returns a tool input for the API: the object itself, or {}
// when it is missing.
func jsonObject(r json.RawMessage) json.RawMessage {
	if len(r) == 0 || string(r) == "null" {
		return json.RawMessage(`{}`)
	}
	return r
}
