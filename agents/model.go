package agents

import (
	"context"
	"encoding/json"

	"github.com/aapd/aapd/aap"
)

// Model is a language model behind an agent: given the conversation so far
// it produces the next assistant message. Implementations stream text and
// thinking through out as they arrive, and return the whole message when
// it is complete.
//
// Generate must honour ctx: when ctx is cancelled it returns promptly with
// whatever it has produced so far in the response and ctx's error.
type Model interface {
	Generate(ctx context.Context, req ModelRequest, out func(ModelDelta)) (ModelResponse, error)
}

// ModelRequest is one call to a model.
type ModelRequest struct {
	// Model is the provider's model id, from the session's "model" option
	// when the agent declares one.
	Model string
	// System is the agent's system prompt; empty for none. System messages
	// of the history stay in Messages, in place.
	System string
	// Messages is the conversation the model sees: the compacted history.
	Messages []Message
	// Tools are the tools the model may call: enabled server tools and the
	// session's client tools.
	Tools []aap.ToolSpec
	// ToolChoice, when set, forces the call to call a tool: the one it
	// names, or any of Tools. Only a ToolForcer is sent one, and only on a
	// turn's first call (ToolChoice.Only is already applied to Tools).
	ToolChoice *ToolChoice
	// Options are the session's resolved option values (defaults applied,
	// secrets in the clear). Models read provider settings such as a
	// per-session API key from here.
	Options map[string]string
	// Whole is true when nobody streams the message's text as it comes (a
	// turn in stream mode "none" or "message"): a model may ask its
	// provider for the whole message at once, and need not call out.
	Whole bool
}

// ModelDelta is a piece of the message being generated.
type ModelDelta struct {
	// Thinking is true for reasoning text, false for answer text.
	Thinking bool
	Text     string
}

// ModelResponse is a generated assistant message and why generation ended.
type ModelResponse struct {
	// Message is the assistant message: thinking, text and tool_use blocks
	// in the order the model produced them.
	Message Message
	// StopReason is end_turn, tool_use, max_tokens or refusal. The agent
	// loop, not the model, decides whether a tool_use stop ends the turn.
	StopReason aap.StopReason
	// Usage is what the provider reported, zero when it reported nothing.
	Usage Usage
}

// Usage counts the tokens of one model call or, summed, of a turn.
type Usage struct {
	InputTokens  int64 `json:"inputTokens"`
	OutputTokens int64 `json:"outputTokens"`
}

// Add returns the sum of two usages.
func (u Usage) Add(v Usage) Usage {
	return Usage{InputTokens: u.InputTokens + v.InputTokens, OutputTokens: u.OutputTokens + v.OutputTokens}
}

// Message is a history message together with provider data that must travel
// with it to the next model call but is not part of AAP, such as Anthropic's
// thinking signatures. Extra is stored beside the message and never sent to
// clients; each model owns the format of what it puts there and must accept
// messages whose Extra it did not write (or that have none).
type Message struct {
	aap.Message
	Extra json.RawMessage
}

// Messages wraps AAP messages that carry no provider data.
func Messages(msgs ...aap.Message) []Message {
	out := make([]Message, len(msgs))
	for i, m := range msgs {
		out[i] = Message{Message: m}
	}
	return out
}
