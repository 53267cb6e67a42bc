package httpapi

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metrics are the server's Prometheus metrics, on a registry of its own so
// that several servers can live in one process (as in tests).
type metrics struct {
	registry *prometheus.Registry
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	// clientDisconnects counts requests whose client went away before the
	// server was done: not server errors, but worth watching (a proxy's
	// timeout shorter than a turn shows up here).
	clientDisconnects *prometheus.CounterVec
}

func newMetrics(running func() int) *metrics {
	m := &metrics{
		registry: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aapd_http_requests_total",
			Help: "HTTP requests by method, route and status class (labels from fixed sets: methodLabel, statusClass).",
		}, []string{"method", "route", "status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "aapd_http_request_duration_seconds",
			Help:    "HTTP request durations by method and route (streams last as long as their turn).",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10),
		}, []string{"method", "route"}),
		clientDisconnects: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aapd_http_client_disconnects_total",
			Help: "HTTP requests whose client went away before the server was done, by route (logged with status 499 unless a stream had started).",
		}, []string{"route"}),
	}
	m.registry.MustRegister(m.requests, m.duration, m.clientDisconnects,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "aapd_turns_running",
			Help: "Turns running in this process.",
		}, func() float64 { return float64(running()) }),
	)
	return m
}

// observeRequest counts a request. Every label comes from a fixed set —
// the route template (or "unmatched"), methodLabel, statusClass — never
// from what a client sent, so no request can add a series: a label taken
// from user input once let 2,000 requests with made-up methods grow
// /metrics to 117 MB.
func (m *metrics) observeRequest(method, route string, status int, d time.Duration) {
	m.requests.WithLabelValues(methodLabel(method), route, statusClass(status)).Inc()
	m.duration.WithLabelValues(methodLabel(method), route).Observe(d.Seconds())
}

// knownMethods are the methods that get a label of their own.
var knownMethods = map[string]bool{
	http.MethodGet: true, http.MethodPost: true, http.MethodPut: true, http.MethodPatch: true,
	http.MethodDelete: true, http.MethodOptions: true, http.MethodHead: true,
}

// methodLabel is the method's label: the method itself when it is one of
// knownMethods, else "other".
func methodLabel(method string) string {
	if knownMethods[method] {
		return method
	}
	return "other"
}

// statusClasses are the labels statusClass returns, by hundreds.
var statusClasses = [...]string{"other", "1xx", "2xx", "3xx", "4xx", "5xx"}

// statusClass is the status's label: its class ("2xx", "4xx", ...), or
// "other" outside 100–599. A client that went away is logged with 499 and
// counted here as "4xx" (and in aapd_http_client_disconnects_total); the
// exact status of every request is in its access log line.
func statusClass(status int) string {
	if status < 100 || status > 599 {
		return statusClasses[0]
	}
	return statusClasses[status/100]
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{})
}

// MetricsHandler serves the server's metrics in the Prometheus format, for
// a listener of their own (Config.SeparateMetrics).
func (s *Server) MetricsHandler() http.Handler { return s.metrics.handler() }

// metricsRoute is /metrics on the main handler: nil when the metrics have a
// listener of their own, behind the operator token when there is one, and
// public only when neither is configured (as before either existed;
// production sets one, docs/operations.md).
func (s *Server) metricsRoute() http.Handler {
	switch {
	case s.cfg.SeparateMetrics:
		return nil
	case s.cfg.AdminToken != "":
		return s.requireOperator(s.metrics.handler())
	}
	return s.metrics.handler()
}
