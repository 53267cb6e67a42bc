package store

import (
	"github.com/exaring/otelpgx"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/multitracer"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
)

// queryTracer is what observes the store's statements: the caller's
// Tracer, OpenTelemetry spans when a TracerProvider is given, or both. Nil
// when neither is, so an untraced store pays nothing.
//
// The spans (otelpgx) are children of the span in the statement's context
// and only made when that span records: a request's or a turn's statements
// appear in their trace, while background work (heartbeats, listeners) makes
// no trace of its own. They carry the statement's text, which is fixed SQL,
// never its arguments, which hold users' messages.
func queryTracer(cfg Config) pgx.QueryTracer {
	var tracers []pgx.QueryTracer
	if cfg.Tracer != nil {
		tracers = append(tracers, cfg.Tracer)
	}
	if cfg.TracerProvider != nil {
		tracers = append(tracers, otelpgx.NewTracer(
			otelpgx.WithTracerProvider(cfg.TracerProvider),
			// Metrics are Prometheus's (docs/operations.md), not OpenTelemetry's.
			otelpgx.WithMeterProvider(metricnoop.NewMeterProvider()),
		))
	}
	switch len(tracers) {
	case 0:
		return nil
	case 1:
		return tracers[0]
	}
	return multitracer.New(tracers...)
}
