package httpapi

import (
	"net/http"
	"strconv"
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
			Help: "HTTP requests by method, route and status.",
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

func (m *metrics) observeRequest(method, route string, status int, d time.Duration) {
	m.requests.WithLabelValues(method, route, strconv.Itoa(status)).Inc()
	m.duration.WithLabelValues(method, route).Observe(d.Seconds())
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{})
}
