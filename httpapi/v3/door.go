// Package v3 serves AAP v3, the protocol aapd is built for, at the root of
// the API: its seven endpoints exactly as the specification writes them
// (/meta, /sessions, /sessions/:id, its history and turns), and aapd's
// documented extensions of them (turn records, resumable streams, cancel,
// the session event log, compaction on demand). Like every door, it is a
// translator over the turn pipeline (agents.Runner) served through the
// edge (httpapi.Edge), which lends it credentials, limits, problems and
// streams.
package v3

import (
	"net/http"

	"github.com/gorilla/mux"

	"github.com/aapd/aapd/agents"
	"github.com/aapd/aapd/auth"
	"github.com/aapd/aapd/httpapi"
	"github.com/aapd/aapd/logctx"
	"github.com/aapd/aapd/store"
)

// Page sizes of the listings (sessions, turns, compactions).
const (
	DefaultPageLimit = 20
	MaxPageLimit     = 100
)

// Config configures a Door.
type Config struct {
	Store  *store.Store
	Agents *agents.Registry
	Runner *agents.Runner
	// ImportMaxBytes bounds the document POST /sessions/import takes (413
	// beyond); zero is DefaultImportMaxBytes.
	ImportMaxBytes int64
}

// DefaultImportMaxBytes is the largest import document taken by default.
const DefaultImportMaxBytes = 1 << 30

// Door is AAP v3's front door.
type Door struct {
	cfg  Config
	edge httpapi.Edge
}

// New returns the door; it serves once mounted (httpapi.Config.Doors).
func New(cfg Config) *Door {
	if cfg.ImportMaxBytes <= 0 {
		cfg.ImportMaxBytes = DefaultImportMaxBytes
	}
	return &Door{cfg: cfg}
}

// Mount registers AAP v3's routes, each with the scope it needs
// (docs/tenancy.md): reading, streams followed included, needs
// sessions:read; anything that changes a session needs sessions:write.
func (d *Door) Mount(r *mux.Router, e httpapi.Edge) {
	d.edge = e
	const read, write = auth.ScopeSessionsRead, auth.ScopeSessionsWrite
	r.Handle("/meta", e.Meta(d.getMeta)).Methods(http.MethodGet)
	r.Handle("/sessions", e.Guard(read, d.listSessions)).Methods(http.MethodGet)
	r.Handle("/sessions", e.Guard(write, d.createSession)).Methods(http.MethodPost)
	r.Handle("/sessions/{id}", e.Guard(read, d.getSession)).Methods(http.MethodGet)
	r.Handle("/sessions/{id}", e.Guard(write, d.deleteSession)).Methods(http.MethodDelete)
	r.Handle("/sessions/{id}/history", e.Guard(read, d.getHistory)).Methods(http.MethodGet)
	r.Handle("/sessions/{id}/turns", e.Guard(write, d.postTurn)).Methods(http.MethodPost)

	// Extensions (docs/durability.md): turns as first-class records.
	r.Handle("/sessions/{id}/turns", e.Guard(read, d.listTurns)).Methods(http.MethodGet)
	r.Handle("/sessions/{id}/turns/{turnId}", e.Guard(read, d.getTurn)).Methods(http.MethodGet)
	r.Handle("/sessions/{id}/turns/{turnId}/events", e.Guard(read, d.turnEvents)).Methods(http.MethodGet)
	r.Handle("/sessions/{id}/turns/{turnId}/cancel", e.Guard(write, d.cancelTurn)).Methods(http.MethodPost)

	// Extensions (docs/protocols.md): the session event log.
	r.Handle("/sessions/{id}/events", e.Guard(read, d.sessionEvents)).Methods(http.MethodGet)

	// Extensions (docs/compaction.md): compaction on demand, and its records.
	r.Handle("/sessions/{id}/compact", e.Guard(write, d.compactSession)).Methods(http.MethodPost)
	r.Handle("/sessions/{id}/compactions", e.Guard(read, d.listCompactions)).Methods(http.MethodGet)

	// Extensions (docs/lifecycle.md): fork, export and import.
	r.Handle("/sessions/{id}/fork", e.Guard(write, d.forkSession)).Methods(http.MethodPost)
	r.Handle("/sessions/{id}/export", e.Guard(read, d.exportSession)).Methods(http.MethodGet)
	r.Handle("/sessions/import", e.Guard(write, d.importSession)).Methods(http.MethodPost)

	// Extensions (docs/background.md#schedules): a session's schedules.
	r.Handle("/sessions/{id}/schedules", e.Guard(write, d.createSchedule)).Methods(http.MethodPost)
	r.Handle("/sessions/{id}/schedules", e.Guard(read, d.listSchedules)).Methods(http.MethodGet)
	r.Handle("/sessions/{id}/schedules/{scheduleId}", e.Guard(read, d.getSchedule)).Methods(http.MethodGet)
	r.Handle("/sessions/{id}/schedules/{scheduleId}", e.Guard(write, d.deleteSchedule)).Methods(http.MethodDelete)
}

// getMeta is GET /meta: the agents this server runs.
func (d *Door) getMeta(w http.ResponseWriter, _ *http.Request) error {
	return httpapi.WriteJSON(w, http.StatusOK, d.cfg.Agents.Meta())
}

// sessionID returns the {id} of the route; ids this server never issues are
// not looked up.
func sessionID(r *http.Request) (string, error) {
	id := mux.Vars(r)["id"]
	if !store.ValidID("sess_", id) {
		return "", httpapi.NotFound("no such session")
	}
	logctx.FromContext(r.Context()).SetSession(id)
	return id, nil
}
