package httpapi

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/gorilla/mux"

	"github.com/aapd/aapd/agents"
	"github.com/aapd/aapd/auth"
	"github.com/aapd/aapd/logctx"
)

// A Door is one protocol served over the edge: AAP v3 (httpapi/v3), AAP v1
// (httpapi/v1), AG-UI (httpapi/agui), each a package of its own. A door
// translates its protocol's shapes into calls of the one turn pipeline
// (agents.Runner) and the pipeline's events and errors back into its shapes;
// everything else a request needs — credentials, scopes, rate limits, body
// limits, request ids, logs, metrics, streams, drain — is the edge's, lent
// through Edge, so that no door keeps a copy of it. This is connect-go's
// protocolHandler turned around: there the handler is shared and protocols
// plug into it; here the edge is shared and doors plug into it.
type Door interface {
	// Mount registers the door's routes on r, each served through e.
	Mount(r *mux.Router, e Edge)
}

// HandlerFunc is a door's handler: it returns its error for the edge to
// answer, in the door's error shape (Edge.WithProblems).
type HandlerFunc func(w http.ResponseWriter, r *http.Request) error

// ProblemWriter writes a refusal in a door's own error shape. The edge has
// set the status's headers (Retry-After, WWW-Authenticate, Cache-Control)
// and logged and counted the refusal; the writer sets the content type,
// the status and the body. p.Slug says which refusal it is.
type ProblemWriter func(w http.ResponseWriter, r *http.Request, p *Problem)

// Edge is what the server lends every door: the one interface every door
// is written against.
type Edge interface {
	// Guard serves h to authenticated requests whose credential has the
	// scope (auth.ScopeSessionsRead or Write), within the tenant's rate
	// limits. The Principal is in the request's context (auth.FromContext).
	Guard(scope string, h HandlerFunc) http.Handler
	// Public serves h to anyone: no credential is asked for.
	Public(h HandlerFunc) http.Handler
	// Meta serves h as GET /meta is served: public, or authenticated when
	// the operator closed the agents' description to anonymous callers.
	Meta(h HandlerFunc) http.Handler
	// WithProblems returns the edge whose handlers (and whose own
	// refusals: a missing credential, a rate limit, a body too big) are
	// answered by write: a door whose clients expect another error shape
	// than problem+json says so once, in Mount.
	WithProblems(write ProblemWriter) Edge

	// ReadBody reads a request body within the server's size and time
	// limits (413 and 408 beyond).
	ReadBody(w http.ResponseWriter, r *http.Request) ([]byte, error)
	// StreamBody returns a request body to read as it arrives, for a body
	// that may be far larger than ReadBody takes (an import): up to max
	// bytes (413 beyond), taking as long as it keeps arriving, each read
	// within the server's body timeout of the last (408 when it stalls).
	StreamBody(w http.ResponseWriter, r *http.Request, max int64) io.Reader
	// Decode decodes a JSON body into v, its errors naming the offending
	// member.
	Decode(body []byte, v any) error
	// Idempotency returns the request's Idempotency-Key (checked; "" for
	// none) and the hash that tells a retry from another request.
	Idempotency(r *http.Request, body []byte) (key string, hash []byte, err error)

	// Started marks the response with the turn a request started (its id
	// in Aapd-Turn-Id, and Idempotent-Replayed when it replays an earlier
	// one) and names the turn in the request's log lines.
	Started(w http.ResponseWriter, r *http.Request, h *agents.Handle)
	// StreamTurn writes a turn's events, after position after, as AAP
	// Server-Sent Events until the turn ends or the client leaves (or,
	// for a stream that only follows the turn, the server drains), after
	// the prelude, if any.
	StreamTurn(w http.ResponseWriter, r *http.Request, src agents.EventSource, o StreamOptions) error
	// StreamSession writes a session's event log as it grows, as AAP
	// Server-Sent Events named by their cursors.
	StreamSession(w http.ResponseWriter, r *http.Request, f *agents.SessionFollower) error
	// OpenStream begins a stream of the door's own events (Server-Sent
	// Events, its headers sent at once). Its context ends when the client
	// leaves or the server drains (a follower's client resumes elsewhere);
	// close it when the stream ends.
	OpenStream(w http.ResponseWriter, r *http.Request) (*SSE, context.Context, func())
	// KeepAlive is the idle time after which a stream sends a comment.
	KeepAlive() time.Duration
	// StreamsStopped is closed when the server drains (StopStreams): a
	// request that only waits on a turn run elsewhere, or that can be
	// asked again, answers where it is then, so that it does not hold the
	// shutdown up (its client asks again, on another replica).
	StreamsStopped() <-chan struct{}
	// Logger is the server's logger; its lines name the request.
	Logger() *slog.Logger
}

// StreamOptions are how Edge.StreamTurn writes a turn's stream.
type StreamOptions struct {
	// After is the position of the last event the client has.
	After int
	// Follow is true for a stream that only follows a turn (a resume, a
	// replay): it ends where it is when the server drains.
	Follow bool
	// Prelude is written first, without an id (no event of the turn's
	// log): AAP v1's session_start.
	Prelude *Prelude
}

// Prelude is an event a stream starts with before the turn's own.
type Prelude struct {
	Event string
	Data  []byte
}

// edge is the Edge of a Server, answering refusals with write.
type edge struct {
	s     *Server
	write ProblemWriter
}

var _ Edge = edge{}

func (e edge) handle(h HandlerFunc) http.Handler { return e.s.handleWith(e.write, h) }

func (e edge) Guard(scope string, h HandlerFunc) http.Handler {
	return e.s.authenticate(e.write, e.s.limitRate(e.write, e.s.need(e.write, scope, h)))
}

func (e edge) Public(h HandlerFunc) http.Handler { return e.handle(h) }

func (e edge) Meta(h HandlerFunc) http.Handler {
	meta := e.handle(h)
	if e.s.cfg.MetaRequiresAuth {
		meta = e.s.authenticate(e.write, meta)
	}
	return meta
}

func (e edge) WithProblems(write ProblemWriter) Edge {
	if write == nil {
		write = writeProblemJSON
	}
	return edge{s: e.s, write: write}
}

func (e edge) ReadBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	return e.s.readBody(w, r)
}

func (e edge) StreamBody(w http.ResponseWriter, r *http.Request, max int64) io.Reader {
	return streamBody(w, r, max)
}

func (edge) Decode(body []byte, v any) error { return decodeJSON(body, v) }

func (edge) Idempotency(r *http.Request, body []byte) (string, []byte, error) {
	key, err := idempotencyKey(r)
	if err != nil {
		return "", nil, err
	}
	return key, requestHash(r, body), nil
}

func (edge) Started(w http.ResponseWriter, r *http.Request, t *agents.Handle) {
	logctx.FromContext(r.Context()).SetTurn(t.Turn.ID)
	w.Header().Set(TurnIDHeader, t.Turn.ID)
	if t.Replay {
		w.Header().Set(ReplayedHeader, "true")
	}
}

func (e edge) StreamTurn(w http.ResponseWriter, r *http.Request, src agents.EventSource, o StreamOptions) error {
	if o.Prelude != nil {
		w = &preludeWriter{ResponseWriter: w, prelude: fmt.Appendf(nil, "event: %s\ndata: %s\n\n", o.Prelude.Event, o.Prelude.Data)}
	}
	return e.s.streamEvents(w, r, src, o.After, o.Follow)
}

func (e edge) StreamSession(w http.ResponseWriter, r *http.Request, f *agents.SessionFollower) error {
	return e.s.streamSessionEvents(w, r, f)
}

func (e edge) OpenStream(w http.ResponseWriter, r *http.Request) (*SSE, context.Context, func()) {
	return e.s.openStream(w, r)
}

func (e edge) KeepAlive() time.Duration { return e.s.cfg.KeepAlive }

func (e edge) Logger() *slog.Logger { return e.s.log }

func (e edge) StreamsStopped() <-chan struct{} { return e.s.drain.streams }

// preludeWriter writes an event before the stream's own, right after the
// stream's head, where streamEvents would write its first.
type preludeWriter struct {
	http.ResponseWriter
	prelude []byte
}

func (p *preludeWriter) WriteHeader(status int) {
	p.ResponseWriter.WriteHeader(status)
	if p.prelude != nil {
		_, _ = p.ResponseWriter.Write(p.prelude)
		p.prelude = nil
	}
}

// Unwrap lets http.ResponseController flush the stream.
func (p *preludeWriter) Unwrap() http.ResponseWriter { return p.ResponseWriter }

// TenantOf returns the authenticated tenant of a request served through
// Edge.Guard.
func TenantOf(r *http.Request) string {
	p, _ := auth.FromContext(r.Context())
	return p.TenantID
}

// OwnerOf returns the session owner a request is confined to: the end
// user of a token, or "" (any owner) for an API key.
func OwnerOf(r *http.Request) string {
	p, _ := auth.FromContext(r.Context())
	return p.Owner()
}

// RequestID is the id of the request ctx belongs to (X-Request-Id).
func RequestID(ctx context.Context) string { return requestIDFrom(ctx) }
