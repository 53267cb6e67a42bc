package httpapi

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/aapd/aapd/store"
)

// poolCollector reports the database connection pool at each scrape, from
// store.PoolStat: a pool short of connections shows as acquired near max,
// and as acquire wait growing faster than acquires.
type poolCollector struct {
	stat                                 func() store.PoolStat
	acquired, idle, total, max           *prometheus.Desc
	acquires, acquireWait, emptyAcquires *prometheus.Desc
}

func newPoolCollector(stat func() store.PoolStat) *poolCollector {
	d := func(name, help string) *prometheus.Desc { return prometheus.NewDesc(name, help, nil, nil) }
	return &poolCollector{
		stat:          stat,
		acquired:      d("aapd_db_pool_acquired_connections", "Database connections in use now."),
		idle:          d("aapd_db_pool_idle_connections", "Database connections idle now."),
		total:         d("aapd_db_pool_total_connections", "Database connections open now (in use, idle, and being opened)."),
		max:           d("aapd_db_pool_max_connections", "The most database connections the pool opens (--db-max-conns)."),
		acquires:      d("aapd_db_pool_acquires_total", "Connections acquired from the pool."),
		acquireWait:   d("aapd_db_pool_acquire_wait_seconds_total", "Time spent acquiring connections from the pool, in total."),
		emptyAcquires: d("aapd_db_pool_empty_acquires_total", "Acquires that waited because no connection was idle."),
	}
}

// Describe sends the descriptors of every metric Collect reports.
func (c *poolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.acquired, c.idle, c.total, c.max, c.acquires, c.acquireWait, c.emptyAcquires} {
		ch <- d
	}
}

// Collect reports the pool as it is now.
func (c *poolCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.stat()
	gauge := func(d *prometheus.Desc, v float64) { ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v) }
	counter := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v)
	}
	gauge(c.acquired, float64(s.AcquiredConns))
	gauge(c.idle, float64(s.IdleConns))
	gauge(c.total, float64(s.TotalConns))
	gauge(c.max, float64(s.MaxConns))
	counter(c.acquires, float64(s.AcquireCount))
	counter(c.acquireWait, s.AcquireDuration.Seconds())
	counter(c.emptyAcquires, float64(s.EmptyAcquireCount))
}
