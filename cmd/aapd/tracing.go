package main

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"go.opentelemetry.io/contrib/exporters/autoexport"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/aapd/aapd/httpapi"
)

// tracingFlushTimeout bounds the export of the last spans at shutdown: a
// collector that does not answer must not hold the process.
const tracingFlushTimeout = 5 * time.Second

// tracing is the process's OpenTelemetry tracer provider (docs/operations.md,
// "Tracing"), owned by Main: started before the store, shut down (flushing
// the spans still queued) after everything else has stopped.
type tracing struct {
	// provider is nil when tracing is off: nothing is wrapped, nothing is
	// recorded, nothing is exported.
	provider trace.TracerProvider
	shutdown func(context.Context) error
}

// tracingOff is tracing as it is unless asked for.
var tracingOff = &tracing{shutdown: func(context.Context) error { return nil }}

// tracingWanted reads the standard variables: tracing is on when an
// exporter is named (OTEL_TRACES_EXPORTER, other than "none") or an OTLP
// endpoint is set, and the SDK is not disabled. Unlike the SDK's own
// default, an unset OTEL_TRACES_EXPORTER does not mean OTLP to localhost:
// a server that nobody asked to export spans records none.
func tracingWanted(getenv func(string) string) bool {
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return false
	}
	if exp := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")); exp != "" {
		return exp != "none"
	}
	return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// startTracing returns the tracing the environment asks for: spans batched
// to the exporter autoexport builds from the standard variables (OTLP over
// http/protobuf or grpc per OTEL_EXPORTER_OTLP_PROTOCOL, or "console"),
// sampled per OTEL_TRACES_SAMPLER (parent-based, always on, by default), for
// a resource named by OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES
// (service.name "aapd" by default).
func startTracing(ctx context.Context, getenv func(string) string) (*tracing, error) {
	if !tracingWanted(getenv) {
		return tracingOff, nil
	}
	exp, err := autoexport.NewSpanExporter(ctx)
	if err != nil {
		return nil, fmt.Errorf("tracing: %w", err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", "aapd"),
			attribute.String("service.version", readBuildVersion().Version)),
		resource.WithFromEnv(), // after the defaults, so OTEL_SERVICE_NAME wins
		resource.WithTelemetrySDK(),
	)
	if err != nil {
		_ = exp.Shutdown(ctx)
		return nil, fmt.Errorf("tracing: resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return &tracing{provider: tp, shutdown: tp.Shutdown}, nil
}

// openTracing is the tracing of a server: through the provider of its
// Config when it has one (tests' in-memory exporters: used, never shut
// down), else as the environment says.
func openTracing(ctx context.Context, given trace.TracerProvider, logger *slog.Logger) (*tracing, error) {
	if given != nil {
		return &tracing{provider: given, shutdown: tracingOff.shutdown}, nil
	}
	t, err := startTracing(ctx, os.Getenv)
	if err != nil || t.provider == nil {
		return t, err
	}
	// The process's own tracing is also the global one, for libraries that
	// trace by themselves; export failures go to the log, not to stderr in
	// another format.
	otel.SetTracerProvider(t.provider)
	otel.SetTextMapPropagator(httpapi.Propagators)
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { logger.Warn("opentelemetry", "err", err) }))
	logger.Info("tracing on", "exporter", cmp.Or(os.Getenv("OTEL_TRACES_EXPORTER"), "otlp"))
	return t, nil
}
