package httpapi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"math"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/gorilla/mux"

	"github.com/aapd/aapd/auth"
	"github.com/aapd/aapd/logctx"
	"github.com/aapd/aapd/store"
)

// responseWriter records the status for logs and metrics, and passes
// flushes through so streams reach the client event by event.
type responseWriter struct {
	http.ResponseWriter
	status      int
	wroteHeader bool
	bytes       int64 // body bytes written, for the access log
}

func (w *responseWriter) WriteHeader(status int) {
	if !w.wroteHeader {
		w.status, w.wroteHeader = status, true
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *responseWriter) Write(b []byte) (int, error) {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	n, err := w.ResponseWriter.Write(b)
	w.bytes += int64(n)
	return n, err
}

func (w *responseWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (w *responseWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

type requestIDKey struct{}

func requestIDFrom(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

var requestIDPattern = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// StatusClientClosedRequest is the status logs and metrics record for a
// request whose client went away before it was answered (nginx's 499; it is
// never sent).
const StatusClientClosedRequest = 499

// observe gives each request an id (X-Request-Id, kept from the client when
// sane), recovers panics into 500s, and logs and counts every request. The
// request's context carries a logctx.Fields holder, filled in as the
// tenant, session and turn become known, so that every line logged with the
// context, the access log line last, names them. A
// request whose client went away before the handler returned is counted as
// a disconnect, and recorded with status 499 unless its response had
// already started (a stream keeps its 200). Metrics labels come from fixed
// sets (observeRequest); the access log keeps the exact method and status.
func (s *Server) observe(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		id := r.Header.Get("X-Request-Id")
		if !requestIDPattern.MatchString(id) {
			b := make([]byte, 8)
			_, _ = rand.Read(b)
			id = hex.EncodeToString(b)
		}
		w.Header().Set("X-Request-Id", id)
		route := &matchedRoute{name: "unmatched"}
		ctx := context.WithValue(r.Context(), requestIDKey{}, id)
		ctx = logctx.NewContext(ctx, logctx.New(id))
		r = r.WithContext(context.WithValue(ctx, matchedRouteKey{}, route))
		rw := &responseWriter{ResponseWriter: w, status: http.StatusOK}
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.log.ErrorContext(r.Context(), "panic serving request", "panic", v)
				if !rw.wroteHeader {
					writeProblem(rw, r, probInternal.with("the server could not complete the request"))
				}
			}
			if r.Context().Err() != nil && !bodyTimedOut(r) {
				if !rw.wroteHeader {
					rw.status = StatusClientClosedRequest
				}
				s.metrics.clientDisconnects.WithLabelValues(route.name).Inc()
			}
			s.metrics.observeRequest(r.Method, route.name, rw.status, time.Since(start))
			s.log.InfoContext(r.Context(), "request", "method", r.Method, "route", route.name, "path", r.URL.Path,
				"status", rw.status, "bytes", rw.bytes, "duration_ms", time.Since(start).Milliseconds())
		}()
		next.ServeHTTP(rw, r)
	})
}

// matchedRoute carries the route template the router matched back out to
// observe, for logs and metrics labels of bounded cardinality.
type matchedRoute struct{ name string }

type matchedRouteKey struct{}

// recordRoute is router middleware: it tells observe which route matched.
func recordRoute(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if m, ok := r.Context().Value(matchedRouteKey{}).(*matchedRoute); ok {
			if cur := mux.CurrentRoute(r); cur != nil {
				m.name, _ = cur.GetPathTemplate()
				nameSpan(r, m.name)
			}
		}
		next.ServeHTTP(w, r)
	})
}

// cors lets browser applications (such as the AAP web playground) call the
// API from the origins allowed. Credentials are bearer tokens, never cookies,
// so the wildcard origin is safe. With no origins configured there is no
// cross-origin access at all. A preflight that is refused — an origin not
// allowed, or CORS off — gets a 403 problem, not whatever the route would
// answer an OPTIONS (405), so the refusal says what it is.
func (s *Server) cors(next http.Handler) http.Handler {
	allowAll := false
	allowed := map[string]bool{}
	for _, o := range s.cfg.CORSOrigins {
		if o == "*" {
			allowAll = true
		}
		allowed[strings.TrimSuffix(o, "/")] = true
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		if origin == "" {
			next.ServeHTTP(w, r)
			return
		}
		h := w.Header()
		h.Add("Vary", "Origin")
		preflight := r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != ""
		if !(allowAll || allowed[origin]) {
			if preflight {
				writeProblem(w, r, probCORSRefused.with("cross-origin requests from %s are not allowed (--cors-origins)", origin))
				return
			}
			next.ServeHTTP(w, r)
			return
		}
		if allowAll {
			h.Set("Access-Control-Allow-Origin", "*")
		} else {
			h.Set("Access-Control-Allow-Origin", origin)
		}
		h.Set("Access-Control-Expose-Headers", "Aapd-Turn-Id, Aapd-Session-Id, Retry-After, Location, X-Request-Id, Idempotent-Replayed, WWW-Authenticate, RateLimit, RateLimit-Policy")
		if preflight {
			h.Set("Access-Control-Allow-Methods", "GET, POST, PUT, DELETE, OPTIONS")
			h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type, Accept, Idempotency-Key, Last-Event-ID, X-Request-Id")
			h.Set("Access-Control-Max-Age", "600")
			w.WriteHeader(http.StatusNoContent)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// authenticate requires a valid credential, an API key or an end user's
// token, and puts its Principal in the request's context. A database
// outage is a 503, not a 401: the credential may be fine.
//
// A credential refused counts against the client's address
// (auththrottle.go); an address past its burst of failures is refused with
// 429 before its credential is looked at, whatever it is.
func (s *Server) authenticate(write ProblemWriter, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		addr := clientAddr(r, s.cfg.TrustedProxies)
		if wait := s.authFails.wait(addr); wait > 0 {
			p := probAuthThrottle.with("too many failed authentications from this address; retry after the delay in Retry-After, with a valid credential")
			p.retryAfter = max(1, int(math.Ceil(wait.Seconds())))
			s.failWith(write, w, r, p)
			return
		}
		p, err := s.principal(r)
		if err != nil {
			var refused *Problem
			if errors.As(err, &refused) && refused.Status == http.StatusUnauthorized && r.Header.Get("Authorization") != "" {
				s.authFails.failed(addr)
			}
			s.failWith(write, w, r, err)
			return
		}
		logctx.FromContext(r.Context()).SetTenant(p.TenantID)
		next.ServeHTTP(w, r.WithContext(auth.NewContext(r.Context(), p)))
	})
}

// principal reads the bearer credential: an aapd API key (it starts with
// auth.KeyPrefix) or else an end user's JWT.
func (s *Server) principal(r *http.Request) (auth.Principal, error) {
	header := r.Header.Get("Authorization")
	if header == "" {
		return auth.Principal{}, probUnauthorized.with("send an API key or an end-user token as Authorization: Bearer <credential>")
	}
	scheme, cred, ok := strings.Cut(header, " ")
	cred = strings.TrimSpace(cred)
	if !ok || !strings.EqualFold(scheme, "Bearer") || cred == "" {
		return auth.Principal{}, invalidToken("the Authorization header must be Bearer <credential>")
	}
	if strings.HasPrefix(cred, auth.KeyPrefix) {
		return s.keyPrincipal(r, cred)
	}
	return s.tokenPrincipal(r, cred)
}

// keyPrincipal authenticates an API key.
func (s *Server) keyPrincipal(r *http.Request, key string) (auth.Principal, error) {
	publicID, err := auth.ParseKey(key)
	if err != nil {
		return auth.Principal{}, invalidToken("the API key is malformed")
	}
	rec, err := s.keys.get(r.Context(), publicID, s.lookUpKey)
	if errors.Is(err, store.ErrNotFound) {
		return auth.Principal{}, invalidToken("unknown API key")
	}
	if err != nil {
		return auth.Principal{}, err
	}
	switch err := auth.VerifyKey(key, auth.StoredKey{Hash: rec.Hash, RevokedAt: rec.RevokedAt, ExpiresAt: rec.ExpiresAt}, s.now()); {
	case errors.Is(err, auth.ErrRevokedKey):
		return auth.Principal{}, invalidToken("the API key has been revoked")
	case errors.Is(err, auth.ErrExpiredKey):
		return auth.Principal{}, invalidToken("the API key has expired")
	case err != nil:
		return auth.Principal{}, invalidToken("unknown API key")
	}
	s.keyUses.used(rec.TenantID, rec.PublicID)
	return auth.Principal{TenantID: rec.TenantID, KeyID: rec.PublicID, Scopes: rec.Scopes}, nil
}

// lookUpKey reads a key from the database, for the key cache, and counts
// the read.
func (s *Server) lookUpKey(ctx context.Context, publicID string) (store.APIKey, error) {
	rec, err := s.cfg.Store.APIKeyGetByPublicID(ctx, publicID)
	s.metrics.keyLookedUp(err)
	return rec, err
}

// tokenPrincipal authenticates an end user's token. Whatever is wrong with
// the token is a 401 saying what; only aapd's own trouble (the database,
// while issuers are looked up) is anything else.
func (s *Server) tokenPrincipal(r *http.Request, token string) (auth.Principal, error) {
	p, err := s.tokens.Verify(r.Context(), token)
	var refused *auth.TokenError
	if errors.As(err, &refused) {
		s.log.DebugContext(r.Context(), "token refused", "reason", refused.Reason, "err", refused.Err)
		return auth.Principal{}, invalidToken(refused.Reason)
	}
	if err != nil {
		return auth.Principal{}, err
	}
	return p, nil
}

// need is a route that requires the scope: a credential without it gets
// 403, before anything of the request is looked at.
func (s *Server) need(write ProblemWriter, scope string, h HandlerFunc) http.Handler {
	return s.handleWith(write, func(w http.ResponseWriter, r *http.Request) error {
		if p, _ := auth.FromContext(r.Context()); !p.Has(scope) {
			prob := probForbidden.with("this credential lacks the %s scope this request needs", scope)
			prob.authError, prob.scope = "insufficient_scope", scope
			return prob
		}
		return h(w, r)
	})
}

func invalidToken(detail string) *Problem {
	p := probUnauthorized.with("%s", detail)
	p.authError = "invalid_token"
	return p
}
