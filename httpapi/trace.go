package httpapi

import (
	"net/http"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Propagators are how trace context crosses aapd's door: W3C traceparent
// and tracestate, and baggage.
var Propagators propagation.TextMapPropagator = propagation.NewCompositeTextMapPropagator(
	propagation.TraceContext{}, propagation.Baggage{})

// untraced are the probes and scrapes that would otherwise make a trace
// every few seconds each.
var untraced = map[string]bool{"/healthz": true, "/readyz": true, "/metrics": true}

// Traced serves h inside an OpenTelemetry server span per request
// (docs/operations.md, "Tracing"), continuing the client's trace when the
// request carries a traceparent. The span is named after the route template
// the router matched ("POST /sessions/{id}/turns", see nameSpan), never the
// raw path, whose ids would make every name unique. With no provider it
// returns h itself: tracing off costs nothing.
func Traced(h http.Handler, tp trace.TracerProvider) http.Handler {
	if tp == nil {
		return h
	}
	return otelhttp.NewHandler(h, "aapd",
		otelhttp.WithTracerProvider(tp),
		otelhttp.WithPropagators(Propagators),
		// Metrics are Prometheus's (metrics.go), not OpenTelemetry's.
		otelhttp.WithMeterProvider(metricnoop.NewMeterProvider()),
		otelhttp.WithFilter(func(r *http.Request) bool { return !untraced[r.URL.Path] }),
	)
}

// nameSpan names the request's span after the route that matched, once
// the router knows it, and records it as http.route.
func nameSpan(r *http.Request, route string) {
	span := trace.SpanFromContext(r.Context())
	if !span.IsRecording() || route == "" {
		return
	}
	span.SetName(r.Method + " " + route)
	span.SetAttributes(attribute.String("http.route", route))
}
