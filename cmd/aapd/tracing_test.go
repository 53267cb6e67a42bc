package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/httpapi"
)

func TestTracingOffUnlessAsked(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		env  map[string]string
		want bool
	}{
		{nil, false},
		{map[string]string{"OTEL_SERVICE_NAME": "aapd-eu"}, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, true},
		{map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, true},
		{map[string]string{"OTEL_TRACES_EXPORTER": "console"}, true},
		{map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, false},
		{map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, false},
	} {
		getenv := func(k string) string { return tc.env[k] }
		if got := tracingWanted(getenv); got != tc.want {
			t.Errorf("tracingWanted(%v) = %v, want %v", tc.env, got, tc.want)
		}
		if tc.want {
			continue
		}
		tr, err := startTracing(context.Background(), getenv)
		if err != nil || tr.provider != nil {
			t.Errorf("startTracing(%v) = %v, %v; want no provider", tc.env, tr.provider, err)
		}
	}
}

// TestTracingNoOpServer: a server started with no OTEL_* variables records
// nothing and wraps nothing: its handler is the API itself.
func TestTracingNoOpServer(t *testing.T) {
	for _, k := range []string{"OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"} {
		if os.Getenv(k) != "" {
			t.Skipf("%s is set in the test's environment", k)
		}
	}
	s := startServer(t)
	if s.tracing.provider != nil {
		t.Fatalf("tracing on without OTEL_* variables: %T", s.tracing.provider)
	}
	if h := s.http.Handler; h != http.Handler(s.API) {
		t.Errorf("the server's handler is %T, want the API unwrapped", h)
	}
	if err := s.tracing.shutdown(context.Background()); err != nil {
		t.Error(err)
	}
}

// TestTracingFromEnvironment: an OTLP endpoint turns tracing on, and its
// shutdown flushes and returns.
func TestTracingFromEnvironment(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
	tr, err := startTracing(context.Background(), os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := tr.provider.(*sdktrace.TracerProvider); !ok {
		t.Fatalf("provider %T, want the SDK's", tr.provider)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := tr.shutdown(ctx); err != nil {
		t.Errorf("shutdown with nothing to export: %v", err)
	}
}

// TestTraceOfOneTurn runs a turn with a server tool call through the real
// HTTP server and an OpenAI-compatible model, and checks the tree of spans
// it leaves: the request in the client's trace, the turn under it and
// linked to it, a chat span per model call with the GenAI attributes, the
// tool call, and the turn's SQL. (Raw: the traceparent header is the wire.)
func TestTraceOfOneTurn(t *testing.T) {
	t.Parallel()
	exporter := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exporter))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })

	fake := &fakeProvider{t: t, script: []string{
		openaiCompletion(`{"role":"assistant","content":null,"tool_calls":[{"id":"call_a","type":"function","function":{"name":"calculator","arguments":"{\"expression\":\"6*7\"}"}}]}`,
			"tool_calls", `{"prompt_tokens":50,"completion_tokens":8,"total_tokens":58}`),
		openaiCompletion(`{"role":"assistant","content":"It is 42."}`, "stop", `{"prompt_tokens":70,"completion_tokens":3,"total_tokens":73}`),
	}}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	s := providerServer(t, "openai", srv.URL+"/v1", func(c *Config) { c.TracerProvider = tp })
	c := s.newTenant(t)
	sid := c.createSession(map[string]any{"agent": map[string]any{"name": "bot",
		"tools": []any{map[string]any{"name": "calculator", "trust": true}}, "options": map[string]string{"model": "model-b"}}})

	clientTrace, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	clientSpan, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	traceparent := fmt.Sprintf("00-%s-%s-01", clientTrace, clientSpan)
	r := c.do("POST", "/sessions/"+sid+"/turns", user("what is 6*7?"), "traceparent", traceparent).expect(t, http.StatusOK)
	var resp aap.TurnResponse
	r.json(t, &resp)
	if resp.StopReason != aap.StopEndTurn || resp.Messages[len(resp.Messages)-1].Content.PlainText() != "It is 42." {
		t.Fatalf("turn: %+v", resp)
	}
	turnID := r.Header.Get(httpapi.TurnIDHeader)

	// The request's span ends just after its response is written.
	const route = "POST /sessions/{id}/turns"
	var spans tracetest.SpanStubs
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		spans = exporter.GetSpans()
		if slices.ContainsFunc(spans, func(s tracetest.SpanStub) bool { return s.Name == route }) || time.Now().After(deadline) {
			break
		}
	}
	find := func(name string) []tracetest.SpanStub {
		var out []tracetest.SpanStub
		for _, s := range spans {
			if s.Name == name {
				out = append(out, s)
			}
		}
		return out
	}
	one := func(name string) tracetest.SpanStub {
		t.Helper()
		found := find(name)
		if len(found) != 1 {
			var names []string
			for _, s := range spans {
				names = append(names, s.Name)
			}
			t.Fatalf("%d spans named %q, want 1; spans: %s", len(found), name, strings.Join(names, ", "))
		}
		return found[0]
	}

	req := one(route)
	if req.SpanKind != trace.SpanKindServer || req.Parent.TraceID() != clientTrace || req.Parent.SpanID() != clientSpan || !req.Parent.IsRemote() {
		t.Errorf("request span: kind %v, parent %v, want a server span under the client's %s", req.SpanKind, req.Parent, traceparent)
	}
	wantAttrs(t, req, attribute.String("http.route", "/sessions/{id}/turns"), attribute.Int("http.response.status_code", 200))

	turn := one("invoke_agent bot")
	if turn.Parent.SpanID() != req.SpanContext.SpanID() || turn.SpanContext.TraceID() != clientTrace {
		t.Errorf("turn span's parent %v, want the request's span %v", turn.Parent, req.SpanContext)
	}
	if len(turn.Links) != 1 || !turn.Links[0].SpanContext.Equal(req.SpanContext) {
		t.Errorf("turn span's links %+v, want one to the request's span", turn.Links)
	}
	wantAttrs(t, turn, attribute.String("gen_ai.operation.name", "invoke_agent"), attribute.String("gen_ai.agent.name", "bot"),
		attribute.String("aapd.turn.id", turnID), attribute.String("aapd.session.id", sid),
		attribute.String("aapd.turn.status", "completed"), attribute.String("aapd.turn.stop_reason", "end_turn"),
		attribute.Int64("gen_ai.usage.input_tokens", 120), attribute.Int64("gen_ai.usage.output_tokens", 11))

	chats := find("chat model-b")
	if len(chats) != 2 {
		t.Fatalf("%d chat spans, want one per model call (2)", len(chats))
	}
	slices.SortFunc(chats, func(a, b tracetest.SpanStub) int { return a.StartTime.Compare(b.StartTime) })
	for i, usage := range [][2]int64{{50, 8}, {70, 3}} {
		if chats[i].Parent.SpanID() != turn.SpanContext.SpanID() || chats[i].SpanKind != trace.SpanKindClient {
			t.Errorf("chat span %d: parent %v kind %v, want a client span under the turn", i, chats[i].Parent, chats[i].SpanKind)
		}
		wantAttrs(t, chats[i], attribute.String("gen_ai.operation.name", "chat"), attribute.String("gen_ai.provider.name", "openai"),
			attribute.String("gen_ai.system", "openai"), attribute.String("gen_ai.request.model", "model-b"),
			attribute.Int64("gen_ai.usage.input_tokens", usage[0]), attribute.Int64("gen_ai.usage.output_tokens", usage[1]))
	}

	tool := one("execute_tool calculator")
	if tool.Parent.SpanID() != turn.SpanContext.SpanID() {
		t.Errorf("tool span's parent %v, want the turn", tool.Parent)
	}
	if !tool.StartTime.After(chats[0].EndTime) || tool.EndTime.After(chats[1].StartTime) {
		t.Errorf("the tool ran at %v-%v, not between the model calls", tool.StartTime, tool.EndTime)
	}
	wantAttrs(t, tool, attribute.String("gen_ai.operation.name", "execute_tool"), attribute.String("gen_ai.tool.name", "calculator"),
		attribute.String("gen_ai.tool.call.id", "call_a"), attribute.String("aapd.tool.kind", "server"), attribute.String("aapd.tool.outcome", "ok"))

	// The turn's SQL, from its claim to its end, is in the turn; all is in
	// the client's trace but the creation of the session, in its own.
	created := one("POST /sessions").SpanContext.TraceID()
	var turnSQL []string
	for _, s := range spans {
		if tr := s.SpanContext.TraceID(); tr != clientTrace && tr != created {
			t.Errorf("span %q in trace %v, want the client's", s.Name, s.SpanContext.TraceID())
		}
		if hasAttr(s, attribute.String("db.system.name", "postgresql")) && s.Parent.SpanID() == turn.SpanContext.SpanID() {
			turnSQL = append(turnSQL, attrValue(s, "db.query.text"))
		}
	}
	if len(turnSQL) < 2 {
		t.Errorf("%d SQL spans under the turn, want its claim and its end at least: %q", len(turnSQL), turnSQL)
	}
}

func wantAttrs(t *testing.T, s tracetest.SpanStub, want ...attribute.KeyValue) {
	t.Helper()
	for _, kv := range want {
		if !hasAttr(s, kv) {
			t.Errorf("span %q: no %s=%s; has %v", s.Name, kv.Key, kv.Value.Emit(), s.Attributes)
		}
	}
}

func hasAttr(s tracetest.SpanStub, want attribute.KeyValue) bool {
	return slices.ContainsFunc(s.Attributes, func(kv attribute.KeyValue) bool { return kv == want })
}

func attrValue(s tracetest.SpanStub, key attribute.Key) string {
	for _, kv := range s.Attributes {
		if kv.Key == key {
			return kv.Value.Emit()
		}
	}
	return ""
}
