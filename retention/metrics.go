package retention

import "github.com/prometheus/client_golang/prometheus"

// Sweep results, the values of aapd_retention_sweeps_total's label.
const (
	resultDone   = "done"   // the sweep ran to its end
	resultBusy   = "busy"   // another process was sweeping
	resultFailed = "failed" // the sweep stopped on an error
)

// Kinds of deleted messages, the values of
// aapd_retention_messages_deleted_total's label.
const (
	kindIdleSession = "idle_session" // deleted with an idle session
	kindFullHistory = "full_history" // trimmed from a kept session's full history
)

// metrics are the sweeper's Prometheus metrics. Every series exists, at
// zero, from the start; no label comes from a tenant.
type metrics struct {
	sweeps    *prometheus.CounterVec
	sessions  prometheus.Counter
	messages  *prometheus.CounterVec
	lastSweep prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		sweeps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aapd_retention_sweeps_total",
			Help: "Retention sweeps this process began, by result: done, busy (another replica was sweeping), failed.",
		}, []string{"result"}),
		sessions: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "aapd_retention_sessions_deleted_total",
			Help: "Idle sessions the retention sweeper of this process deleted, with every row of them.",
		}),
		messages: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aapd_retention_messages_deleted_total",
			Help: "Full-history messages the retention sweeper of this process deleted, by kind: idle_session (with their idle session), full_history (trimmed from a kept session's full history).",
		}, []string{"kind"}),
		lastSweep: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "aapd_retention_last_sweep_timestamp_seconds",
			Help: "When this process last finished a retention sweep (Unix time; 0: never).",
		}),
	}
	for _, r := range []string{resultDone, resultBusy, resultFailed} {
		m.sweeps.WithLabelValues(r)
	}
	m.messages.WithLabelValues(kindIdleSession)
	m.messages.WithLabelValues(kindFullHistory)
	if reg != nil {
		reg.MustRegister(m.sweeps, m.sessions, m.messages, m.lastSweep)
	}
	return m
}
