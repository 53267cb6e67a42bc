package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/agents"
	"github.com/aapd/aapd/store"
)

// ProblemTypeBase prefixes every problem type; docs/errors.md describes each.
const ProblemTypeBase = "https://aapd.dev/problems/"

// Problem is an RFC 9457 problem detail, the body of every error response.
type Problem struct {
	Type      string `json:"type"`
	Title     string `json:"title"`
	Status    int    `json:"status"`
	Detail    string `json:"detail,omitempty"`
	Instance  string `json:"instance,omitempty"`
	RequestID string `json:"requestId,omitempty"`
	// Field is the JSON path of the offending value of a bad request.
	Field string `json:"field,omitempty"`
	// TurnID is the running turn a 409 conflicts with.
	TurnID string `json:"turnId,omitempty"`
	// Line and Rule are, for an import refused, the document's line (from
	// 1) and the rule it breaks (docs/lifecycle.md).
	Line int    `json:"line,omitempty"`
	Rule string `json:"rule,omitempty"`

	retryAfter int    // seconds; sets Retry-After when > 0
	authError  string // sets WWW-Authenticate's error when non-empty
	scope      string // the scope an insufficient_scope challenge names
}

// Error makes a *Problem an error that handlers can return.
func (p *Problem) Error() string { return fmt.Sprintf("%d %s: %s", p.Status, p.Title, p.Detail) }

// Slug is the stable name of the problem's kind: its type without
// ProblemTypeBase ("not-found", "turn-running", …; docs/errors.md). Doors
// with an error shape of their own map it to theirs.
func (p *Problem) Slug() string { return strings.TrimPrefix(p.Type, ProblemTypeBase) }

// RetryAfter is the delay, in seconds, after which a retry may succeed (0:
// none is said); the edge sends it as Retry-After.
func (p *Problem) RetryAfter() int { return p.retryAfter }

// NewProblem returns a problem of a kind a door names itself: a slug
// (documented in docs/errors.md), a title and the status.
func NewProblem(status int, slug, title, format string, args ...any) *Problem {
	return kind{slug, title, status}.with(format, args...)
}

// WithRetryAfter sets the delay after which a retry may succeed.
func (p *Problem) WithRetryAfter(seconds int) *Problem {
	p.retryAfter = seconds
	return p
}

// NotFound is the problem of a resource that is not there, or not the
// caller's to see: never a 403, which would tell that it exists.
func NotFound(format string, args ...any) *Problem { return probNotFound.with(format, args...) }

// problem kinds: one stable type slug, title and status each.
var (
	probInvalid      = kind{"invalid-request", "Invalid request", http.StatusBadRequest}
	probUnauthorized = kind{"unauthorized", "Unauthorized", http.StatusUnauthorized}
	probForbidden    = kind{"insufficient-scope", "Insufficient scope", http.StatusForbidden}
	probNotFound     = kind{"not-found", "Not found", http.StatusNotFound}
	probMethod       = kind{"method-not-allowed", "Method not allowed", http.StatusMethodNotAllowed}
	probCORSRefused  = kind{"cors-refused", "Cross-origin request refused", http.StatusForbidden}
	probBodyTimeout  = kind{"request-timeout", "Request body too slow", http.StatusRequestTimeout}
	probTurnRunning  = kind{"turn-running", "A turn is already running", http.StatusConflict}
	probCompacting   = kind{"compaction-conflict", "The session is being compacted", http.StatusConflict}
	probEnded        = kind{"session-ended", "The session has ended", http.StatusConflict}
	// probHistoryTrimmed: a turn's events were dropped with its session's
	// trimmed full history (store.ErrTurnTrimmed); the fork's refusal of a
	// point inside the prefix has the same type.
	probHistoryTrimmed = kind{"history-trimmed", "The turn's events were trimmed with the full history", http.StatusConflict}
	probTooLarge       = kind{"payload-too-large", "Request body too large", http.StatusRequestEntityTooLarge}
	probIdempotency    = kind{"idempotency-key-reused", "Idempotency key reused", http.StatusUnprocessableEntity}
	probRateLimited    = kind{"rate-limited", "Too many requests", http.StatusTooManyRequests}
	probTurnLimit      = kind{"running-turns-limit", "Too many running turns", http.StatusTooManyRequests}
	probFairShare      = kind{"fair-share", "Over the fair share of busy workers", http.StatusTooManyRequests}
	probAuthThrottle   = kind{"auth-throttled", "Too many failed authentications", http.StatusTooManyRequests}
	probQueueFull      = kind{"queue-full", "Too many queued turns", http.StatusTooManyRequests}
	probOverloaded     = kind{"overloaded", "Server busy", http.StatusServiceUnavailable}
	probUnavailable    = kind{"unavailable", "Service unavailable", http.StatusServiceUnavailable}
	probInternal       = kind{"internal", "Internal server error", http.StatusInternalServerError}
)

type kind struct {
	slug   string
	title  string
	status int
}

func (k kind) with(format string, args ...any) *Problem {
	return &Problem{Type: ProblemTypeBase + k.slug, Title: k.title, Status: k.status, Detail: fmt.Sprintf(format, args...)}
}

// toProblem maps an error returned by a handler to the problem the client
// sees. Errors it does not know are internal: logged, never shown.
func toProblem(err error) (p *Problem, internal bool) {
	var (
		prob      *Problem
		aapErr    *aap.Error
		running   *store.TurnRunningError
		tooBig    *http.MaxBytesError
		slow      *bodyTimeoutError
		turnLimit *agents.TurnLimitError
		queueFull *store.QueueFullError
	)
	switch {
	case errors.As(err, &prob):
		return prob, false
	case errors.As(err, &aapErr):
		p = probInvalid.with("%s", aapErr.Error())
		p.Field = aapErr.Field
		return p, false
	case errors.As(err, &tooBig):
		return probTooLarge.with("the request body exceeds the limit of %d bytes", tooBig.Limit), false
	case errors.As(err, &slow):
		return probBodyTimeout.with("the request body did not arrive within %s; send it in one go", slow.limit), false
	case errors.As(err, &running):
		p = probTurnRunning.with("the session is running turn %s; retry when it has finished", running.TurnID)
		p.TurnID, p.retryAfter = running.TurnID, 1
		return p, false
	case errors.Is(err, store.ErrCompactionConflict):
		// Other replicas kept compacting the session through every
		// attempt (agents.Runner.Compact): soon one will be left.
		p = probCompacting.with("other compactions of the session kept committing first; retry shortly")
		p.retryAfter = 1
		return p, false
	case errors.Is(err, store.ErrSessionEnded):
		return probEnded.with("the session was ended and takes no more turns; start a new session"), false
	case errors.Is(err, store.ErrTurnTrimmed):
		return probHistoryTrimmed.with("the turn's events were dropped with its session's trimmed full history (retention's fullHistoryDays); its messages are summarised by the compacted history"), false
	case errors.Is(err, store.ErrNotPending):
		return probNotFound.with("the session waits on no such tool call"), false
	case errors.Is(err, store.ErrNotFound):
		return probNotFound.with("no such session"), false
	case errors.Is(err, store.ErrIdempotencyMismatch):
		return probIdempotency.with("this Idempotency-Key was used with a different request body; use a new key for a new request"), false
	case errors.Is(err, agents.ErrUnknownAgent):
		return probInvalid.with("%s", err.Error()), false
	case errors.As(err, &turnLimit):
		p = probTurnLimit.with("this tenant already runs %d turns on this replica, as many as its limit allows; retry when one has ended", turnLimit.Limit)
		p.retryAfter = 1
		return p, false
	case errors.As(err, &queueFull):
		p = probQueueFull.with("this tenant has %d background turns waiting for a worker, as many as its limit (maxQueuedTurns) allows; retry when fewer wait", queueFull.Limit)
		p.retryAfter = 5
		return p, false
	case errors.Is(err, agents.ErrOverFairShare):
		p = probFairShare.with("every turn worker is busy and this tenant already holds its fair share of them; retry shortly")
		p.retryAfter = 1
		return p, false
	case errors.Is(err, agents.ErrOverloaded):
		p = probOverloaded.with("every turn worker is busy; retry shortly")
		p.retryAfter = 2
		return p, false
	case errors.Is(err, agents.ErrShutdown):
		p = probUnavailable.with("the server is shutting down; retry on another replica or shortly")
		p.retryAfter = 2
		return p, false
	case errors.Is(err, agents.ErrTurnLost):
		p = probUnavailable.with("the turn was lost with a database crash before it ended; nothing of it was kept: send it again")
		p.retryAfter = 1
		return p, true
	case errors.Is(err, store.ErrUnavailable):
		p = probUnavailable.with("the database is unavailable; retry shortly")
		p.retryAfter = 5
		return p, true
	}
	return probInternal.with("the server could not complete the request"), true
}

// writeProblem writes p as application/problem+json.
func writeProblem(w http.ResponseWriter, r *http.Request, p *Problem) {
	problemHeaders(w, r, p)
	writeProblemJSON(w, r, p)
}

// writeProblemJSON is the ProblemWriter of problem+json (RFC 9457): AAP's
// error shape, and every door's unless it says otherwise.
func writeProblemJSON(w http.ResponseWriter, _ *http.Request, p *Problem) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(p.Status)
	_ = json.NewEncoder(w).Encode(p)
}

// problemHeaders sets what every refusal carries, whatever its shape:
// Cache-Control, Retry-After, the bearer challenge of a 401 or 403, and
// the problem's instance and request id.
func problemHeaders(w http.ResponseWriter, r *http.Request, p *Problem) {
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	if p.retryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(p.retryAfter))
	}
	if p.Status == http.StatusUnauthorized || p.authError != "" {
		// RFC 6750 section 3: the challenge says what was wrong with the
		// bearer credential, and for a 403 which scope was missing.
		challenge := `Bearer realm="aapd"`
		if p.authError != "" {
			challenge += fmt.Sprintf(`, error=%q`, p.authError)
		}
		if p.scope != "" {
			challenge += fmt.Sprintf(`, scope=%q`, p.scope)
		}
		h.Set("WWW-Authenticate", challenge)
	}
	if p.Instance == "" {
		p.Instance = r.URL.Path
	}
	p.RequestID = requestIDFrom(r.Context())
}

// WriteProblem writes p as application/problem+json, exactly as every
// error of the API is written (request id, instance, WWW-Authenticate on a
// 401). Front doors in sub-packages (httpapi/admin) use it, so that all of
// aapd's errors have one shape.
func WriteProblem(w http.ResponseWriter, r *http.Request, p *Problem) { writeProblem(w, r, p) }

// handle adapts a HandlerFunc: a returned error becomes a problem response
// (see fail).
func (s *Server) handle(h HandlerFunc) http.Handler { return s.handleWith(writeProblemJSON, h) }

// handleWith is handle for a door that writes its refusals with write.
func (s *Server) handleWith(write ProblemWriter, h HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := h(w, r); err != nil {
			s.failWith(write, w, r, err)
		}
	})
}

// fail is failWith for problem+json.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	s.failWith(writeProblemJSON, w, r, err)
}

// failWith answers a request that failed with err: with a problem (in the
// shape write gives it), an
// internal error logged with the request id. A client that went away gets
// no answer and costs no ERROR line: what failed is what its leaving
// cancelled (typically a store call returning context.Canceled), not the
// server. observe records it as a 499 and a disconnect. A body that timed
// out also cancels the context, but its client is waiting for the 408.
func (s *Server) failWith(write ProblemWriter, w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() != nil && !bodyTimedOut(r) {
		s.log.InfoContext(r.Context(), "client went away", "method", r.Method, "path", r.URL.Path, "err", err)
		return
	}
	p, internal := toProblem(err)
	s.metrics.rejected(p)
	if internal {
		s.log.ErrorContext(r.Context(), "request failed", "method", r.Method, "path", r.URL.Path, "status", p.Status, "err", err)
	} else if p.Status >= 500 {
		s.log.WarnContext(r.Context(), "request refused", "status", p.Status, "err", err)
	}
	if rw, ok := w.(*responseWriter); ok && rw.wroteHeader {
		// The response is under way (a stream): too late for a problem.
		s.log.WarnContext(r.Context(), "error after the response started", "err", err, slog.String("path", r.URL.Path))
		return
	}
	problemHeaders(w, r, p)
	write(w, r, p)
}
