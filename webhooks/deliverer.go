// Package webhooks sends a tenant's webhook events: the deliverer that
// every replica runs, which claims due deliveries from the outbox (written
// in the transactions that end turns and delete sessions, see store),
// sends them signed per Standard Webhooks, and retries them on a schedule;
// and the rules an endpoint's URL and secret follow.
package webhooks

import (
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/aapd/aapd/logctx"
	"github.com/aapd/aapd/store"
)

// Store is what the deliverer needs of the database.
type Store interface {
	WebhooksQueued() <-chan string
	WebhookDueTenants(ctx context.Context, now time.Time, limit int) ([]string, error)
	WebhookDeliveriesClaim(ctx context.Context, tenantID string, now time.Time, lease time.Duration, limit int) (store.WebhookClaim, error)
	WebhookAttemptsRecord(ctx context.Context, tenantID string, results []store.WebhookAttemptResult) (store.WebhookRecorded, error)
	WebhookDeliveryRelease(ctx context.Context, d store.WebhookDelivery, now time.Time) error
	WebhookStatsGet(ctx context.Context, now time.Time) (store.WebhookStats, error)
	WebhookDeliveriesPrune(ctx context.Context, before time.Time) (int64, error)
}

// Defaults of a Config.
const (
	DefaultTimeout      = 15 * time.Second
	DefaultPollInterval = time.Second
	DefaultConcurrency  = 64
	DefaultRetention    = 7 * 24 * time.Hour
)

// Config configures a Deliverer.
type Config struct {
	Store  Store
	Logger *slog.Logger
	// Registry receives the metrics (nil: registered nowhere).
	Registry prometheus.Registerer
	// AllowPrivate admits loopback and private addresses, and http URLs
	// (--webhook-allow-private): for tests and on-premises receivers.
	AllowPrivate bool
	// TLS, when set, is the requests' TLS configuration (tests trust their
	// receiver's certificate with it); nil: the system's roots.
	TLS *tls.Config
	// Timeout bounds one attempt, from dialling to the answer's status.
	Timeout time.Duration
	// PollInterval is how often the deliverer looks for due deliveries
	// (retries, and those another replica's turns queued); deliveries its
	// own process queues are claimed at once.
	PollInterval time.Duration
	// Concurrency bounds the attempts in flight at once.
	Concurrency int
	// Retention is how long a delivery is kept after it ended.
	Retention time.Duration
	// Now is the clock of the schedule; Rand returns a number in [0, 1)
	// for its jitter. nil: time.Now and math/rand.
	Now  func() time.Time
	Rand func() float64
}

// Deliverer sends the webhook deliveries of every tenant: one owner
// goroutine claims due ones (those its process queued, at once; the rest
// at each poll) and runs an attempt for each, at most Concurrency at a
// time; a recorder writes their outcomes, many at a time. Every replica
// runs one; their claims never share a delivery.
type Deliverer struct {
	cfg     Config
	st      Store
	log     *slog.Logger
	audits  *slog.Logger
	client  *http.Client
	metrics *metrics

	quit     chan struct{} // closed: stop claiming
	work     context.Context
	cancel   context.CancelFunc // ends the attempts in flight
	freed    chan struct{}      // an attempt ended
	results  chan outcome       // attempts' outcomes, to the recorder
	recorded chan struct{}      // the recorder returned
	done     chan struct{}      // the owner goroutine returned
	wg       sync.WaitGroup     // attempts in flight
	stop     sync.Once
}

// claimLease is how long a claimed delivery is held: an attempt's timeout
// and the recording of its result, with room to spare. A process that dies
// mid-attempt leaves its deliveries due again after it (30 s by default).
func (c Config) claimLease() time.Duration { return c.Timeout + 15*time.Second }

// Start starts a deliverer. Stop it with Stop.
func Start(cfg Config) *Deliverer {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = DefaultConcurrency
	}
	if cfg.Retention <= 0 {
		cfg.Retention = DefaultRetention
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.Float64
	}
	d := &Deliverer{
		cfg: cfg, st: cfg.Store, log: cfg.Logger, audits: logctx.Auditor(cfg.Logger),
		client: newClient(cfg), metrics: newMetrics(cfg.Registry),
		quit: make(chan struct{}), freed: make(chan struct{}, cfg.Concurrency), done: make(chan struct{}),
		results: make(chan outcome, cfg.Concurrency), recorded: make(chan struct{}),
	}
	d.work, d.cancel = context.WithCancel(context.Background())
	go d.run()
	go d.recorder()
	return d
}

// newClient is the deliverer's HTTP client: redirects are not followed (a
// 3xx is a failed attempt), no proxy, and, unless private addresses are
// allowed, only public addresses are dialled.
func newClient(cfg Config) *http.Client {
	dialer := &net.Dialer{Timeout: cfg.Timeout, KeepAlive: 30 * time.Second}
	if !cfg.AllowPrivate {
		dialer.Control = publicOnly
	}
	var tlsConfig *tls.Config
	if cfg.TLS != nil {
		tlsConfig = cfg.TLS.Clone()
	}
	return &http.Client{
		Transport: &http.Transport{
			Proxy:               nil,
			DialContext:         dialer.DialContext,
			TLSClientConfig:     tlsConfig,
			TLSHandshakeTimeout: cfg.Timeout,
			ForceAttemptHTTP2:   true,
			MaxIdleConns:        4 * cfg.Concurrency,
			MaxIdleConnsPerHost: cfg.Concurrency,
			IdleConnTimeout:     90 * time.Second,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// Stop stops claiming deliveries and waits for the attempts in flight
// until ctx ends; those still running then are abandoned, their
// deliveries given back, due at once, without counting an attempt. The
// outcomes of the attempts that ended are recorded before it returns.
func (d *Deliverer) Stop(ctx context.Context) {
	d.stop.Do(func() {
		close(d.quit)
		<-d.done
		finished := make(chan struct{})
		go func() {
			d.wg.Wait()
			close(finished)
		}()
		select {
		case <-finished:
		case <-ctx.Done():
			d.cancel()
			<-finished
		}
		d.cancel()
		close(d.results)
		<-d.recorded
		d.client.CloseIdleConnections()
	})
}

// Intervals of the owner's chores.
const (
	statsInterval = 5 * time.Second
	pruneInterval = time.Hour
	// scanLimit is how many due deliveries a scan looks at to find the
	// tenants they belong to.
	scanLimit = 1000
	// claimLimit is the most deliveries one claim takes.
	claimLimit = 100
)

// run is the owner goroutine: it learns which tenants have due deliveries,
// claims them while attempts may start, and keeps the figures.
func (d *Deliverer) run() {
	defer close(d.done)
	tick := time.NewTicker(d.cfg.PollInterval)
	defer tick.Stop()
	due := map[string]bool{} // tenants whose due deliveries may not all be claimed
	inFlight := 0
	scan := true
	var statsAt, pruneAt time.Time
	for {
		if scan {
			scan = false
			d.scan(due)
		}
		for tenant := range due {
			if inFlight == d.cfg.Concurrency {
				break
			}
			n := d.claim(tenant, min(d.cfg.Concurrency-inFlight, claimLimit))
			inFlight += n
			if n == 0 {
				// None due (or all held by other replicas' claims). A claim
				// short of what it asked for is not enough to tell: another
				// replica's claim running at the same moment skips rows.
				delete(due, tenant)
			}
		}
		if now := time.Now(); now.Sub(statsAt) >= statsInterval {
			statsAt = now
			d.refreshStats()
		}
		if now := time.Now(); now.Sub(pruneAt) >= pruneInterval {
			pruneAt = now
			d.prune()
		}
		select {
		case <-d.quit:
			return
		case tenant := <-d.st.WebhooksQueued():
			due[tenant] = true
		case <-tick.C:
			scan = true
		case <-d.freed:
			inFlight--
			// Every attempt that ended meanwhile: one claim for them all.
			for more := true; more; {
				select {
				case <-d.freed:
					inFlight--
				default:
					more = false
				}
			}
		}
	}
}

// scan adds the tenants with due deliveries to due.
func (d *Deliverer) scan(due map[string]bool) {
	ctx, cancel := context.WithTimeout(d.work, d.cfg.PollInterval+5*time.Second)
	defer cancel()
	tenants, err := d.st.WebhookDueTenants(ctx, d.cfg.Now(), scanLimit)
	if err != nil {
		d.log.Warn("find due webhook deliveries", "err", err)
		return
	}
	for _, t := range tenants {
		due[t] = true
	}
}

// claim claims up to want due deliveries of a tenant and starts an attempt
// for each; it returns how many it started.
func (d *Deliverer) claim(tenantID string, want int) int {
	ctx, cancel := context.WithTimeout(d.work, 10*time.Second)
	defer cancel()
	c, err := d.st.WebhookDeliveriesClaim(ctx, tenantID, d.cfg.Now(), d.cfg.claimLease(), want)
	if err != nil {
		d.log.Warn("claim webhook deliveries", "tenant_id", tenantID, "err", err)
		return 0
	}
	for _, dl := range c.Deliveries {
		d.wg.Add(1)
		go d.attempt(c, dl)
	}
	return len(c.Deliveries)
}

// refreshStats sets the gauges from the database.
func (d *Deliverer) refreshStats() {
	ctx, cancel := context.WithTimeout(d.work, 5*time.Second)
	defer cancel()
	st, err := d.st.WebhookStatsGet(ctx, d.cfg.Now())
	if err != nil {
		d.log.Warn("read webhook figures", "err", err)
		return
	}
	d.metrics.oldestDue.Set(st.OldestDue.Seconds())
	d.metrics.disabled.Set(float64(st.DisabledEndpoints))
}

// prune deletes the deliveries that ended more than Retention ago. Every
// replica does it, each hour; the deletions are the same.
func (d *Deliverer) prune() {
	ctx, cancel := context.WithTimeout(d.work, time.Minute)
	defer cancel()
	n, err := d.st.WebhookDeliveriesPrune(ctx, d.cfg.Now().Add(-d.cfg.Retention))
	if err != nil {
		d.log.Warn("prune webhook deliveries", "err", err)
		return
	}
	if n > 0 {
		d.log.Info("pruned webhook deliveries", "deliveries", n, "ended_before", d.cfg.Now().Add(-d.cfg.Retention))
	}
}
