package webhooks

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Attempt results, the values of aapd_webhook_attempts_total's label.
const (
	resultSuccess  = "success"   // a 2xx
	resultStatus   = "status"    // any other status
	resultTimeout  = "timeout"   // no answer in time
	resultNetwork  = "network"   // no connection, TLS refused, reset
	resultRefused  = "refused"   // the address or URL is not allowed (not public, not https)
	outcomeDeliver = "delivered" // aapd_webhook_deliveries_total's outcomes
	outcomeFail    = "failed"
)

// metrics are the deliverer's Prometheus metrics. Every series exists, at
// zero, from the start; no label comes from a tenant.
type metrics struct {
	attempts   *prometheus.CounterVec
	deliveries *prometheus.CounterVec
	lag        prometheus.Histogram
	oldestDue  prometheus.Gauge
	disabled   prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aapd_webhook_attempts_total",
			Help: "Webhook requests this process sent, by result: success (2xx), status (another status), timeout, network (no connection or TLS), refused (the URL or address is not allowed).",
		}, []string{"result"}),
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aapd_webhook_deliveries_total",
			Help: "Webhook deliveries this process ended, by outcome: delivered, or failed (every attempt failed, or the endpoint was disabled).",
		}, []string{"outcome"}),
		lag: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "aapd_webhook_delivery_lag_seconds",
			Help:    "Time from an event (a turn's end, a session's deletion) to the attempt that delivered it.",
			Buckets: prometheus.ExponentialBuckets(0.005, 4, 12),
		}),
		oldestDue: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "aapd_webhook_oldest_due_seconds",
			Help: "How long the webhook delivery due longest has waited for its attempt, across replicas (0: none is due).",
		}),
		disabled: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "aapd_webhook_endpoints_disabled",
			Help: "Webhook endpoints disabled (410 Gone, or failing for 5 days), across tenants.",
		}),
	}
	for _, r := range []string{resultSuccess, resultStatus, resultTimeout, resultNetwork, resultRefused} {
		m.attempts.WithLabelValues(r)
	}
	for _, o := range []string{outcomeDeliver, outcomeFail} {
		m.deliveries.WithLabelValues(o)
	}
	if reg != nil {
		reg.MustRegister(m.attempts, m.deliveries, m.lag, m.oldestDue, m.disabled)
	}
	return m
}
