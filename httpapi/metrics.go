package httpapi

import (
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/gorilla/mux"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/aapd/aapd/store"
)

// metrics are the server's Prometheus metrics. They live on the registry
// Config.Registry names, which aapd serve shares with the runner's metrics
// (agents.NewMetrics), or else on one of the server's own, so that several
// servers can live in one process (as in tests).
type metrics struct {
	registry *prometheus.Registry
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	// clientDisconnects counts requests whose client went away before the
	// server was done: not server errors, but worth watching (a proxy's
	// timeout shorter than a turn shows up here).
	clientDisconnects *prometheus.CounterVec
	// streams counts the SSE responses open now.
	streams prometheus.Gauge
	// rejections counts requests refused for want of capacity or turn:
	// rejected, rejectionCauses.
	rejections *prometheus.CounterVec
	// keyLookups counts the API keys read from the database to
	// authenticate a request, by result: found, unknown, error. A key
	// already known, or known not to exist, is not read again
	// (keycache.go).
	keyLookups *prometheus.CounterVec
}

// metricsConfig is what newMetrics registers beyond the HTTP metrics.
type metricsConfig struct {
	registry *prometheus.Registry // nil: a new one
	running  func() int           // turns running in this process
	pool     func() store.PoolStat
	build    BuildInfo
}

func newMetrics(cfg metricsConfig) *metrics {
	reg := cfg.registry
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	m := &metrics{
		registry: reg,
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
		streams: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "aapd_sse_streams_open",
			Help: "Server-Sent Events responses open now (turns streamed and turns followed).",
		}),
		rejections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aapd_rejections_total",
			Help: "Requests refused for want of capacity or of the session, by cause: busy and compacting (409), rate_limited, running_turns_limit, fair_share, queue_full and auth_throttled (429), saturated and unavailable (503).",
		}, []string{"cause"}),
		keyLookups: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aapd_api_key_lookups_total",
			Help: "API keys read from the database to authenticate a request, by result: found, unknown (no such key: remembered, not read again for a while), error (the database failed).",
		}, []string{"result"}),
	}
	running := cfg.running
	if running == nil {
		running = func() int { return 0 }
	}
	reg.MustRegister(m.requests, m.duration, m.clientDisconnects, m.streams, m.rejections, m.keyLookups,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "aapd_turns_running",
			Help: "Turns running in this process.",
		}, func() float64 { return float64(running()) }),
		newBuildInfo(cfg.build),
	)
	if cfg.pool != nil {
		reg.MustRegister(newPoolCollector(cfg.pool))
	}
	for _, cause := range rejectionCauses {
		m.rejections.WithLabelValues(cause) // every cause shows, at 0, from the start
	}
	for _, result := range keyLookupResults {
		m.keyLookups.WithLabelValues(result)
	}
	return m
}

// rejectionCauses label the problems counted in aapd_rejections_total, by
// problem type slug: each kind of refusal an operator sizes for.
var rejectionCauses = map[string]string{
	probTurnRunning.slug:  "busy",
	probCompacting.slug:   "compacting",
	probRateLimited.slug:  "rate_limited",
	probTurnLimit.slug:    "running_turns_limit",
	probFairShare.slug:    "fair_share",
	probQueueFull.slug:    "queue_full",
	probAuthThrottle.slug: "auth_throttled",
	probOverloaded.slug:   "saturated",
	probUnavailable.slug:  "unavailable",
}

// keyLookupResults label aapd_api_key_lookups_total.
var keyLookupResults = []string{"found", "unknown", "error"}

// keyLookedUp counts a key read from the database, by its result.
func (m *metrics) keyLookedUp(err error) {
	result := keyLookupResults[0]
	switch {
	case errors.Is(err, store.ErrNotFound):
		result = keyLookupResults[1]
	case err != nil:
		result = keyLookupResults[2]
	}
	m.keyLookups.WithLabelValues(result).Inc()
}

// exportRoutes makes the series of every route exist, at zero, from the
// start, so that a dashboard's panel or an alert sees them before the first
// request: each route's requests by method and the status classes a route
// answers (2xx, 4xx, 5xx), their durations, and its client disconnects;
// "unmatched" too.
func (m *metrics) exportRoutes(r *mux.Router) {
	export := func(route string, methods []string) {
		m.clientDisconnects.WithLabelValues(route)
		for _, method := range methods {
			for _, class := range []string{"2xx", "4xx", "5xx"} {
				m.requests.WithLabelValues(methodLabel(method), route, class)
			}
			m.duration.WithLabelValues(methodLabel(method), route)
		}
	}
	export("unmatched", []string{http.MethodGet, http.MethodPost, http.MethodOptions})
	_ = r.Walk(func(route *mux.Route, _ *mux.Router, _ []*mux.Route) error {
		tpl, err := route.GetPathTemplate()
		if err != nil {
			return nil
		}
		methods, err := route.GetMethods()
		if err != nil { // a prefix taking every method (/admin/v1/)
			methods = []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete}
		}
		export(tpl, methods)
		return nil
	})
}

// rejected counts p if it is a rejection (rejectionCauses).
func (m *metrics) rejected(p *Problem) {
	if cause, ok := rejectionCauses[strings.TrimPrefix(p.Type, ProblemTypeBase)]; ok {
		m.rejections.WithLabelValues(cause).Inc()
	}
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
