// Package httpapi serves AAP v3 over HTTP: the protocol's seven endpoints
// exactly as the specification writes them, aapd's documented extensions,
// and the operational endpoints (/healthz, /readyz, /metrics).
//
// Handlers return errors; one adapter turns them into RFC 9457 problem
// responses from one table (problem.go). Routes are registered in one place,
// routes below, with public and authenticated subrouters.
package httpapi

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/gorilla/mux"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/aapd/aapd/agents"
	"github.com/aapd/aapd/auth"
	"github.com/aapd/aapd/httpapi/agui"
	v1 "github.com/aapd/aapd/httpapi/v1"
	"github.com/aapd/aapd/logctx"
	"github.com/aapd/aapd/quota"
	"github.com/aapd/aapd/store"
)

// Defaults of Config.
const (
	DefaultMaxBodyBytes = 10 << 20 // 10 MiB: room for data: URI images
	DefaultPageLimit    = 20
	MaxPageLimit        = 100
	DefaultKeepAlive    = 15 * time.Second
	DefaultBodyTimeout  = 30 * time.Second // a 10 MiB body at 3 Mbit/s
)

// Config configures a Server.
type Config struct {
	Store  *store.Store
	Agents *agents.Registry
	Runner *agents.Runner
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
		keys: newKeyCache(cfg.Now), rates: quota.NewRateLimiter(cfg.Now)}
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

	meta := s.handle(s.getMeta)
	if s.cfg.MetaRequiresAuth {
		meta = s.authenticate(meta)
	}
	r.Handle("/meta", meta).Methods(http.MethodGet)

	// AAP v1 under /v1 (httpapi/v1): the same sessions in v1's shapes.
	v1.New(v1.Config{Host: doorHost{s}, Sessions: s.cfg.Store, Agents: s.cfg.Agents, Runner: s.cfg.Runner}).Register(r)

	// The AAP routes, each with the scope it needs (docs/tenancy.md):
	// reading, streams followed included, needs sessions:read; anything
	// that changes a session needs sessions:write.
	const read, write = auth.ScopeSessionsRead, auth.ScopeSessionsWrite
	api := r.NewRoute().Subrouter()
	api.Use(s.authenticate, s.limitRate)
	api.Handle("/sessions", s.need(read, s.listSessions)).Methods(http.MethodGet)
	api.Handle("/sessions", s.need(write, s.createSession)).Methods(http.MethodPost)
	api.Handle("/sessions/{id}", s.need(read, s.getSession)).Methods(http.MethodGet)
	api.Handle("/sessions/{id}", s.need(write, s.deleteSession)).Methods(http.MethodDelete)
	api.Handle("/sessions/{id}/history", s.need(read, s.getHistory)).Methods(http.MethodGet)
	api.Handle("/sessions/{id}/turns", s.need(write, s.postTurn)).Methods(http.MethodPost)

	// Extensions (docs/durability.md): turns as first-class records.
	api.Handle("/sessions/{id}/turns", s.need(read, s.listTurns)).Methods(http.MethodGet)
	api.Handle("/sessions/{id}/turns/{turnId}", s.need(read, s.getTurn)).Methods(http.MethodGet)
	api.Handle("/sessions/{id}/turns/{turnId}/events", s.need(read, s.turnEvents)).Methods(http.MethodGet)
	api.Handle("/sessions/{id}/turns/{turnId}/cancel", s.need(write, s.cancelTurn)).Methods(http.MethodPost)

	// Extensions (docs/protocols.md): the session event log.
	api.Handle("/sessions/{id}/events", s.need(read, s.sessionEvents)).Methods(http.MethodGet)

	// Extensions (docs/compaction.md): compaction on demand, and its records.
	api.Handle("/sessions/{id}/compact", s.need(write, s.compactSession)).Methods(http.MethodPost)
	api.Handle("/sessions/{id}/compactions", s.need(read, s.listCompactions)).Methods(http.MethodGet)

	// AG-UI (docs/protocols.md): runs of the same sessions, through agui.
	runs := agui.New(agui.Config{Store: s.cfg.Store, Agents: s.cfg.Agents, Runner: s.cfg.Runner,
		ReadBody: s.readBody, KeepAlive: s.cfg.KeepAlive, Logger: s.log})
	api.Handle("/ag-ui/agents/{agent}", s.need(write, runs.Run)).Methods(http.MethodPost)
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
	return writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
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
	return writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

func (s *Server) getMeta(w http.ResponseWriter, _ *http.Request) error {
	return writeJSON(w, http.StatusOK, s.cfg.Agents.Meta())
}

// writeJSON writes v as a JSON response.
func writeJSON(w http.ResponseWriter, status int, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
	return nil
}
