package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	openaidoor "github.com/aapd/aapd/httpapi/openai"
)

// A turn on a conversation through the OpenAI door is the same turn as
// through AAP v3 (issue 30: at most 1.1× its cost): the door checks the
// conversation's agent in the turn's claim instead of reading the
// conversation first, so the turn sends the database no more statements.
// Counted from the statements' spans in each request's trace, after two
// turns of each that warm the connections and the process's cache.
func TestAnOpenAIDoorTurnSendsNoMoreSQLThanAnAAPv3Turn(t *testing.T) {
	t.Parallel()
	exporter := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exporter))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	s := startServer(t, func(c *Config) { c.TracerProvider = tp })
	c := s.newTenant(t)

	statements := func(n int, path string, body any) []string {
		t.Helper()
		var tid trace.TraceID
		copy(tid[:], fmt.Sprintf("sqlcount%08d", n))
		for range 2 {
			c.do("POST", path, body).expect(t, http.StatusOK)
		}
		c.do("POST", path, body, "traceparent", fmt.Sprintf("00-%s-00f067aa0ba902b7-01", tid)).expect(t, http.StatusOK)
		// The request's span ends once its answer is written; the turn's
		// statements end before it.
		var spans tracetest.SpanStubs
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			spans = exporter.GetSpans()
			if slices.ContainsFunc(spans, func(s tracetest.SpanStub) bool {
				return s.SpanContext.TraceID() == tid && s.SpanKind == trace.SpanKindServer
			}) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("no span of the request to %s", path)
			}
		}
		var sql []string
		for _, s := range spans {
			if s.SpanContext.TraceID() == tid && hasAttr(s, attribute.String("db.system.name", "postgresql")) {
				sql = append(sql, attrValue(s, "db.query.text"))
			}
		}
		return sql
	}
	v3 := statements(1, "/sessions/"+c.echoSession(nil)+"/turns", user("hello there"))
	door := statements(2, openaidoor.Prefix+"/responses",
		map[string]any{"model": "echo", "conversation": c.echoSession(nil), "input": "hello there"})
	if len(v3) < 2 {
		t.Fatalf("an AAP v3 turn sent %d statements: the spans are not counted (%q)", len(v3), v3)
	}
	if len(door) > len(v3) {
		t.Errorf("a turn through the OpenAI door sent %d statements, through AAP v3 %d:\ndoor: %q\nv3:   %q", len(door), len(v3), door, v3)
	}
}

// A conversation keeps its agent: a response that names another model is
// refused (400, param "model") in the turn's claim, before anything is
// stored, and the conversation goes on with its own.
func TestAConversationKeepsItsAgent(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "agents.yaml")
	cfg := "agents:\n  - name: one\n    model: {provider: echo}\n  - name: two\n    model: {provider: echo}\n"
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, func(c *Config) { c.AgentsFile = path })
	c := s.newTenant(t)
	sid := c.createSession(map[string]any{"agent": map[string]any{"name": "one"}})
	ask := func(model string) response {
		return c.do("POST", openaidoor.Prefix+"/responses", map[string]any{"model": model, "conversation": sid, "input": "hello there"})
	}
	ask("one").expect(t, http.StatusOK)
	var refused struct {
		Error struct{ Type, Param, Message string }
	}
	ask("two").expect(t, http.StatusBadRequest).json(t, &refused)
	if refused.Error.Type != "invalid_request_error" || refused.Error.Param != "model" {
		t.Errorf("another model on the conversation: %+v", refused.Error)
	}
	ask("one").expect(t, http.StatusOK)
	var page struct{ Turns []struct{ ID string } }
	c.do("GET", "/sessions/"+sid+"/turns", nil).expect(t, http.StatusOK).json(t, &page)
	if len(page.Turns) != 2 {
		t.Errorf("the conversation has %d turns, want the two of agent one", len(page.Turns))
	}
}
