package anthropic

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/anthropics/anthropic-sdk-go"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/agents"
)

// assembly builds the assistant message from the events of one stream.
type assembly struct {
	blocks  []*block         // in stream order
	byIndex map[int64]*block // by the API's content block index
	reason  anthropic.StopReason
	// Token counts as last reported; message_delta's are cumulative.
	input, cacheRead, cacheWrite, output int64
	// stopped is set by message_stop: the message is complete.
	stopped bool
}

// block is one content block of the stream.
type block struct {
	kind      string          // the API's type: text, thinking, redacted_thinking, tool_use, …
	text      strings.Builder // text or thinking
	signature string          // thinking
	data      string          // redacted_thinking
	id, name  string          // tool_use
	input     strings.Builder // tool_use: concatenated input_json_delta pieces
	startJSON string          // tool_use: the input given at content_block_start
}

func newAssembly() *assembly { return &assembly{byIndex: map[int64]*block{}} }

// begun reports whether any content has arrived: from then on the request
// must not be sent again, or the client would see output twice.
func (a *assembly) begun() bool { return len(a.blocks) > 0 }

// apply takes in one event, passing text and thinking deltas to out.
func (a *assembly) apply(ev anthropic.MessageStreamEventUnion, out func(agents.ModelDelta)) error {
	switch ev.Type {
	case "message_start":
		u := ev.Message.Usage
		a.input, a.cacheRead, a.cacheWrite, a.output = u.InputTokens, u.CacheReadInputTokens, u.CacheCreationInputTokens, u.OutputTokens
	case "content_block_start":
		if _, dup := a.byIndex[ev.Index]; dup {
			return &protocolError{fmt.Sprintf("content block %d started twice", ev.Index)}
		}
		cb := ev.ContentBlock
		b := &block{kind: cb.Type}
		switch cb.Type {
		case "text":
			b.text.WriteString(cb.Text)
			emit(out, false, cb.Text)
		case "thinking":
			b.text.WriteString(cb.Thinking)
			b.signature = cb.Signature
			emit(out, true, cb.Thinking)
		case "redacted_thinking":
			b.data = cb.Data
		case "tool_use":
			b.id, b.name, b.startJSON = cb.ID, cb.Name, cb.JSON.Input.Raw()
		}
		a.blocks = append(a.blocks, b)
		a.byIndex[ev.Index] = b
	case "content_block_delta":
		b := a.byIndex[ev.Index]
		if b == nil {
			return &protocolError{fmt.Sprintf("delta for content block %d, which was not started", ev.Index)}
		}
		return b.apply(ev.Delta, out)
	case "message_delta":
		a.reason = ev.Delta.StopReason
		u := ev.Usage
		for _, f := range []struct {
			valid bool
			dst   *int64
			v     int64
		}{
			{u.JSON.InputTokens.Valid(), &a.input, u.InputTokens},
			{u.JSON.CacheReadInputTokens.Valid(), &a.cacheRead, u.CacheReadInputTokens},
			{u.JSON.CacheCreationInputTokens.Valid(), &a.cacheWrite, u.CacheCreationInputTokens},
			{u.JSON.OutputTokens.Valid(), &a.output, u.OutputTokens},
		} {
			if f.valid {
				*f.dst = f.v
			}
		}
	case "message_stop":
		a.stopped = true
	}
	// content_block_stop needs nothing: tool input is checked when the
	// message is built, so that a block cut short is handled the same.
	return nil
}

// deltaBlock is the kind of block each delta this package uses belongs to.
var deltaBlock = map[string]string{
	"text_delta":       "text",
	"thinking_delta":   "thinking",
	"signature_delta":  "thinking",
	"input_json_delta": "tool_use",
}

// apply takes in a delta of the block.
func (b *block) apply(d anthropic.MessageStreamEventUnionDelta, out func(agents.ModelDelta)) error {
	want := deltaBlock[d.Type]
	if want == "" {
		return nil // citations_delta and kinds this package does not use
	}
	if want != b.kind {
		return &protocolError{fmt.Sprintf("%s for a %s block", d.Type, b.kind)}
	}
	switch d.Type {
	case "text_delta":
		b.text.WriteString(d.Text)
		emit(out, false, d.Text)
	case "thinking_delta":
		b.text.WriteString(d.Thinking)
		emit(out, true, d.Thinking)
	case "signature_delta":
		b.signature += d.Signature
	case "input_json_delta":
		b.input.WriteString(d.PartialJSON)
	}
	return nil
}

func emit(out func(agents.ModelDelta), thinking bool, text string) {
	if text != "" {
		out(agents.ModelDelta{Thinking: thinking, Text: text})
	}
}

// response returns the complete message. A tool_use block whose input is
// not a JSON object cannot be run: it is left out, which is expected when
// max_tokens cut it short; otherwise the call fails with the partial
// response.
func (a *assembly) response() (agents.ModelResponse, error) {
	resp, malformed := a.build(false)
	if malformed != "" && resp.StopReason != aap.StopMaxTokens {
		return a.partial(), fmt.Errorf("anthropic: the model's input for tool %q is not a JSON object", malformed)
	}
	return resp, nil
}

// partial returns what a failed stream produced: its text and thinking,
// without tool calls, which could be incomplete. The loop keeps the same
// blocks, so the positions recorded in Extra stay right.
func (a *assembly) partial() agents.ModelResponse {
	resp, _ := a.build(true)
	return resp
}

// build assembles the AAP message and its Extra; malformed names a tool
// whose input was left out.
func (a *assembly) build(partial bool) (resp agents.ModelResponse, malformed string) {
	content := []aap.ContentBlock{}
	var extra []extraBlock
	for _, b := range a.blocks {
		switch b.kind {
		case "text":
			if b.text.Len() > 0 {
				content = append(content, aap.TextBlock(b.text.String()))
			}
		case "thinking":
			text := b.text.String()
			switch {
			case text == "" && b.signature != "":
				extra = append(extra, extraBlock{Index: len(content), Signature: b.signature, Omitted: true})
			case text == "":
			default:
				if b.signature != "" {
					extra = append(extra, extraBlock{Index: len(content), Signature: b.signature, SHA256: thinkingHash(text)})
				}
				content = append(content, aap.ThinkingBlock(text))
			}
		case "redacted_thinking":
			extra = append(extra, extraBlock{Index: len(content), Redacted: b.data})
		case "tool_use":
			if partial {
				continue
			}
			input, ok := toolInput(b)
			if !ok {
				malformed = b.name
				continue
			}
			content = append(content, aap.ToolUseBlock(aap.ToolCall{ToolCallID: b.id, Name: b.name, Input: input}))
		}
	}
	resp.Message = agents.Message{Message: aap.AssistantMessage(content...), Extra: encodeExtra(extra)}
	resp.StopReason = stopReason(a.reason)
	resp.Usage = agents.Usage{InputTokens: a.input + a.cacheRead + a.cacheWrite, OutputTokens: a.output}
	return resp, malformed
}

// toolInput returns a tool_use block's input as compact JSON: the streamed
// pieces joined, else the input given at the start, else {}.
func toolInput(b *block) (json.RawMessage, bool) {
	raw := b.input.String()
	if strings.TrimSpace(raw) == "" {
		raw = b.startJSON
	}
	if strings.TrimSpace(raw) == "" || raw == "null" {
		return json.RawMessage(`{}`), true
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, []byte(raw)); err != nil || buf.Bytes()[0] != '{' {
		return nil, false
	}
	return buf.Bytes(), true
}

// stopReason maps the API's stop reasons onto AAP's. pause_turn (a server
// tool paused a long turn) ends the turn; the next turn continues the
// conversation. A context window overflow reads as max_tokens, which AAP
// uses for both.
func stopReason(r anthropic.StopReason) aap.StopReason {
	switch r {
	case anthropic.StopReasonToolUse:
		return aap.StopToolUse
	case anthropic.StopReasonMaxTokens, anthropic.StopReasonModelContextWindowExceeded:
		return aap.StopMaxTokens
	case anthropic.StopReasonRefusal:
		return aap.StopRefusal
	}
	return aap.StopEndTurn // end_turn, stop_sequence, pause_turn, none
}

// emptyResponse is the response of a call that produced nothing.
func emptyResponse() agents.ModelResponse {
	return agents.ModelResponse{Message: agents.Message{Message: aap.AssistantMessage()}}
}
