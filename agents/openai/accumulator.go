package openai

import (
	"bytes"
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"strings"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/respjson"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/agents"
)

// accumulator builds one attempt's assistant message from stream chunks,
// passing text and reasoning on to out as they arrive.
type accumulator struct {
	out func(agents.ModelDelta)
	// streamed is set once anything went to out: from then on the attempt
	// cannot be retried without showing the client the same text twice.
	streamed bool

	thinking strings.Builder
	text     strings.Builder
	refused  bool
	calls    []*toolCall
	byIndex  map[int64]*toolCall
	finish   string
	usage    agents.Usage
}

// toolCall is a tool call being assembled from its chunks.
type toolCall struct {
	id, name string
	args     strings.Builder
}

func newAccumulator(out func(agents.ModelDelta)) *accumulator {
	if out == nil {
		out = func(agents.ModelDelta) {}
	}
	return &accumulator{out: out, byIndex: map[int64]*toolCall{}}
}

// add takes in one chunk. Only choice 0 is read: aapd never asks for more.
func (a *accumulator) add(c sdk.ChatCompletionChunk) {
	// Usage comes in a last chunk without choices (stream_options), or on
	// every chunk from servers that report running totals: the last wins.
	if c.JSON.Usage.Valid() {
		a.usage = agents.Usage{InputTokens: c.Usage.PromptTokens, OutputTokens: c.Usage.CompletionTokens}
	}
	for _, ch := range c.Choices {
		if ch.Index != 0 {
			continue
		}
		a.addDelta(ch.Delta)
		if ch.FinishReason != "" {
			a.finish = ch.FinishReason
		}
	}
}

func (a *accumulator) addDelta(d sdk.ChatCompletionChunkChoiceDelta) {
	if r := reasoning(d.JSON.ExtraFields); r != "" {
		a.thinking.WriteString(r)
		a.emit(true, r)
	}
	if d.Content != "" {
		a.text.WriteString(d.Content)
		a.emit(false, d.Content)
	}
	if d.Refusal != "" {
		// A refusal is the answer's text: clients show it like any other.
		a.refused = true
		a.text.WriteString(d.Refusal)
		a.emit(false, d.Refusal)
	}
	for _, tc := range d.ToolCalls {
		a.addToolCall(tc)
	}
}

func (a *accumulator) emit(thinking bool, text string) {
	a.streamed = true
	a.out(agents.ModelDelta{Thinking: thinking, Text: text})
}

// reasoning returns a delta's reasoning text. It is not in OpenAI's schema:
// vLLM, DeepSeek and LiteLLM send "reasoning_content", Ollama and
// OpenRouter "reasoning". Servers in transition send both with the same
// text, so the first one present is taken, never both.
func reasoning(extra map[string]respjson.Field) string {
	for _, name := range []string{"reasoning_content", "reasoning"} {
		var s string
		if f, ok := extra[name]; ok && json.Unmarshal([]byte(f.Raw()), &s) == nil && s != "" {
			return s
		}
	}
	return ""
}

// addToolCall merges a tool call chunk. Chunks of one call share an index;
// the id and name come with the first and the arguments in pieces. Some
// servers reuse index 0 for every call of a parallel batch, so a new id at
// a known index starts a new call.
func (a *accumulator) addToolCall(tc sdk.ChatCompletionChunkChoiceDeltaToolCall) {
	call := a.byIndex[tc.Index]
	if call == nil || (tc.ID != "" && call.id != "" && tc.ID != call.id) {
		call = &toolCall{}
		a.calls = append(a.calls, call)
		a.byIndex[tc.Index] = call
	}
	if call.id == "" {
		call.id = tc.ID
	}
	// Names come whole in the first chunk, except from servers that split
	// them or repeat them in every chunk: append only what is new.
	if n := tc.Function.Name; n != "" && n != call.name {
		call.name += n
	}
	call.args.WriteString(tc.Function.Arguments)
}

// addCompletion takes in a whole completion, asked for unstreamed: the
// same message as the chunks of a stream would have made, without deltas.
func (a *accumulator) addCompletion(c *sdk.ChatCompletion) {
	if c.JSON.Usage.Valid() {
		a.usage = agents.Usage{InputTokens: c.Usage.PromptTokens, OutputTokens: c.Usage.CompletionTokens}
	}
	for _, ch := range c.Choices {
		if ch.Index != 0 {
			continue
		}
		m := ch.Message
		a.thinking.WriteString(reasoning(m.JSON.ExtraFields))
		a.text.WriteString(m.Content)
		if m.Refusal != "" {
			a.refused = true
			a.text.WriteString(m.Refusal)
		}
		for _, tc := range m.ToolCalls {
			call := &toolCall{id: tc.ID, name: tc.Function.Name}
			call.args.WriteString(tc.Function.Arguments)
			a.calls = append(a.calls, call)
		}
		// A whole answer is finished, whether or not the server said why.
		a.finish = cmp.Or(ch.FinishReason, "stop")
	}
}

// finished reports whether the provider said why it stopped.
func (a *accumulator) finished() bool { return a.finish != "" }

// response is the message: thinking, then text, then tool calls.
func (a *accumulator) response() agents.ModelResponse {
	var blocks []aap.ContentBlock
	if a.thinking.Len() > 0 {
		blocks = append(blocks, aap.ThinkingBlock(a.thinking.String()))
	}
	if a.text.Len() > 0 {
		blocks = append(blocks, aap.TextBlock(a.text.String()))
	}
	for _, c := range a.calls {
		id := c.id
		if id == "" {
			id = newCallID()
		}
		blocks = append(blocks, aap.ToolUseBlock(aap.ToolCall{ToolCallID: id, Name: c.name, Input: toolInput(c.args.String())}))
	}
	return agents.ModelResponse{
		Message:    agents.Message{Message: aap.AssistantMessage(blocks...)},
		StopReason: a.stopReason(),
		Usage:      a.usage,
	}
}

// failed is the partial response of a call that did not complete.
func (a *accumulator) failed() agents.ModelResponse {
	r := a.response()
	r.StopReason = aap.StopError
	return r
}

func (a *accumulator) stopReason() aap.StopReason {
	switch {
	case a.refused || a.finish == "content_filter":
		return aap.StopRefusal
	case a.finish == "length":
		return aap.StopMaxTokens
	case len(a.calls) > 0 || a.finish == "tool_calls" || a.finish == "function_call":
		// Some servers say "stop" even when the answer is tool calls.
		return aap.StopToolUse
	}
	return aap.StopEndTurn
}

// toolInput is the tool_use input for the arguments a model wrote. AAP
// needs a JSON object; when the model wrote something else (broken JSON,
// an answer cut by max_tokens, nothing at all) the text is kept as
// {"_raw": "<arguments>"} so that the tool, and the model reading the
// tool's complaint, see exactly what was written.
func toolInput(args string) json.RawMessage {
	if json.Valid([]byte(args)) {
		var buf bytes.Buffer
		if json.Compact(&buf, []byte(args)) == nil && buf.Len() > 0 && buf.Bytes()[0] == '{' {
			return buf.Bytes()
		}
	}
	raw, _ := json.Marshal(map[string]string{"_raw": args})
	return raw
}

// newCallID names a tool call the server left unnamed (some local servers
// do); AAP needs an id to match the result to the call.
func newCallID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return "call_" + hex.EncodeToString(b)
}
