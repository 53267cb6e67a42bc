package main

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/aapd/aapd/agents"
	"github.com/aapd/aapd/agents/agentconfig"
	"github.com/aapd/aapd/agents/echo"
	"github.com/aapd/aapd/auth"
	"github.com/aapd/aapd/httpapi"
	"github.com/aapd/aapd/httpapi/admin"
	"github.com/aapd/aapd/httpapi/agui"
	openaidoor "github.com/aapd/aapd/httpapi/openai"
	"github.com/aapd/aapd/httpapi/sandboxagent"
	v1 "github.com/aapd/aapd/httpapi/v1"
	v3 "github.com/aapd/aapd/httpapi/v3"
	"github.com/aapd/aapd/logctx"
	"github.com/aapd/aapd/quota"
	"github.com/aapd/aapd/retention"
	"github.com/aapd/aapd/scheduler"
	"github.com/aapd/aapd/store"
	"github.com/aapd/aapd/turnqueue"
	"github.com/aapd/aapd/webhooks"
)

// Config is everything `aapd serve` can be told.
type Config struct {
	Addr        string
	DatabaseURL string
	// MigrateDatabaseURL is the tables' owner's, for migrating and
	// creating the database; empty: DatabaseURL (docs/operations.md).
	MigrateDatabaseURL string
	NoMigrate          bool
	CreateDatabase     bool
	MetaRequiresAuth   bool
	AdminToken         string // the operator's token; /metrics on the main listener requires it when set
	CORSOrigins        []string
	Workers            int
	// DBMaxConns bounds the connection pool; zero sizes it from Workers
	// (DefaultDBMaxConns).
	DBMaxConns int
	// HistoryCacheMB bounds the memory, in MiB, kept for the decoded
	// histories of recently active sessions; zero: the runner's default.
	HistoryCacheMB int
	// ShutdownDelay is how long the server keeps serving after a shutdown
	// begins, with /readyz failing, so load balancers stop sending to it.
	ShutdownDelay time.Duration
	Lease         time.Duration
	// MaxAttempts bounds the workers that may begin a background turn
	// (docs/background.md).
	MaxAttempts  int
	DrainTimeout time.Duration
	MaxBodyBytes int64
	// ImportMaxBytes bounds an import document (POST /sessions/import).
	ImportMaxBytes int64
	KeepAlive      time.Duration
	// Edge holds the listeners' timeouts and limits, and where /metrics
	// is served (edge.go).
	Edge
	// Clients says which proxies to believe about a client's address, and
	// throttles failed authentications by it (edge.go).
	Clients       Clients
	EncryptionKey []byte
	Dev           bool
	LogLevel      slog.Level
	// AgentsFile is the agents configuration file; empty for the echo
	// agent alone.
	AgentsFile string
	// JWKSMinRefresh is the least time between two fetches of an issuer's
	// key set caused by tokens naming a kid it lacks.
	JWKSMinRefresh time.Duration
	// Limits are the default limits of a tenant without its own
	// (docs/tenancy.md); zero fields are no limit.
	Limits store.TenantLimits
	// TracerProvider traces the server through a provider of the caller's
	// (tests); nil means as the OTEL_* environment variables say
	// (tracing.go), which is off unless they ask for it.
	TracerProvider trace.TracerProvider
	// WebhookAllowPrivate admits webhook URLs on loopback and private
	// addresses, and http ones (docs/background.md).
	WebhookAllowPrivate bool
	// WebhookTLS, when set, is the TLS configuration of webhook requests
	// (tests trust their receivers with it); nil: the system's roots.
	WebhookTLS *tls.Config
	// Retention is the default retention policy of a tenant without its
	// own (docs/lifecycle.md); zero fields keep forever.
	Retention store.TenantRetention
	// RetentionInterval is the time between two retention sweeps.
	RetentionInterval time.Duration
}

func parseServeFlags(args []string, stderr io.Writer) (cfg Config, err error) {
	f := newFlagSet("serve", stderr)
	f.StringVar(&cfg.Addr, "addr", ":8080", "address to listen on")
	f.fromEnv("addr", "AAPD_ADDR")
	dbURL := databaseURLFlag(f)
	migrateURL := migrateURLFlag(f)
	f.BoolVar(&cfg.NoMigrate, "no-migrate", false, "do not migrate the database on start")
	f.fromEnv("no-migrate", "AAPD_NO_MIGRATE")
	f.BoolVar(&cfg.CreateDatabase, "create-database", false, "create the database named in the URL if it does not exist")
	f.fromEnv("create-database", "AAPD_CREATE_DATABASE")
	f.BoolVar(&cfg.MetaRequiresAuth, "meta-requires-auth", false, "require an API key for GET /meta")
	f.fromEnv("meta-requires-auth", "AAPD_META_REQUIRES_AUTH")
	cors := f.String("cors-origins", "*", "comma-separated browser origins allowed to call the API (* for any, empty for none)")
	f.fromEnv("cors-origins", "AAPD_CORS_ORIGINS")
	f.IntVar(&cfg.Workers, "workers", 64, "turns that may run at once in this process")
	f.fromEnv("workers", "AAPD_WORKERS")
	f.Float64Var(&cfg.Limits.RequestsPerSecond, "rate-limit", 0, "default requests per second a tenant may send, across replicas (0: unlimited)")
	f.fromEnv("rate-limit", "AAPD_RATE_LIMIT")
	f.IntVar(&cfg.Limits.Burst, "rate-burst", 0, "default burst of requests above the rate a tenant may send (0: the rate, rounded up)")
	f.fromEnv("rate-burst", "AAPD_RATE_BURST")
	f.IntVar(&cfg.Limits.MaxRunningTurns, "max-running-turns", 0, "default turns a tenant may run at once, across replicas (0: unlimited)")
	f.fromEnv("max-running-turns", "AAPD_MAX_RUNNING_TURNS")
	f.IntVar(&cfg.Limits.MaxQueuedTurns, "max-queued-turns", 0, "default background turns a tenant may have waiting for a worker, across replicas (0: unlimited)")
	f.fromEnv("max-queued-turns", "AAPD_MAX_QUEUED_TURNS")
	f.IntVar(&cfg.DBMaxConns, "db-max-conns", 0, "largest number of database connections this process opens (0: sized from --workers)")
	f.fromEnv("db-max-conns", "AAPD_DB_MAX_CONNS")
	f.IntVar(&cfg.HistoryCacheMB, "history-cache-mb", agents.DefaultHistoryCacheBytes>>20, "memory (MiB) kept for the histories of recently active sessions, which their next turns then need not read")
	f.fromEnv("history-cache-mb", "AAPD_HISTORY_CACHE_MB")
	f.DurationVar(&cfg.ShutdownDelay, "shutdown-delay", 5*time.Second, "on shutdown, how long to keep serving with /readyz failing before closing the listener")
	f.fromEnv("shutdown-delay", "AAPD_SHUTDOWN_DELAY")
	f.DurationVar(&cfg.Lease, "turn-lease", 30*time.Second, "how long a turn's claim on its session holds without a heartbeat")
	f.fromEnv("turn-lease", "AAPD_TURN_LEASE")
	f.IntVar(&cfg.MaxAttempts, "turn-max-attempts", agents.DefaultMaxAttempts, "how many times a background turn may be begun (its process dying each time) before it fails with attempts_exhausted")
	f.fromEnv("turn-max-attempts", "AAPD_TURN_MAX_ATTEMPTS")
	f.DurationVar(&cfg.DrainTimeout, "drain-timeout", 30*time.Second, "on shutdown, how long running turns may take to finish before they are interrupted")
	f.fromEnv("drain-timeout", "AAPD_DRAIN_TIMEOUT")
	f.Int64Var(&cfg.MaxBodyBytes, "max-body-bytes", httpapi.DefaultMaxBodyBytes, "largest request body accepted")
	f.fromEnv("max-body-bytes", "AAPD_MAX_BODY_BYTES")
	f.Int64Var(&cfg.ImportMaxBytes, "import-max-bytes", v3.DefaultImportMaxBytes, "largest session document POST /sessions/import takes")
	f.fromEnv("import-max-bytes", "AAPD_IMPORT_MAX_BYTES")
	f.DurationVar(&cfg.KeepAlive, "sse-keepalive", httpapi.DefaultKeepAlive, "idle time after which a stream sends a keep-alive comment")
	f.fromEnv("sse-keepalive", "AAPD_SSE_KEEPALIVE")
	edgeFlags(f, &cfg.Edge)
	clientsFlags(f, &cfg.Clients)
	key := encryptionKeyFlag(f)
	f.StringVar(&cfg.AgentsFile, "config", "", "agents configuration file (YAML, docs/agents.md); without one, the echo agent alone")
	f.fromEnv("config", "AAPD_CONFIG")
	f.DurationVar(&cfg.JWKSMinRefresh, "jwks-min-refresh", auth.DefaultJWKSMinRefresh, "least time between two fetches of an issuer's key set caused by tokens with an unknown kid")
	f.fromEnv("jwks-min-refresh", "AAPD_JWKS_MIN_REFRESH")
	f.BoolVar(&cfg.Dev, "dev", false, "development mode: create a \"dev\" tenant and print a fresh API key for it")
	f.fromEnv("dev", "AAPD_DEV")
	adminTokenFile := f.String("admin-token-file", "", "file holding the operator token that opens the admin API at /admin/v1 (or put the token itself in $AAPD_ADMIN_TOKEN); without either, that API is off")
	f.fromEnv("admin-token-file", "AAPD_ADMIN_TOKEN_FILE")
	f.BoolVar(&cfg.WebhookAllowPrivate, "webhook-allow-private", false, "admit webhook URLs on loopback and private addresses, and http ones (tests, on-premises receivers)")
	f.fromEnv("webhook-allow-private", "AAPD_WEBHOOK_ALLOW_PRIVATE")
	retentionFlags(f, &cfg.Retention)
	f.DurationVar(&cfg.RetentionInterval, "retention-interval", retention.DefaultInterval, "time between two retention sweeps (one replica sweeps at a time)")
	f.fromEnv("retention-interval", "AAPD_RETENTION_INTERVAL")
	level := f.String("log-level", "info", "debug, info, warn or error")
	f.fromEnv("log-level", "AAPD_LOG_LEVEL")
	if err := f.parse(args); err != nil {
		return Config{}, err
	}
	if err := f.noArgs(); err != nil {
		return Config{}, err
	}
	cfg.DatabaseURL, cfg.MigrateDatabaseURL = *dbURL, *migrateURL
	if err := requireDatabaseURL(cfg.DatabaseURL); err != nil {
		return Config{}, err
	}
	if err := checkMigrateURL(cfg.MigrateDatabaseURL); err != nil {
		return Config{}, err
	}
	for _, o := range strings.Split(*cors, ",") {
		if o = strings.TrimSpace(o); o != "" {
			cfg.CORSOrigins = append(cfg.CORSOrigins, o)
		}
	}
	if cfg.EncryptionKey, err = decodeEncryptionKey(*key); err != nil {
		return Config{}, err
	}
	if cfg.AdminToken, err = adminToken(*adminTokenFile); err != nil {
		return Config{}, err
	}
	if err := cfg.LogLevel.UnmarshalText([]byte(*level)); err != nil {
		return Config{}, &usageError{fmt.Sprintf("--log-level: %v", err)}
	}
	if cfg.Workers < 1 || cfg.Lease < time.Second || cfg.DrainTimeout < 0 || cfg.MaxBodyBytes < 1024 || cfg.KeepAlive < 100*time.Millisecond ||
		cfg.ImportMaxBytes < 1024 {
		return Config{}, &usageError{"--workers must be at least 1, --turn-lease at least 1s, --drain-timeout not negative, --max-body-bytes and --import-max-bytes at least 1024, --sse-keepalive at least 100ms"}
	}
	if cfg.JWKSMinRefresh < time.Second {
		return Config{}, &usageError{"--jwks-min-refresh must be at least 1s"}
	}
	if cfg.Limits.RequestsPerSecond < 0 || math.IsNaN(cfg.Limits.RequestsPerSecond) || math.IsInf(cfg.Limits.RequestsPerSecond, 0) ||
		cfg.Limits.Burst < 0 || cfg.Limits.MaxRunningTurns < 0 || cfg.Limits.MaxQueuedTurns < 0 {
		return Config{}, &usageError{"--rate-limit, --rate-burst, --max-running-turns and --max-queued-turns must be finite and not negative (0: unlimited)"}
	}
	if cfg.MaxAttempts < 1 {
		return Config{}, &usageError{"--turn-max-attempts must be at least 1"}
	}
	if cfg.HistoryCacheMB < 1 {
		return Config{}, &usageError{"--history-cache-mb must be at least 1"}
	}
	if (cfg.DBMaxConns != 0 && cfg.DBMaxConns < 2) || cfg.ShutdownDelay < 0 {
		return Config{}, &usageError{"--db-max-conns must be at least 2 (or 0, to size it from --workers), --shutdown-delay not negative"}
	}
	if cfg.Addr == "" {
		return Config{}, &usageError{"--addr must not be empty (e.g. :8080)"}
	}
	if err := checkRetention(cfg.Retention); err != nil {
		return Config{}, err
	}
	if cfg.RetentionInterval < time.Second {
		return Config{}, &usageError{"--retention-interval must be at least 1s"}
	}
	if err := cfg.Edge.check(); err != nil {
		return Config{}, err
	}
	if err := cfg.Clients.check(); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

func serve(ctx context.Context, args []string, stderr io.Writer) error {
	cfg, err := parseServeFlags(args, stderr)
	if err != nil {
		return err
	}
	logger := newLogger(stderr, cfg.LogLevel)
	slog.SetDefault(logger)
	m, err := Start(ctx, cfg, logger, stderr)
	if err != nil {
		return err
	}
	<-ctx.Done()
	if interrupted(ctx) {
		return m.Interrupt()
	}
	return m.Shutdown()
}

// newLogger is aapd's logger: JSON lines, and those logged with a
// request's or turn's context name it (logctx: request_id, tenant, session,
// turn).
func newLogger(w io.Writer, level slog.Level) *slog.Logger {
	return slog.New(logctx.NewHandler(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level})))
}

// DefaultDBMaxConns sizes the connection pool for a number of workers. A
// turn holds a connection only while it writes (its claim, a batch of
// events, its end: a few milliseconds each), never while its model thinks,
// so a pool of a quarter of the workers keeps every worker fed; it is kept
// between 8 (two cores' worth of Postgres, with room for streams and
// reads) and 48, because Postgres allows 100 connections by default and
// several replicas share them (each process also holds one more of its own
// for its instance lock).
func DefaultDBMaxConns(workers int) int { return min(max(workers/4, 8), 48) }

// Main is a running aapd server: everything `aapd serve` starts, wired
// together. Tests start it on 127.0.0.1:0.
type Main struct {
	cfg      Config
	log      *slog.Logger
	Store    *store.Store
	Instance *store.Instance
	Runner   *agents.Runner
	Limits   *quota.Limits
	API      *httpapi.Server
	// Queue runs the background turns waiting for a worker.
	Queue *turnqueue.Dispatcher
	// Webhooks sends the tenants' webhook deliveries (every replica runs
	// one).
	Webhooks *webhooks.Deliverer
	// Retention sweeps what the tenants' retention policies no longer
	// keep (every replica runs one; one sweeps at a time).
	Retention *retention.Sweeper
	// Scheduler fires the sessions' schedules' ticks (every replica runs
	// one; each tick fires once).
	Scheduler *scheduler.Scheduler
	// Registry holds every metric the process exports.
	Registry *prometheus.Registry
	agents   *agentconfig.Loaded
	http     *http.Server
	ln       net.Listener
	served   chan error
	metrics  *metricsListener // nil without --metrics-addr
	tracing  *tracing
}

// Start listens, migrates (unless told not to), connects, and starts
// serving.
func Start(ctx context.Context, cfg Config, logger *slog.Logger, stderr io.Writer) (*Main, error) {
	m := &Main{cfg: cfg, log: logger, served: make(chan error, 1)}
	// The addresses first: a port already taken is told before the
	// database is created or migrated. Connections wait in the listener's
	// backlog until the server serves.
	if err := m.listen(); err != nil {
		return nil, err
	}
	if err := m.open(ctx); err != nil {
		m.closeListeners()
		return nil, err
	}
	if err := m.start(ctx, stderr); err != nil {
		m.closeListeners()
		m.close()
		return nil, err
	}
	return m, nil
}

// listen opens the server's listeners: --addr, and --metrics-addr when set.
func (m *Main) listen() (err error) {
	if m.ln, err = net.Listen("tcp", m.cfg.Addr); err != nil {
		return fmt.Errorf("listen on %s (--addr): %w", m.cfg.Addr, err)
	}
	if err := m.listenMetrics(); err != nil {
		m.ln.Close()
		return err
	}
	return nil
}

// closeListeners closes the listeners of a server that did not start.
func (m *Main) closeListeners() {
	m.ln.Close()
	if m.metrics != nil {
		m.metrics.ln.Close()
	}
}

// open creates the database if asked to, migrates it unless told not to,
// and connects.
func (m *Main) open(ctx context.Context) error {
	cfg, logger := m.cfg, m.log
	if cfg.CreateDatabase {
		created, err := store.CreateDatabase(ctx, cmp.Or(cfg.MigrateDatabaseURL, cfg.DatabaseURL))
		if err != nil {
			return err
		}
		if created {
			logger.Info("database created")
		}
	}
	if !cfg.NoMigrate {
		res, err := store.MigrateReporting(ctx, cmp.Or(cfg.MigrateDatabaseURL, cfg.DatabaseURL), func(m store.MigrationStep) {
			logger.Info("migration applied", "migration", m.Name, "duration_ms", m.Duration.Milliseconds())
		})
		if err != nil {
			return err
		}
		logger.Info("database migrated", "applied", len(res.Applied), "version", res.Version)
	}
	conns := cfg.DBMaxConns
	if conns == 0 {
		conns = DefaultDBMaxConns(cfg.Workers)
	}
	traces, err := openTracing(ctx, cfg.TracerProvider, logger)
	if err != nil {
		return err
	}
	st, err := store.Open(ctx, store.Config{DatabaseURL: cfg.DatabaseURL, EncryptionKey: cfg.EncryptionKey, MaxConns: int32(conns),
		TracerProvider: traces.provider})
	if err != nil {
		_ = traces.shutdown(ctx)
		return err
	}
	if st.KeyFromDatabase() {
		logger.Warn("no encryption key configured: secret options are sealed with a key kept in the database; set AAPD_ENCRYPTION_KEY in production")
	}
	m.Store, m.tracing = st, traces
	return nil
}

func (m *Main) start(ctx context.Context, stderr io.Writer) error {
	list := []*agents.Agent{echo.NewAgent()}
	if m.cfg.AgentsFile != "" {
		loaded, err := agentconfig.Load(ctx, m.cfg.AgentsFile, nil)
		if err != nil {
			return err
		}
		m.agents, list = loaded, loaded.Agents
	}
	registry, err := agents.NewRegistry(list...)
	if err != nil {
		return err
	}
	m.Limits = quota.New(quota.Config{Source: m.Store, Defaults: m.cfg.Limits, Logger: m.log})
	// One registry for the whole process: the runner's metrics and the
	// API's are served together, on /metrics or --metrics-addr.
	m.Registry = prometheus.NewRegistry()
	m.Runner = agents.NewRunner(agents.RunnerConfig{
		Store: m.Store, Agents: registry, Owner: func() int32 { return m.Instance.ID() },
		Workers: m.cfg.Workers, Lease: m.cfg.Lease, Logger: m.log, MaxRunningTurns: m.Limits.MaxRunningTurns,
		TracerProvider:    m.tracing.provider,
		Metrics:           agents.NewMetrics(m.Registry),
		HistoryCacheBytes: int64(m.cfg.HistoryCacheMB) << 20,
		MaxQueuedTurns:    m.Limits.MaxQueuedTurns, MaxAttempts: m.cfg.MaxAttempts,
	})
	operator, err := m.adminHandler()
	if err != nil {
		return err
	}
	m.API = httpapi.New(httpapi.Config{
		Store: m.Store, Runner: m.Runner, Limits: m.Limits,
		// The protocols served, each a door over the same pipeline.
		Doors: []httpapi.Door{
			v3.New(v3.Config{Store: m.Store, Agents: registry, Runner: m.Runner, ImportMaxBytes: m.cfg.ImportMaxBytes}),
			v1.New(v1.Config{Sessions: m.Store, Agents: registry, Runner: m.Runner}),
			agui.New(agui.Config{Store: m.Store, Agents: registry, Runner: m.Runner}),
			sandboxagent.New(sandboxagent.Config{Store: m.Store, Agents: registry, Runner: m.Runner}),
			openaidoor.New(openaidoor.Config{Store: m.Store, Agents: registry, Runner: m.Runner}),
		},
		MetaRequiresAuth: m.cfg.MetaRequiresAuth, CORSOrigins: m.cfg.CORSOrigins,
		MaxBodyBytes: m.cfg.MaxBodyBytes, KeepAlive: m.cfg.KeepAlive, Logger: m.log,
		BodyTimeout: m.cfg.BodyTimeout, AdminToken: m.cfg.AdminToken, SeparateMetrics: m.cfg.MetricsAddr != "",
		Tokens:   auth.VerifierConfig{JWKSMinRefresh: m.cfg.JWKSMinRefresh},
		Admin:    operator,
		Registry: m.Registry, Build: buildInfo(),
		TrustedProxies: m.cfg.Clients.TrustedProxies, AuthThrottle: m.cfg.Clients.AuthThrottle,
	})
	// The instance marks this process alive for the claims of its turns,
	// and brings other processes' cancel requests, key revocations and
	// creations, removals of token issuers and limit changes.
	if m.Instance, err = m.Store.StartInstance(ctx, store.InstanceParams{
		Channels: []string{store.CancelChannel, store.KeyRevokedChannel, store.KeyCreatedChannel, store.IssuerChangedChannel, store.LimitsChangedChannel},
		OnNotify: func(n store.Notification) {
			m.Runner.Notify(n)
			m.API.Notify(n)
			m.Limits.Notify(n)
		},
	}); err != nil {
		return err
	}
	m.Webhooks = webhooks.Start(webhooks.Config{Store: m.Store, Logger: m.log, Registry: m.Registry,
		AllowPrivate: m.cfg.WebhookAllowPrivate, TLS: m.cfg.WebhookTLS})
	if m.cfg.Dev {
		if err := m.devKey(ctx, stderr); err != nil {
			return err
		}
	}
	m.Queue = turnqueue.New(turnqueue.Config{Store: m.Store, Runner: m.Runner, Logger: m.log})
	m.Queue.Start()
	m.Retention = retention.New(retention.Config{Store: m.Store, Logger: m.log, Registry: m.Registry,
		Defaults: m.cfg.Retention, Interval: m.cfg.RetentionInterval})
	m.Retention.Start()
	m.Scheduler = scheduler.New(scheduler.Config{Store: m.Store, Runner: m.Runner, Logger: m.log, Registry: m.Registry})
	m.Scheduler.Start()
	m.http = m.cfg.Edge.server(httpapi.Traced(m.API, m.tracing.provider), m.log)
	go func() { m.served <- m.http.Serve(m.ln) }()
	m.serveMetrics()
	m.log.Info("aapd serving", "addr", m.ln.Addr().String(), "agents", registry.Names(), "instance", m.Instance.ID())
	return nil
}

// Addr is the address the server listens on.
func (m *Main) Addr() string { return m.ln.Addr().String() }

// devKey makes sure the "dev" tenant exists and prints a new key for it,
// revoking the keys earlier dev starts printed, and says so: a shell that
// exported the last one needs this one (docs/operations.md, "Dev mode").
func (m *Main) devKey(ctx context.Context, stderr io.Writer) error {
	svc := admin.NewService(admin.Config{Store: m.Store, Logger: m.log, Actor: "dev-mode", Notify: m.API.Notify})
	if _, err := m.Store.TenantGetByName(ctx, "dev"); errors.Is(err, store.ErrNotFound) {
		if _, err := svc.CreateTenant(ctx, "dev"); err != nil {
			return err
		}
	} else if err != nil {
		return err
	}
	var revoked []string
	for cursor := ""; ; {
		page, err := svc.ListKeys(ctx, "dev", cursor, admin.MaxPageLimit)
		if err != nil {
			return err
		}
		for _, k := range page.Keys {
			if k.Label == "dev-mode" && k.RevokedAt == nil {
				if _, err := svc.RevokeKey(ctx, "dev", k.ID); err != nil {
					return err
				}
				revoked = append(revoked, k.Prefix+"…")
			}
		}
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	key, err := svc.CreateKey(ctx, "dev", admin.KeyRequest{Label: "dev-mode"})
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "\ndev mode: tenant \"dev\", API key (valid until the next dev start):\n\n    export AAPD_KEY=%s\n\n", key.Secret)
	if len(revoked) > 0 {
		fmt.Fprintf(stderr, "The key of the previous dev start (%s) no longer works: export this one where you used it.\n\n",
			strings.Join(revoked, ", "))
	}
	return nil
}

// Shutdown stops accepting requests, lets running turns finish within the
// drain timeout, interrupts the rest (their streams end with turn_stop
// "error"), then closes everything. It first keeps serving for the
// shutdown delay with readiness failing, for load balancers (SIGTERM).
func (m *Main) Shutdown() error { return m.shutdown(m.cfg.ShutdownDelay) }

// Interrupt is Shutdown without the shutdown delay, for Ctrl-C (SIGINT):
// a person at a terminal wants the server gone, and no load balancer
// waits on it. An idle server stops at once; running turns still drain.
func (m *Main) Interrupt() error { return m.shutdown(0) }

func (m *Main) shutdown(delay time.Duration) error {
	m.log.Info("shutting down", "shutdown_delay", delay.String(), "drain_timeout", m.cfg.DrainTimeout.String(),
		"running_turns", m.Runner.Running())
	// Readiness fails at once; the listener keeps serving for a moment, so
	// that load balancers see it and send new requests elsewhere. Without
	// keep-alives, clients reconnect (elsewhere) for their next request.
	m.API.BeginDrain()
	if delay > 0 {
		m.http.SetKeepAlivesEnabled(false)
		time.Sleep(delay)
	}
	// Streams that only follow a turn end where they are (their clients
	// resume on another replica); streams of turns running here go on
	// until their turns end, within the drain timeout.
	m.API.StopStreams()
	// No schedule's tick is fired here any more, and no more background
	// turns are taken from the queue; those running here are handed back
	// to it if the drain cannot wait for them.
	m.Scheduler.Stop()
	m.Queue.Stop()
	m.Retention.Stop()
	drainCtx, cancel := context.WithTimeout(context.Background(), m.cfg.DrainTimeout)
	defer cancel()
	httpDone := make(chan error, 1)
	go func() {
		// Shutdown closes the listener at once, then waits for requests in
		// flight, streams included; they end when their turns do.
		ctx, cancel := context.WithTimeout(context.Background(), m.cfg.DrainTimeout+10*time.Second)
		defer cancel()
		httpDone <- m.http.Shutdown(ctx)
	}()
	if err := m.Runner.Shutdown(drainCtx); err != nil {
		m.log.Warn("drain", "err", err)
	}
	// The drained turns' deliveries are claimed by now or left to other
	// replicas; attempts in flight get a moment to end.
	webhooksCtx, cancelWebhooks := context.WithTimeout(context.Background(), webhookStopTimeout)
	m.Webhooks.Stop(webhooksCtx)
	cancelWebhooks()
	if err := <-httpDone; err != nil {
		m.log.Warn("http shutdown", "err", err)
		_ = m.http.Close()
	}
	// The metrics listener served throughout the drain; it goes last.
	m.stopMetrics()
	m.close()
	if err := <-m.served; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	m.log.Info("stopped")
	return nil
}

// webhookStopTimeout is how long a shutdown lets webhook attempts in
// flight end; those still running are given back, due at once.
const webhookStopTimeout = 5 * time.Second

func (m *Main) close() {
	if m.Webhooks != nil {
		m.Webhooks.Stop(context.Background()) // stopped already by Shutdown, or never started an attempt
	}
	if m.Queue != nil {
		m.Queue.Stop()
	}
	if m.Retention != nil {
		m.Retention.Stop()
	}
	if m.Scheduler != nil {
		m.Scheduler.Stop()
	}
	if m.API != nil {
		m.API.Close()
	}
	if m.Instance != nil {
		m.Instance.Close()
	}
	if m.agents != nil {
		if err := m.agents.Close(); err != nil {
			m.log.Warn("stop agents' MCP servers", "err", err)
		}
	}
	m.Store.Close()
	// Last: the spans of everything above are queued by now.
	ctx, cancel := context.WithTimeout(context.Background(), tracingFlushTimeout)
	defer cancel()
	if err := m.tracing.shutdown(ctx); err != nil {
		m.log.Warn("flush traces", "err", err)
	}
}
