package scheduler

import "github.com/prometheus/client_golang/prometheus"

// Why a tick started no turn: aapd_schedule_ticks_skipped_total's label.
const (
	skipRunning = "running" // the session still ran a turn
	skipMissed  = "missed"  // missed while no process ran, more than a period late
	skipRefused = "refused" // the pipeline refused the turn
)

// metrics are the scheduler's Prometheus metrics. Every series exists, at
// zero, from the start; no label comes from a tenant.
type metrics struct {
	runs  prometheus.Counter
	skips *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		runs: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "aapd_schedule_ticks_total",
			Help: "Schedule ticks this process fired that started a background turn.",
		}),
		skips: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aapd_schedule_ticks_skipped_total",
			Help: "Schedule ticks this process skipped, by reason: running (the session still ran a turn), missed (missed while no process ran, more than a period late), refused (the turn was refused).",
		}, []string{"reason"}),
	}
	for _, r := range []string{skipRunning, skipMissed, skipRefused} {
		m.skips.WithLabelValues(r)
	}
	if reg != nil {
		reg.MustRegister(m.runs, m.skips)
	}
	return m
}

func (m *metrics) ran() { m.runs.Inc() }

func (m *metrics) skipped(reason string, n int) { m.skips.WithLabelValues(reason).Add(float64(n)) }
