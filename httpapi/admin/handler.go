package admin

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"os"
	"strings"
	"unicode"

	"github.com/gorilla/mux"

	"github.com/aapd/aapd/httpapi"
	"github.com/aapd/aapd/store"
)

// Prefix is where the operator's API is served.
const Prefix = "/admin/v1"

// MinTokenLength is the shortest operator token accepted: the token opens
// every tenant, so it must be a random secret (openssl rand -hex 32), not a
// password.
const MinTokenLength = 32

// CheckToken refuses an operator token too short or not fit for an HTTP
// header.
func CheckToken(token string) error {
	if len(token) < MinTokenLength {
		return fmt.Errorf("the operator token has %d characters; it needs at least %d (openssl rand -hex 32)", len(token), MinTokenLength)
	}
	if strings.IndexFunc(token, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) || r > unicode.MaxASCII }) >= 0 {
		return errors.New("the operator token must be printable ASCII without spaces")
	}
	return nil
}

// Handler serves the operator's API under Prefix to requests bearing the
// operator token.
type Handler struct {
	svc    *Service
	log    *slog.Logger
	token  [sha256.Size]byte // compared by hash: constant time whatever the length sent
	router *mux.Router
}

// NewHandler returns the operator's API over svc, open to the bearers of
// token (see CheckToken).
func NewHandler(svc *Service, token string) (*Handler, error) {
	if err := CheckToken(token); err != nil {
		return nil, err
	}
	h := &Handler{svc: svc, log: svc.log, token: sha256.Sum256([]byte(token))}
	h.router = h.routes()
	return h, nil
}

// routes registers every route, in one place.
func (h *Handler) routes() *mux.Router {
	r := mux.NewRouter()
	// Matched on the escaped path: an end user's subject may hold a '/'
	// (sent as %2F), which must not split its segment; handle unescapes
	// the segments.
	r.UseEncodedPath()
	r.NotFoundHandler = h.handle(func(http.ResponseWriter, *http.Request) error {
		return &Error{Kind: NotFound, Msg: "no such endpoint of the admin API"}
	})
	r.MethodNotAllowedHandler = http.HandlerFunc(h.methodNotAllowed)
	a := route{r}
	a.Handle("/tenants", h.handle(h.createTenant)).Methods(http.MethodPost)
	a.Handle("/tenants", h.handle(h.listTenants)).Methods(http.MethodGet)
	a.Handle("/tenants/{name}", h.handle(h.getTenant)).Methods(http.MethodGet)
	a.Handle("/tenants/{name}", h.handle(h.deleteTenant)).Methods(http.MethodDelete)
	a.Handle("/tenants/{name}/keys", h.handle(h.createKey)).Methods(http.MethodPost)
	a.Handle("/tenants/{name}/keys", h.handle(h.listKeys)).Methods(http.MethodGet)
	a.Handle("/tenants/{name}/keys/{id}", h.handle(h.revokeKey)).Methods(http.MethodDelete)
	a.Handle("/tenants/{name}/issuers", h.handle(h.addIssuer)).Methods(http.MethodPost)
	a.Handle("/tenants/{name}/issuers", h.handle(h.listIssuers)).Methods(http.MethodGet)
	a.Handle("/tenants/{name}/issuers/{id}", h.handle(h.removeIssuer)).Methods(http.MethodDelete)
	a.Handle("/tenants/{name}/limits", h.handle(h.getLimits)).Methods(http.MethodGet)
	a.Handle("/tenants/{name}/limits", h.handle(h.setLimits)).Methods(http.MethodPut)
	a.Handle("/tenants/{name}/retention", h.handle(h.getRetention)).Methods(http.MethodGet)
	a.Handle("/tenants/{name}/retention", h.handle(h.setRetention)).Methods(http.MethodPut)
	a.Handle("/tenants/{name}/usage", h.handle(h.usage)).Methods(http.MethodGet)
	a.Handle("/tenants/{name}/owners/{sub}", h.handle(h.eraseOwner)).Methods(http.MethodDelete)
	a.Handle("/tenants/{name}/owners/{sub}/export", h.handle(h.exportOwner)).Methods(http.MethodGet)
	a.Handle("/tenants/{name}/webhooks", h.handle(h.createWebhook)).Methods(http.MethodPost)
	a.Handle("/tenants/{name}/webhooks", h.handle(h.listWebhooks)).Methods(http.MethodGet)
	a.Handle("/tenants/{name}/webhooks/{id}", h.handle(h.getWebhook)).Methods(http.MethodGet)
	a.Handle("/tenants/{name}/webhooks/{id}", h.handle(h.deleteWebhook)).Methods(http.MethodDelete)
	a.Handle("/tenants/{name}/webhooks/{id}/rotate-secret", h.handle(h.rotateWebhookSecret)).Methods(http.MethodPost)
	a.Handle("/tenants/{name}/webhooks/{id}/enable", h.handle(h.enableWebhook)).Methods(http.MethodPost)
	a.Handle("/tenants/{name}/webhooks/{id}/deliveries", h.handle(h.listDeliveries)).Methods(http.MethodGet)
	a.Handle("/tenants/{name}/webhooks/{id}/deliveries/{eventId}/redeliver", h.handle(h.redeliver)).Methods(http.MethodPost)
	return r
}

// RouteTemplates lists the routes of the admin API, each as "METHOD
// /admin/v1/path/{template}", for the OpenAPI document's coverage test
// (httpapi/openapi.yaml).
func RouteTemplates() ([]string, error) {
	var out []string
	err := (&Handler{}).routes().Walk(func(route *mux.Route, _ *mux.Router, _ []*mux.Route) error {
		tpl, err := route.GetPathTemplate()
		if err != nil {
			return nil
		}
		methods, err := route.GetMethods()
		if err != nil {
			return nil
		}
		for _, m := range methods {
			out = append(out, m+" "+tpl)
		}
		return nil
	})
	return out, err
}

// route registers paths under Prefix. (Not a mux subrouter: through one,
// a method a path does not take is a 404, not a 405.)
type route struct{ r *mux.Router }

func (a route) Handle(path string, h http.Handler) *mux.Route { return a.r.Handle(Prefix+path, h) }

// ServeHTTP checks the operator token, then serves the request. Without
// the token every path answers 401, so that no route's existence is told.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	if err := h.authorize(r); err != nil {
		h.fail(w, r, err)
		return
	}
	h.router.ServeHTTP(w, r)
}

// errUnauthorized is a request without the operator token.
type errUnauthorized struct{ detail string }

func (e errUnauthorized) Error() string { return e.detail }

func (h *Handler) authorize(r *http.Request) error {
	header := r.Header.Get("Authorization")
	if header == "" {
		return errUnauthorized{"send the operator token as Authorization: Bearer <token>"}
	}
	scheme, token, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return errUnauthorized{"the Authorization header must be Bearer <operator token>"}
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(token)))
	if subtle.ConstantTimeCompare(sum[:], h.token[:]) != 1 {
		return errUnauthorized{"not the operator token"}
	}
	return nil
}

// handle adapts a handler that returns its error.
func (h *Handler) handle(fn func(w http.ResponseWriter, r *http.Request) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r = unescapeVars(r)
		if err := fn(w, r); err != nil {
			h.fail(w, r, err)
		}
	})
}

// unescapeVars unescapes the path segments the router matched escaped.
// They come from the request's escaped path, which net/url made valid, so
// none fails to unescape; one that did would be kept as sent.
func unescapeVars(r *http.Request) *http.Request {
	vars := mux.Vars(r)
	changed := false
	for k, v := range vars {
		if u, err := url.PathUnescape(v); err == nil && u != v {
			if !changed {
				vars, changed = maps.Clone(vars), true
			}
			vars[k] = u
		}
	}
	if !changed {
		return r
	}
	return mux.SetURLVars(r, vars)
}

func (h *Handler) methodNotAllowed(w http.ResponseWriter, r *http.Request) {
	var allowed []string
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete} {
		probe := r.Clone(r.Context())
		probe.Method = m
		var match mux.RouteMatch
		if h.router.Match(probe, &match) && match.MatchErr == nil {
			allowed = append(allowed, m)
		}
	}
	w.Header().Set("Allow", strings.Join(allowed, ", "))
	httpapi.WriteProblem(w, r, problem(http.StatusMethodNotAllowed, "method-not-allowed", "Method not allowed",
		fmt.Sprintf("this endpoint takes %s, not %s", strings.Join(allowed, ", "), r.Method)))
}

func problem(status int, slug, title, detail string) *httpapi.Problem {
	return &httpapi.Problem{Type: httpapi.ProblemTypeBase + slug, Title: title, Status: status, Detail: detail}
}

// fail answers a failed request with a problem (see docs/errors.md). The
// details of a server error are logged, never sent.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	var (
		refused *Error
		unauth  errUnauthorized
		tooBig  *http.MaxBytesError
		shared  *httpapi.Problem
		p       *httpapi.Problem
	)
	switch {
	case errors.As(err, &shared):
		// A refusal of the shared edge's helpers (httpapi.Query): a
		// client's mistake, already in the problem shape.
		p = shared
	case errors.As(err, &unauth):
		p = problem(http.StatusUnauthorized, "unauthorized", "Unauthorized", unauth.detail)
	case errors.As(err, &refused):
		switch refused.Kind {
		case NotFound:
			p = problem(http.StatusNotFound, "not-found", "Not found", refused.Msg)
		case Conflict:
			p = problem(http.StatusConflict, "already-exists", "Already exists", refused.Msg)
		case StateConflict:
			p = problem(http.StatusConflict, "conflict", "Conflict", refused.Msg)
		default:
			p = problem(http.StatusBadRequest, "invalid-request", "Invalid request", refused.Error())
			p.Field = refused.Field
		}
	case errors.As(err, &tooBig):
		p = problem(http.StatusRequestEntityTooLarge, "payload-too-large", "Request body too large",
			fmt.Sprintf("the request body exceeds the limit of %d bytes", tooBig.Limit))
	case errors.Is(err, os.ErrDeadlineExceeded):
		// The body did not arrive within the server's body timeout
		// (httpapi.Config.BodyTimeout): the client is still there, waiting.
		p = problem(http.StatusRequestTimeout, "request-timeout", "Request body too slow",
			"the request body did not arrive in time; send it in one go")
	case errors.Is(err, store.ErrUnavailable):
		h.log.WarnContext(r.Context(), "admin request refused", "path", r.URL.Path, "err", err,
			"request_id", w.Header().Get("X-Request-Id"))
		w.Header().Set("Retry-After", "5")
		p = problem(http.StatusServiceUnavailable, "unavailable", "Service unavailable", "the database is unavailable; retry shortly")
	default:
		if r.Context().Err() != nil {
			return // the client went away: nobody to answer
		}
		h.log.ErrorContext(r.Context(), "admin request failed", "method", r.Method, "path", r.URL.Path, "err", err,
			"request_id", w.Header().Get("X-Request-Id"))
		p = problem(http.StatusInternalServerError, "internal", "Internal server error", "the server could not complete the request")
	}
	httpapi.WriteProblem(w, r, p)
}

// writeJSON writes v as a JSON response.
func writeJSON(w http.ResponseWriter, status int, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode response: %w", err)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
	return nil
}
