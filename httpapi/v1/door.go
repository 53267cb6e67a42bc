// Package v1 serves AAP v1 under /v1: the protocol's first shapes (PUT
// /session that creates a session and runs its first turn, GET
// /session/:id with the histories inline, tools with inputSchema, a
// listing of bare ids) over the same sessions, store and turn pipeline as
// AAP v3. It is a translator and nothing else: each request becomes one
// call of agents.Runner or one read of the store, and each answer is
// written in v1's shape. Credentials, scopes, rate limits, body limits,
// streams and error responses are the hosting server's (Host), so a
// session is the same conversation through either door.
package v1

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/gorilla/mux"

	"github.com/aapd/aapd/agents"
	"github.com/aapd/aapd/auth"
	"github.com/aapd/aapd/store"
)

// Prefix is where AAP v1 is served.
const Prefix = "/v1"

// Version is the protocol version GET /v1/meta declares.
const Version = 1

// HandlerFunc is a handler that returns its error for the host to write.
type HandlerFunc func(w http.ResponseWriter, r *http.Request) error

// Prelude is an event a stream starts with before the turn's own events,
// written without an id (it is no event of the turn's log): session_start.
type Prelude struct {
	Event string
	Data  []byte
}

// Host is what the door borrows from the server that mounts it
// (httpapi.Server), so that v1 has AAP v3's credentials, limits, error
// responses and streams without a copy of them.
type Host interface {
	// Meta serves h as GET /meta is served: public, or authenticated
	// when the server closes its meta to anonymous callers.
	Meta(h HandlerFunc) http.Handler
	// Guard serves h to authenticated requests whose credential has the
	// scope, within the tenant's rate limits; a returned error is written
	// as a problem.
	Guard(scope string, h HandlerFunc) http.Handler
	// ReadBody reads a request body within the server's size and time
	// limits.
	ReadBody(w http.ResponseWriter, r *http.Request) ([]byte, error)
	// Decode decodes a JSON body, its errors naming the offending member.
	Decode(body []byte, v any) error
	// Idempotency returns the request's Idempotency-Key (checked; "" for
	// none) and the hash that tells a retry from another request.
	Idempotency(r *http.Request, body []byte) (key string, hash []byte, err error)
	// RequestID is the id of the request ctx belongs to.
	RequestID(ctx context.Context) string
	// Started marks the response with the turn a request started (its id,
	// and whether it replays an earlier one).
	Started(w http.ResponseWriter, r *http.Request, h *agents.Handle)
	// Stream writes a turn's events as Server-Sent Events until the turn
	// ends or the client leaves, as AAP v3's turn streams are written,
	// after the prelude, if any.
	Stream(w http.ResponseWriter, r *http.Request, src agents.EventSource, prelude *Prelude) error
}

// Sessions is what the door reads of the store, always of one tenant.
type Sessions interface {
	SessionGetOwned(ctx context.Context, tenantID, owner, id string) (store.Session, error)
	SessionList(ctx context.Context, p store.SessionListParams) (store.SessionPage, error)
	HistoryEach(ctx context.Context, p store.HistoryParams, fn func(seq int64, message json.RawMessage) error) error
}

// Config configures a Door.
type Config struct {
	Host     Host
	Sessions Sessions
	Agents   *agents.Registry
	Runner   *agents.Runner
}

// Door is AAP v1's front door.
type Door struct{ cfg Config }

// New returns the door; it touches nothing of cfg until it serves.
func New(cfg Config) *Door { return &Door{cfg: cfg} }

// Register adds the door's routes to r, each under Prefix with the scope
// its AAP v3 counterpart needs: reading needs sessions:read, anything that
// changes a session sessions:write.
func (d *Door) Register(r *mux.Router) {
	const read, write = auth.ScopeSessionsRead, auth.ScopeSessionsWrite
	h := d.cfg.Host
	r.Handle(Prefix+"/meta", h.Meta(d.getMeta)).Methods(http.MethodGet)
	r.Handle(Prefix+"/sessions", h.Guard(read, d.listSessions)).Methods(http.MethodGet)
	r.Handle(Prefix+"/session", h.Guard(write, d.createSession)).Methods(http.MethodPut)
	r.Handle(Prefix+"/session/{id}", h.Guard(read, d.getSession)).Methods(http.MethodGet)
	r.Handle(Prefix+"/session/{id}", h.Guard(write, d.postTurn)).Methods(http.MethodPost)
	r.Handle(Prefix+"/session/{id}", h.Guard(write, d.deleteSession)).Methods(http.MethodDelete)
}
