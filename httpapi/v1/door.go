// Package v1 serves AAP v1 under /v1: the protocol's first shapes (PUT
// /session that creates a session and runs its first turn, GET
// /session/:id with the histories inline, tools with inputSchema, a
// listing of bare ids) over the same sessions, store and turn pipeline as
// AAP v3. It is a translator and nothing else: each request becomes one
// call of agents.Runner or one read of the store, and each answer is
// written in v1's shape. Credentials, scopes, rate limits, body limits,
// streams and error responses are the edge's (httpapi.Edge), so a session
// is the same conversation through either door.
package v1

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/gorilla/mux"

	"github.com/aapd/aapd/agents"
	"github.com/aapd/aapd/auth"
	"github.com/aapd/aapd/httpapi"
	"github.com/aapd/aapd/store"
)

// Prefix is where AAP v1 is served.
const Prefix = "/v1"

// Version is the protocol version GET /v1/meta declares.
const Version = 1

// Sessions is what the door reads of the store, always of one tenant.
type Sessions interface {
	SessionGetOwned(ctx context.Context, tenantID, owner, id string) (store.Session, error)
	SessionList(ctx context.Context, p store.SessionListParams) (store.SessionPage, error)
	HistoryEach(ctx context.Context, p store.HistoryParams, fn func(seq int64, message json.RawMessage) error) (int64, error)
}

// Config configures a Door.
type Config struct {
	Sessions Sessions
	Agents   *agents.Registry
	Runner   *agents.Runner
}

// Door is AAP v1's front door.
type Door struct {
	cfg  Config
	edge httpapi.Edge
}

// New returns the door; it serves once mounted (httpapi.Config.Doors).
func New(cfg Config) *Door { return &Door{cfg: cfg} }

// Mount adds the door's routes to r, each under Prefix with the scope its
// AAP v3 counterpart needs: reading needs sessions:read, anything that
// changes a session sessions:write.
func (d *Door) Mount(r *mux.Router, h httpapi.Edge) {
	const read, write = auth.ScopeSessionsRead, auth.ScopeSessionsWrite
	d.edge = h
	r.Handle(Prefix+"/meta", h.Meta(d.getMeta)).Methods(http.MethodGet)
	r.Handle(Prefix+"/sessions", h.Guard(read, d.listSessions)).Methods(http.MethodGet)
	r.Handle(Prefix+"/session", h.Guard(write, d.createSession)).Methods(http.MethodPut)
	r.Handle(Prefix+"/session/{id}", h.Guard(read, d.getSession)).Methods(http.MethodGet)
	r.Handle(Prefix+"/session/{id}", h.Guard(write, d.postTurn)).Methods(http.MethodPost)
	r.Handle(Prefix+"/session/{id}", h.Guard(write, d.deleteSession)).Methods(http.MethodDelete)
}
