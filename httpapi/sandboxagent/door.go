// Package sandboxagent serves the sandbox-agent API (seed 001: the HTTP API
// of rivet-dev's sandbox-agent 0.1.7, a "universal API" for coding agents)
// under /sandbox-agent, so that its clients — its TypeScript SDK, its web
// inspector — work against aapd unchanged, durably and per tenant.
//
// It is a translator over the one turn pipeline and nothing more. A
// sandbox-agent session is an aapd session, named by the id the client
// chose (the session's thread id, as an AG-UI thread names one) or by its
// aapd id; a message is a turn; a permission reply or a question reply is
// an answer to a pending tool call (agents.Runner.Answer); terminate ends
// the session (agents.Runner.EndSession). The session's events are its AAP
// session event log (agents.Runner.SessionEvents), translated at the door
// into UniversalEvents numbered from 1 (eventlog.go, translate.go).
// Credentials, scopes, rate limits and streams are the edge's
// (httpapi.Edge); errors are the seed's ProblemDetails (problems.go).
// docs/protocols.md describes the door for its users.
package sandboxagent

import (
	_ "embed"
	"net/http"

	"github.com/gorilla/mux"

	"github.com/aapd/aapd/agents"
	"github.com/aapd/aapd/auth"
	"github.com/aapd/aapd/httpapi"
	"github.com/aapd/aapd/store"
)

// Prefix is where the API is served: clients use
// baseUrl = http://host:port/sandbox-agent (the SDK adds /v1/...).
const Prefix = "/sandbox-agent"

// DocumentPath is where the API's OpenAPI document (the seed's, as
// published) is served.
const DocumentPath = Prefix + "/openapi.json"

// document is the sandbox-agent 0.1.7 OpenAPI document, byte for byte
// (Apache-2.0, rivet-dev/sandbox-agent docs/openapi.json): every route and
// schema this door serves.
//
//go:embed openapi.json
var document []byte

// OpenAPIJSON returns the API's OpenAPI document.
func OpenAPIJSON() []byte { return document }

// Config configures a Door.
type Config struct {
	Store  *store.Store
	Agents *agents.Registry
	Runner *agents.Runner
	// IndexSessions bounds how many sessions' log indexes the door keeps
	// (index.go); zero: DefaultIndexSessions.
	IndexSessions int
}

// Door is the sandbox-agent front door.
type Door struct {
	cfg   Config
	edge  httpapi.Edge
	index *logIndex
}

// New returns the door; it serves once mounted (httpapi.Config.Doors).
func New(cfg Config) *Door {
	return &Door{cfg: cfg, index: newLogIndex(cfg.IndexSessions)}
}

// Mount registers the API's routes under Prefix, answered with the seed's
// ProblemDetails. Health and the agents are public like GET /meta (closed
// with it by --meta-requires-auth); reading sessions needs sessions:read,
// anything that changes one sessions:write.
func (d *Door) Mount(r *mux.Router, e httpapi.Edge) {
	e = e.WithProblems(writeProblem)
	d.edge = e
	const read, write = auth.ScopeSessionsRead, auth.ScopeSessionsWrite
	v1 := Prefix + "/v1"
	r.Handle(DocumentPath, e.Public(d.getDocument)).Methods(http.MethodGet)
	r.Handle(v1+"/health", e.Public(d.getHealth)).Methods(http.MethodGet)
	r.Handle(v1+"/agents", e.Meta(d.listAgents)).Methods(http.MethodGet)
	r.Handle(v1+"/agents/{agent}/install", e.Meta(d.installAgent)).Methods(http.MethodPost)
	r.Handle(v1+"/agents/{agent}/modes", e.Meta(d.getModes)).Methods(http.MethodGet)
	r.Handle(v1+"/agents/{agent}/models", e.Meta(d.getModels)).Methods(http.MethodGet)
	r.Handle(v1+"/sessions", e.Guard(read, d.listSessions)).Methods(http.MethodGet)
	r.Handle(v1+"/sessions/{session_id}", e.Guard(write, d.createSession)).Methods(http.MethodPost)
	r.Handle(v1+"/sessions/{session_id}/messages", e.Guard(write, d.postMessage)).Methods(http.MethodPost)
	r.Handle(v1+"/sessions/{session_id}/messages/stream", e.Guard(write, d.postMessageStream)).Methods(http.MethodPost)
	r.Handle(v1+"/sessions/{session_id}/events", e.Guard(read, d.getEvents)).Methods(http.MethodGet)
	r.Handle(v1+"/sessions/{session_id}/events/sse", e.Guard(read, d.getEventsSSE)).Methods(http.MethodGet)
	r.Handle(v1+"/sessions/{session_id}/permissions/{permission_id}/reply", e.Guard(write, d.replyPermission)).Methods(http.MethodPost)
	r.Handle(v1+"/sessions/{session_id}/questions/{question_id}/reply", e.Guard(write, d.replyQuestion)).Methods(http.MethodPost)
	r.Handle(v1+"/sessions/{session_id}/questions/{question_id}/reject", e.Guard(write, d.rejectQuestion)).Methods(http.MethodPost)
	r.Handle(v1+"/sessions/{session_id}/terminate", e.Guard(write, d.terminate)).Methods(http.MethodPost)
}

// getDocument is GET /sandbox-agent/openapi.json: the API's document.
func (d *Door) getDocument(w http.ResponseWriter, _ *http.Request) error {
	w.Header().Set("Content-Type", "application/json")
	_, err := w.Write(document)
	return err
}

// getHealth is GET /v1/health. The edge answers for the server's health
// (/healthz, /readyz); this says the API is served.
func (d *Door) getHealth(w http.ResponseWriter, _ *http.Request) error {
	return httpapi.WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}
