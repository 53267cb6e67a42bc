package agents

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/store"
)

// Tracing of turns (docs/operations.md, "Tracing"). A turn is one span,
// invoke_agent, started by the worker on the runner's context: a child of
// the request that asked for the turn, in the same trace, and linked to it,
// because a turn goes on after its client goes away. Under it: a span per
// model call (chat) and per server tool call (execute_tool), the
// compaction after it, and the SQL of all of them. Only the turn span needs
// the runner's tracer; the spans under it come from the provider of the
// span in their context (tracerFrom), so a context with no span, or a
// no-op one, costs no more than a type assertion.

// tracerName names the instrumentation scope of aapd's own spans.
const tracerName = "github.com/aapd/aapd/agents"

// Attribute keys. The GenAI ones follow OpenTelemetry's GenAI semantic
// conventions, spelled out here because they are still in development
// upstream and move between semconv packages.
const (
	attrOperation     = attribute.Key("gen_ai.operation.name")
	attrProvider      = attribute.Key("gen_ai.provider.name")
	attrSystem        = attribute.Key("gen_ai.system") // the older name of gen_ai.provider.name, still read by many backends
	attrRequestModel  = attribute.Key("gen_ai.request.model")
	attrInputTokens   = attribute.Key("gen_ai.usage.input_tokens")
	attrOutputTokens  = attribute.Key("gen_ai.usage.output_tokens")
	attrFinishReasons = attribute.Key("gen_ai.response.finish_reasons")
	attrAgentName     = attribute.Key("gen_ai.agent.name")
	attrConversation  = attribute.Key("gen_ai.conversation.id")
	attrToolName      = attribute.Key("gen_ai.tool.name")
	attrToolCallID    = attribute.Key("gen_ai.tool.call.id")
	attrToolType      = attribute.Key("gen_ai.tool.type")
	attrErrorType     = attribute.Key("error.type")

	attrTenant        = attribute.Key("aapd.tenant.id")
	attrSession       = attribute.Key("aapd.session.id")
	attrTurn          = attribute.Key("aapd.turn.id")
	attrTurnStream    = attribute.Key("aapd.turn.stream")
	attrTurnStatus    = attribute.Key("aapd.turn.status")
	attrTurnStop      = attribute.Key("aapd.turn.stop_reason")
	attrTurnReplay    = attribute.Key("aapd.turn.replay")
	attrToolKind      = attribute.Key("aapd.tool.kind")
	attrToolOutcome   = attribute.Key("aapd.tool.outcome")
	attrMCPServer     = attribute.Key("aapd.tool.mcp_server")
	attrCompTrigger   = attribute.Key("aapd.compaction.trigger")
	attrCompStrategy  = attribute.Key("aapd.compaction.strategy")
	attrCompChanged   = attribute.Key("aapd.compaction.changed")
	attrTokensBefore  = attribute.Key("aapd.compaction.tokens_before")
	attrTokensAfter   = attribute.Key("aapd.compaction.tokens_after")
	providerUnknown   = "unknown"
	operationChat     = "chat"
	operationTool     = "execute_tool"
	operationAgent    = "invoke_agent"
	errorTypeOther    = "_OTHER"
	errorTypeCanceled = "canceled"
	errorTypeTimeout  = "timeout"
)

// ModelDescriber is what a Model may tell traces about itself: the
// provider whose API it calls and the model id a request goes to. A model
// that is not one is traced as provider "unknown", by the request's model.
type ModelDescriber interface {
	// Provider is the gen_ai.provider.name of the model's API: "openai"
	// (for every OpenAI-compatible server), "anthropic" or "echo".
	Provider() string
	// ModelID is the provider's id of the model req is sent to.
	ModelID(req ModelRequest) string
}

// newTracer returns the runner's tracer; nil means tracing is off.
func newTracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		tp = noop.NewTracerProvider()
	}
	return tp.Tracer(tracerName)
}

// tracerFrom returns a tracer of the provider that made ctx's span.
func tracerFrom(ctx context.Context) trace.Tracer {
	return trace.SpanFromContext(ctx).TracerProvider().Tracer(tracerName)
}

// startTurnSpan starts a turn's span on the runner's context, before its
// claim, so the claim's SQL is inside it. Its name and agent are known once
// the claim has read the session (traceClaim).
func (r *Runner) startTurnSpan(p *StartParams, ref store.TurnRef) (context.Context, trace.Span) {
	ctx := r.life
	opts := []trace.SpanStartOption{trace.WithAttributes(
		attrOperation.String(operationAgent), attrConversation.String(ref.SessionID),
		attrTenant.String(ref.TenantID), attrSession.String(ref.SessionID), attrTurn.String(ref.TurnID),
		attrTurnStream.String(string(p.Request.Mode())),
	)}
	if p.requestSpan.IsValid() {
		ctx = trace.ContextWithSpanContext(ctx, p.requestSpan)
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: p.requestSpan,
			Attributes: []attribute.KeyValue{attribute.String("aapd.link", "request")}}))
	}
	return r.tracer.Start(ctx, operationAgent, opts...)
}

// traceClaim records the claim's outcome on the turn's span: the agent
// that runs it, or why it did not run (another turn runs, an idempotent
// replay). A turn that did not run ends its span when its worker returns.
func traceClaim(span trace.Span, run *turnRun, begun *store.TurnBegun, err error) {
	switch {
	case err != nil:
		recordError(span, err)
	case begun.Replay:
		span.SetAttributes(attrTurnReplay.Bool(true), attrTurn.String(begun.Turn.ID))
	case run != nil:
		run.span = span
		span.SetName(operationAgent + " " + run.agent.Info.Name)
		span.SetAttributes(attrAgentName.String(run.agent.Info.Name))
	}
}

// endTurnSpan ends a turn's span once its end is written.
func endTurnSpan(run *turnRun, status store.TurnStatus, err error) {
	span := run.span
	if span == nil {
		return
	}
	span.SetAttributes(attrTurnStatus.String(string(status)), attrTurnStop.String(string(run.stop)),
		attrInputTokens.Int64(run.usage.InputTokens), attrOutputTokens.Int64(run.usage.OutputTokens))
	switch {
	case run.err != nil:
		recordError(span, run.err)
	case err != nil:
		recordError(span, err)
	}
	span.End()
}

// lifeOf is the runner's life carrying the turn's span: the context of the
// writes that outlast the turn's own context (its end, the compaction
// after it), so they are traced in the turn.
func (r *Runner) lifeOf(run *turnRun) context.Context {
	if run.span == nil {
		return r.life
	}
	return trace.ContextWithSpan(r.life, run.span)
}

// generate calls the agent's model inside a "chat {model}" span.
func generate(ctx context.Context, agent *Agent, req ModelRequest, out func(ModelDelta)) (ModelResponse, error) {
	if !trace.SpanFromContext(ctx).IsRecording() {
		return agent.Model.Generate(ctx, req, out)
	}
	provider, model := providerUnknown, req.Model
	if d, ok := agent.Model.(ModelDescriber); ok {
		provider, model = d.Provider(), d.ModelID(req)
	}
	name := operationChat
	if model != "" {
		name += " " + model
	}
	ctx, span := tracerFrom(ctx).Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		attrOperation.String(operationChat), attrProvider.String(provider), attrSystem.String(provider),
		attrRequestModel.String(model), attrAgentName.String(agent.Info.Name)))
	defer span.End()
	resp, err := agent.Model.Generate(ctx, req, out)
	span.SetAttributes(attrInputTokens.Int64(resp.Usage.InputTokens), attrOutputTokens.Int64(resp.Usage.OutputTokens))
	if err != nil {
		recordError(span, err)
	} else if resp.StopReason != "" {
		span.SetAttributes(attrFinishReasons.StringSlice([]string{string(resp.StopReason)}))
	}
	return resp, err
}

// callTool runs a server tool inside an "execute_tool {name}" span.
func callTool(ctx context.Context, tool Tool, c aap.ToolCall) (aap.Content, error) {
	if !trace.SpanFromContext(ctx).IsRecording() {
		return tool.Call(ctx, c.Input)
	}
	attrs := []attribute.KeyValue{attrOperation.String(operationTool), attrToolName.String(c.Name),
		attrToolCallID.String(c.ToolCallID), attrToolType.String("extension")}
	if m, ok := tool.(mcpTool); ok {
		attrs = append(attrs, attrToolKind.String("mcp"), attrMCPServer.String(m.MCPServer()))
	} else {
		attrs = append(attrs, attrToolKind.String("server"))
	}
	ctx, span := tracerFrom(ctx).Start(ctx, operationTool+" "+c.Name, trace.WithAttributes(attrs...))
	defer span.End()
	content, err := tool.Call(ctx, c.Input)
	if err != nil {
		// The model reads the error as the tool's result; the turn goes on.
		span.SetAttributes(attrToolOutcome.String("error"))
		recordError(span, err)
		return content, err
	}
	span.SetAttributes(attrToolOutcome.String("ok"))
	return content, nil
}

// noteUnavailableTool marks on the turn's span a call of a tool the session
// does not offer (seeded, or made up by the model): it runs nothing, so it
// has no span of its own, whose name the model would choose.
func noteUnavailableTool(ctx context.Context, c aap.ToolCall) {
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.AddEvent("tool unavailable", trace.WithAttributes(attrToolName.String(c.Name), attrToolCallID.String(c.ToolCallID)))
	}
}

// compactTraced is compactRetrying inside a "compact {strategy}" span: the
// automatic compaction after a turn (in the turn's trace) or one asked for
// (in its request's).
func (r *Runner) compactTraced(ctx context.Context, agent *Agent, sess store.Session, trigger string) (CompactOutcome, error) {
	if !trace.SpanFromContext(ctx).IsRecording() || agent.Compaction == nil {
		return r.compactRetrying(ctx, agent, sess, trigger)
	}
	strategy := string(agent.Compaction.Policy.Strategy)
	ctx, span := tracerFrom(ctx).Start(ctx, "compact "+strategy, trace.WithAttributes(
		attrCompTrigger.String(trigger), attrCompStrategy.String(strategy), attrAgentName.String(agent.Info.Name),
		attrTenant.String(sess.TenantID), attrSession.String(sess.ID)))
	defer span.End()
	out, err := r.compactRetrying(ctx, agent, sess, trigger)
	span.SetAttributes(attrCompChanged.Bool(out.Changed))
	if out.Changed {
		span.SetAttributes(attrTokensBefore.Int64(out.Record.TokensBefore), attrTokensAfter.Int64(out.Record.TokensAfter))
	}
	if err != nil {
		recordError(span, err)
	}
	return out, err
}

// recordError marks a span failed, with an error.type of few values.
func recordError(span trace.Span, err error) {
	kind := errorTypeOther
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, ErrCancelled):
		kind = errorTypeCanceled
	case errors.Is(err, context.DeadlineExceeded):
		kind = errorTypeTimeout
	}
	span.RecordError(err)
	span.SetStatus(codes.Error, err.Error())
	span.SetAttributes(attrErrorType.String(kind))
}
