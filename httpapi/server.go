// Package httpapi is aapd's HTTP edge: what every front door shares. It
// authenticates credentials (API keys, end users' tokens), checks scopes,
// holds tenants to their request rates, bounds bodies, names every request
// in logs, metrics and traces, answers refusals (problem+json, RFC 9457,
// from one table: problem.go, or a door's own shape), writes streams and
// drains them, and serves the operational endpoints (/healthz, /readyz,
// /metrics, /openapi.json). The protocols themselves are doors (door.go),
// each a package of its own mounted here: AAP v3 (httpapi/v3), AAP v1
// (httpapi/v1), AG-UI (httpapi/agui); the operator's API (httpapi/admin)
// is mounted under /admin/v1.
package httpapi

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/gorilla/mux"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/aapd/aapd/agents"
	"github.com/aapd/aapd/auth"
	"github.com/aapd/aapd/logctx"
	"github.com/aapd/aapd/quota"
	"github.com/aapd/aapd/store"
)

// Defaults of Config.
const (
	DefaultMaxBodyBytes = 10 << 20 // 10 MiB: room for data: URI images
	DefaultKeepAlive    = 15 * time.Second
	DefaultBodyTimeout  = 30 * time.Second // a 10 MiB body at 3 Mbit/s
)

// Config configures a Server.
type Config struct {
	Store  *store.Store
	Runner *agents.Runner
	// Doors are the protocols served, each mounted on the router in this
	// order (the first to register a route serves it).
	Doors []Door
	// MetaRequiresAuth closes GET /meta to requests without a valid key.
	MetaRequiresAuth bool
	// CORSOrigins are the browser origins allowed to call the API; "*"
	// allows any, none means no cross-origin access.
	CORSOrigins []string
	// MaxBodyBytes bounds request bodies (413 beyond).
	MaxBodyBytes int64
	// BodyTimeout bounds the time a request body may take to arrive (408
	// beyond); responses, streams included, are not bounded.
	BodyTimeout time.Duration
	// AdminToken is the operator's token. When set, /metrics on this
	// handler requires it as a bearer token.
	AdminToken string
	// SeparateMetrics leaves /metrics off this handler: the caller serves
	// MetricsHandler on a listener of its own (aapd serve --metrics-addr).
	SeparateMetrics bool
	// KeepAlive is the idle time after which a stream sends a comment.
	KeepAlive time.Duration
	// Tokens configures how end users' JWTs are verified (docs/tenancy.md);
	// its Find, Now and Logger default to the store's issuers, Now and
	// Logger.
	Tokens auth.VerifierConfig
	// Admin is the operator's API (httpapi/admin), served under /admin/v1/
	// outside API-key authentication: it checks the operator token itself.
	// Nil leaves /admin/v1 unknown (404).
	Admin  http.Handler
	Logger *slog.Logger
	Now    func() time.Time

	// Limits are the tenants' limits (docs/tenancy.md); nil for none.
	Limits *quota.Limits

	// Registry collects the server's metrics, and is what /metrics and
	// MetricsHandler serve. aapd serve shares it with the runner's metrics
	// (agents.RunnerConfig.Metrics), so the turns' metrics are served too.
	// Nil: a registry of the server's own.
	Registry *prometheus.Registry
	// Build describes the binary, in aapd_build_info.
	Build BuildInfo

	// TrustedProxies are the proxies whose X-Forwarded-For names the
	// client's address (clientAddr); none: the connection's peer is the
	// client.
	TrustedProxies []netip.Prefix
	// AuthThrottle bounds failed authentications per client address; its
	// zero value is no throttle.
	AuthThrottle AuthThrottle
}

// Server is aapd's HTTP API.
type Server struct {
	cfg     Config
	log     *slog.Logger
	now     func() time.Time
	metrics *metrics
	drain   *drainState
	keys    *keyCache
	tokens  *auth.Verifier
	handler http.Handler
	keyUses *keyUses // when API keys were last used (keyuse.go)
	rates   *quota.RateLimiter
	// authFails throttles failed authentications by client address
	// (auththrottle.go); nil when off.
	authFails *authThrottle
}

// New returns a server ready to serve.
func New(cfg Config) *Server {
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.KeepAlive <= 0 {
		cfg.KeepAlive = DefaultKeepAlive
	}
	if cfg.BodyTimeout <= 0 {
		cfg.BodyTimeout = DefaultBodyTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	// Every line logged with a request's context names the request.
	cfg.Logger = logctx.Wrap(cfg.Logger)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	s := &Server{cfg: cfg, log: cfg.Logger, now: cfg.Now, metrics: newMetrics(metricsConfig{
		registry: cfg.Registry, running: cfg.Runner.Running, pool: cfg.Store.PoolStat, build: cfg.Build}), drain: newDrainState(),
		keys: newKeyCache(cfg.Now), rates: quota.NewRateLimiter(cfg.Now), authFails: newAuthThrottle(cfg.AuthThrottle, cfg.Now)}
	s.keyUses = newKeyUses(cfg.Store.APIKeyTouch, cfg.Now, cfg.Logger)
	tokens := cfg.Tokens
	if tokens.Find == nil {
		tokens.Find = issuerFinder(cfg.Store)
	}
	if tokens.Now == nil {
		tokens.Now = cfg.Now
	}
	if tokens.Logger == nil {
		tokens.Logger = cfg.Logger
	}
	s.tokens = auth.NewVerifier(tokens)
	s.handler = s.limitBodyTime(s.observe(s.cors(s.routes())))
	return s
}

// ServeHTTP serves a request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// routes registers every route, in one place.
func (s *Server) routes() http.Handler {
	r := mux.NewRouter()
	r.Use(recordRoute)
	r.NotFoundHandler = s.handle(func(http.ResponseWriter, *http.Request) error {
		return probNotFound.with("no such endpoint")
	})
	r.MethodNotAllowedHandler = s.handle(func(w http.ResponseWriter, req *http.Request) error {
		allowed := allowedMethods(r, req)
		w.Header().Set("Allow", strings.Join(allowed, ", "))
		return probMethod.with("this endpoint takes %s, not %s", strings.Join(allowed, ", "), req.Method)
	})

	// Operations: health is public; metrics are the operator's (metricsRoute).
	r.Handle("/healthz", s.handle(s.healthz)).Methods(http.MethodGet)
	r.Handle("/readyz", s.handle(s.readyz)).Methods(http.MethodGet)
	if h := s.metricsRoute(); h != nil {
		r.Handle("/metrics", h).Methods(http.MethodGet)
	}
	r.Handle("/openapi.json", s.handle(s.openAPI)).Methods(http.MethodGet) // openapi.go

	if s.cfg.Admin != nil {
		r.PathPrefix("/admin/v1/").Handler(s.cfg.Admin)
	}

	// The protocols, each through the edge (door.go).
	e := edge{s: s, write: writeProblemJSON}
	for _, d := range s.cfg.Doors {
		d.Mount(r, e)
	}
	s.metrics.exportRoutes(r)
	return r
}

// allowedMethods lists the methods the router would take for the request's
// path, for the Allow header a 405 must carry (RFC 9110).
func allowedMethods(router *mux.Router, req *http.Request) []string {
	var allowed []string
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		probe := req.Clone(req.Context())
		probe.Method = m
		var match mux.RouteMatch
		if router.Match(probe, &match) && match.MatchErr == nil {
			allowed = append(allowed, m)
		}
	}
	return allowed
}

func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) error {
	return WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// readyz reports whether this process can serve: it fails while the
// database is unreachable and once the server is shutting down, so a load
// balancer sends traffic elsewhere.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) error {
	if s.Draining() {
		// Expected while shutting down: answered, not logged as a refusal.
		p := probUnavailable.with("the server is shutting down")
		p.retryAfter = 2
		writeProblem(w, r, p)
		return nil
	}
	if err := s.cfg.Store.Ping(r.Context()); err != nil {
		p := probUnavailable.with("the database is unavailable")
		p.retryAfter = 5
		return p
	}
	return WriteJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

// WriteJSON writes v as a JSON response.
func WriteJSON(w http.ResponseWriter, status int, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
	return nil
}
