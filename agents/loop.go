package agents

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"go.opentelemetry.io/otel/trace"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/compaction"
	"github.com/aapd/aapd/store"
)

// errStepLimit ends a turn whose model keeps calling tools.
var errStepLimit = errors.New("the agent reached its limit of model calls for one turn")

// turnRun is the agent loop of one turn.
type turnRun struct {
	runner   *Runner
	agent    *Agent
	turn     store.Turn
	session  store.Session
	history  []Message // what the model sees: the compacted history
	stream   *Stream
	recorder *recorder
	usage    Usage
	// version is the compaction version history belongs to.
	version int64
	// lastSeq is the seq of the newest message of history, staged or not.
	lastSeq int64
	// step is the number of the last step committed (0: only the claim).
	step int
	// final is the turn's last step, staged: it is written with the
	// turn's end. pending are the tool calls the session waits on after it.
	final   []store.NewMessage
	pending []aap.PendingToolCall
	// pendingCommitted are the pending tool calls as last written.
	pendingCommitted []aap.PendingToolCall
	// produced are the messages the agent wrote in this turn, in order: the
	// body of a stream "none" response.
	produced []aap.Message
	// producedSeqs are the seqs of produced, index by index.
	producedSeqs []int64
	// The provider's report on the turn's last model call that had one: its
	// input tokens, how many messages of history it saw, and the seq of the
	// newest of them. Compaction counts tokens from it.
	contextTokens int64
	contextItems  int
	contextUpTo   int64
	// How the turn ended, set before done is closed: its stop reason, why
	// it failed (stop reason "error" only), and whether its end could not
	// be written.
	stop    aap.StopReason
	turnErr *aap.TurnError
	err     error
	done    chan struct{}
	// span is the turn's span (trace.go).
	span trace.Span
	// written is the version of the session's row the turn's end wrote
	// (zero if unknown).
	written store.SessionVersion
	// force is the tool call the turn forces on its next model call, its
	// first (StartParams.ToolChoice); nil once made, or for none.
	force *ToolChoice
}

// known is the session as the turn's end wrote it, for the session's next
// turn in this process (store.TurnBeginParams.Known); nil if the end's
// write is not known.
func (t *turnRun) known() *store.KnownSession {
	if t.written.IsZero() {
		return nil
	}
	sess := t.session
	sess.Pending, sess.ActiveTurnID = t.pending, ""
	return &store.KnownSession{Session: sess, LastSeq: t.lastSeq, CompactionVersion: t.version, Version: t.written}
}

// contextUsage is the provider's last report, as compaction reads it.
func (t *turnRun) contextUsage() compaction.Usage {
	return compaction.Usage{InputTokens: t.contextTokens, Items: t.contextItems}
}

// emit adds an event to the turn's stream; readers see it once it is
// recorded.
func (t *turnRun) emit(e aap.Event) {
	t.stream.add(e)
	t.recorder.added()
}

// run runs the loop until the turn stops: granted tool calls first, then
// model calls, running trusted tools inline, until the model ends its turn
// or a tool call needs the client.
func (t *turnRun) run(ctx context.Context) (aap.StopReason, error) {
	if err := t.runGranted(ctx); err != nil {
		return aap.StopError, err
	}
	for range t.agent.maxSteps() {
		seen, upTo := len(t.history), t.lastSeq
		modelDone := t.runner.metrics.modelCall(ctx, t.agent, t.modelName())
		req := t.modelRequest()
		if t.force != nil {
			// Only the first call is forced: the calls after it see the
			// tools' results and decide for themselves.
			req, t.force = t.force.force(req), nil
		}
		names := newToolNames(req)
		resp, err := generate(ctx, t.agent, names.request(req), t.onDelta)
		resp = names.response(resp)
		modelDone(resp.Usage, err)
		t.usage = t.usage.Add(resp.Usage)
		if resp.Usage.InputTokens > 0 {
			t.contextTokens, t.contextItems, t.contextUpTo = resp.Usage.InputTokens, seen, upTo
		}
		if err != nil {
			t.keepPartial(resp.Message)
			return aap.StopError, &modelError{err: err}
		}
		msg := normalize(resp.Message)
		if len(msg.Content.AsBlocks()) == 0 {
			return stopReasonOf(resp.StopReason), nil
		}
		t.emitMessage(msg.Message)
		calls := msg.ToolCalls()
		step := []store.NewMessage{{Message: msg.Message, Extra: msg.Extra, Origin: store.OriginAgent}}
		var pending []aap.PendingToolCall
		ranInline := false
		for _, c := range calls {
			switch kind := t.classify(c.Name); kind {
			case toolInline, toolUnknown:
				content := t.callTool(ctx, c)
				t.emit(aap.ToolResultEvent(c.ToolCallID, content))
				step = append(step, store.NewMessage{Message: resultMessage(c.ToolCallID, content), Origin: store.OriginAgent})
				ranInline = true
			case toolNeedsPermission:
				pending = append(pending, aap.PendingToolCall{ToolCall: c, Server: true})
			case toolClient:
				t.runner.metrics.clientToolCalled()
				pending = append(pending, aap.PendingToolCall{ToolCall: c})
			}
		}
		if ranInline && len(pending) == 0 {
			// The model goes on with the tools' results: what the tools
			// did is committed before it does.
			if err := t.commit(ctx, step, nil); err != nil {
				return aap.StopError, err
			}
			continue
		}
		// The turn's last step: written with its end.
		t.stage(step, pending)
		if len(pending) > 0 {
			return aap.StopToolUse, nil
		}
		return stopReasonOf(resp.StopReason), nil
	}
	return aap.StopError, errStepLimit
}

// runGranted runs the server tool calls the client has just allowed.
func (t *turnRun) runGranted(ctx context.Context) error {
	var step []store.NewMessage
	for _, p := range t.session.Pending {
		if !p.Granted {
			continue
		}
		content := t.callTool(ctx, p.ToolCall)
		t.emit(aap.ToolResultEvent(p.ToolCallID, content))
		step = append(step, store.NewMessage{Message: resultMessage(p.ToolCallID, content), Origin: store.OriginAgent})
	}
	if len(step) == 0 {
		return nil
	}
	return t.commit(ctx, step, nil)
}

// commit stores a step's messages and the pending calls, numbered after
// the turn's last step, and adds the messages to what the model sees.
func (t *turnRun) commit(ctx context.Context, msgs []store.NewMessage, pending []aap.PendingToolCall) error {
	err := t.runner.commitStep(ctx, store.TurnStepParams{
		Ref: t.turn.Ref(), Step: t.step + 1, FirstSeq: t.lastSeq + 1, Messages: msgs, Pending: pending,
		Attempt: t.turn.Attempts, InputTokens: t.usage.InputTokens, OutputTokens: t.usage.OutputTokens,
	})
	if err != nil {
		return err
	}
	t.step++
	t.add(msgs)
	t.pending, t.pendingCommitted = pending, pending
	return nil
}

// stage keeps the turn's last step for its end, and adds its messages to
// what the model saw (for compaction and the next turn).
func (t *turnRun) stage(msgs []store.NewMessage, pending []aap.PendingToolCall) {
	t.final = append(t.final, msgs...)
	t.add(msgs)
	t.pending = pending
}

func (t *turnRun) add(msgs []store.NewMessage) {
	for i, m := range msgs {
		t.history = append(t.history, Message{Message: m.Message, Extra: m.Extra})
		t.produced = append(t.produced, m.Message)
		t.producedSeqs = append(t.producedSeqs, t.lastSeq+1+int64(i))
	}
	t.lastSeq += int64(len(msgs))
}

// keepPartial stages what a failed or cancelled model call produced before
// it stopped: its text and thinking (tool calls cannot be run half-made).
func (t *turnRun) keepPartial(m Message) {
	var blocks []aap.ContentBlock
	for _, b := range m.Content.AsBlocks() {
		if b.Type == aap.BlockText || b.Type == aap.BlockThinking {
			blocks = append(blocks, b)
		}
	}
	if len(blocks) == 0 {
		return
	}
	partial := normalize(Message{Message: aap.AssistantMessage(blocks...), Extra: m.Extra})
	if t.turn.Stream != aap.StreamDelta {
		t.emitMessage(partial.Message)
	}
	t.stage([]store.NewMessage{{Message: partial.Message, Extra: partial.Extra, Origin: store.OriginAgent}}, t.pending)
}

// modelName is the provider model id the session picked with the agent's
// model option, or "" for the agent's own (what modelRequest sends).
func (t *turnRun) modelName() string {
	if t.agent.ModelOption == "" {
		return ""
	}
	return t.agent.ResolveOptions(t.session.AllOptions())[t.agent.ModelOption]
}

func (t *turnRun) modelRequest() ModelRequest {
	opts := t.agent.ResolveOptions(t.session.AllOptions())
	req := ModelRequest{System: t.agent.SystemFor(opts), Messages: t.history, Options: opts,
		Whole: t.turn.Stream != aap.StreamDelta}
	if t.agent.ModelOption != "" {
		req.Model = opts[t.agent.ModelOption]
	}
	for _, ref := range t.session.AgentTools {
		if tool := t.agent.tool(ref.Name); tool != nil {
			req.Tools = append(req.Tools, tool.Spec())
		}
	}
	req.Tools = append(req.Tools, t.session.ClientTools...)
	return req
}

func (t *turnRun) onDelta(d ModelDelta) {
	if t.turn.Stream != aap.StreamDelta || d.Text == "" {
		return
	}
	// Deltas are stored folded and cut back apart by length: only valid
	// UTF-8 comes back out as it went in.
	text := strings.ToValidUTF8(d.Text, "\uFFFD")
	if d.Thinking {
		t.emit(aap.Event{Type: aap.EventThinkingDelta, Delta: text})
	} else {
		t.emit(aap.Event{Type: aap.EventTextDelta, Delta: text})
	}
}

// emitMessage emits a finished message's events: its text and thinking as
// whole events (message and none modes; delta mode streamed them already)
// and its tool calls.
func (t *turnRun) emitMessage(m aap.Message) {
	for _, b := range m.Content.AsBlocks() {
		switch {
		case b.Type == aap.BlockToolUse:
			t.emit(aap.ToolCallEvent(b.ToolCall()))
		case t.turn.Stream == aap.StreamDelta:
		case b.Type == aap.BlockText:
			t.emit(aap.Event{Type: aap.EventText, Text: b.Text})
		case b.Type == aap.BlockThinking:
			t.emit(aap.Event{Type: aap.EventThinking, Thinking: b.Thinking})
		}
	}
}

type toolKind int

const (
	toolUnknown         toolKind = iota // not enabled or not known: answered with an error
	toolInline                          // trusted server tool: run now
	toolNeedsPermission                 // untrusted server tool: ask the client
	toolClient                          // client tool: the client runs it
)

func (t *turnRun) classify(name string) toolKind {
	for _, c := range t.session.ClientTools {
		if c.Name == name {
			return toolClient
		}
	}
	for _, ref := range t.session.AgentTools {
		if ref.Name == name && t.agent.tool(name) != nil {
			if ref.Trust {
				return toolInline
			}
			return toolNeedsPermission
		}
	}
	return toolUnknown
}

// callTool runs a server tool; failures become the result the model reads.
func (t *turnRun) callTool(ctx context.Context, c aap.ToolCall) aap.Content {
	// Only a tool the session enables runs, granted or not: a seeded or
	// hallucinated call of any other is answered with an error.
	tool := t.agent.tool(c.Name)
	if tool == nil || t.classify(c.Name) == toolUnknown || t.classify(c.Name) == toolClient {
		noteUnavailableTool(ctx, c)
		t.runner.metrics.toolCalled(nil, nil)
		return aap.TextContent(fmt.Sprintf("Error: no tool named %q is available", c.Name))
	}
	content, err := callTool(ctx, tool, c)
	t.runner.metrics.toolCalled(tool, err)
	if err != nil {
		return aap.TextContent("Error: " + err.Error())
	}
	return content
}

func resultMessage(toolCallID string, content aap.Content) aap.Message {
	return aap.Message{Role: aap.RoleTool, ToolCallID: toolCallID, Content: content}
}

// normalize writes an assistant message that is a single text block as
// plain string content, the form the spec shows for a plain answer.
func normalize(m Message) Message {
	blocks := m.Content.AsBlocks()
	if len(blocks) == 1 && blocks[0].Type == aap.BlockText {
		m.Message = aap.Message{Role: aap.RoleAssistant, Content: aap.TextContent(blocks[0].Text)}
		return m
	}
	m.Message = aap.AssistantMessage(blocks...)
	return m
}

func stopReasonOf(r aap.StopReason) aap.StopReason {
	switch r {
	case aap.StopMaxTokens, aap.StopRefusal, aap.StopError:
		return r
	}
	return aap.StopEndTurn
}
