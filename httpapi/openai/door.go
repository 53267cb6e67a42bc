// Package openai serves OpenAI's Responses and Conversations APIs under
// /openai/v1, so that an application written against the official OpenAI
// SDKs (openai-go, the openai npm package, @openai/agents) runs on aapd's
// agents by changing its base URL: durable, tenant-isolated conversations
// backed by the one turn pipeline.
//
// It is a translator and nothing more. A conversation is an aapd session
// (its id is the session's id, so a conversation is one over AAP v3 too);
// a response is a turn (its id names the session and the turn); a
// request's model is an aapd agent; the client's function tools are AAP
// client tools, and aapd's own server tools show as mcp_call items. The
// items of a conversation are its full history, translated (items.go).
// Credentials, scopes and rate limits are the edge's (httpapi.Edge);
// errors are OpenAI's error object (errors.go). docs/protocols.md
// describes the door for its users.
package openai

import (
	"net/http"

	"github.com/gorilla/mux"

	"github.com/aapd/aapd/agents"
	"github.com/aapd/aapd/auth"
	"github.com/aapd/aapd/httpapi"
	"github.com/aapd/aapd/store"
)

// Prefix is where the APIs are served: clients use
// baseURL = http://host:port/openai/v1.
const Prefix = "/openai/v1"

// Config configures a Door.
type Config struct {
	Store  *store.Store
	Agents *agents.Registry
	Runner *agents.Runner
}

// Door is the OpenAI front door.
type Door struct {
	cfg  Config
	edge httpapi.Edge
}

// New returns the door; it serves once mounted (httpapi.Config.Doors).
func New(cfg Config) *Door { return &Door{cfg: cfg} }

// Mount registers the routes under Prefix, answered with OpenAI's error
// object. Reading needs sessions:read, anything that changes a
// conversation or runs a turn sessions:write.
func (d *Door) Mount(r *mux.Router, e httpapi.Edge) {
	e = e.WithProblems(writeError)
	d.edge = e
	const read, write = auth.ScopeSessionsRead, auth.ScopeSessionsWrite
	r.Handle(Prefix+"/conversations", e.Guard(write, d.createConversation)).Methods(http.MethodPost)
	r.Handle(Prefix+"/conversations/{conversation_id}", e.Guard(read, d.getConversation)).Methods(http.MethodGet)
	r.Handle(Prefix+"/conversations/{conversation_id}", e.Guard(write, d.updateConversation)).Methods(http.MethodPost)
	r.Handle(Prefix+"/conversations/{conversation_id}", e.Guard(write, d.deleteConversation)).Methods(http.MethodDelete)
	r.Handle(Prefix+"/conversations/{conversation_id}/items", e.Guard(read, d.listItems)).Methods(http.MethodGet)
	r.Handle(Prefix+"/conversations/{conversation_id}/items", e.Guard(write, d.createItems)).Methods(http.MethodPost)
	r.Handle(Prefix+"/conversations/{conversation_id}/items/{item_id}", e.Guard(read, d.getItem)).Methods(http.MethodGet)
	r.Handle(Prefix+"/conversations/{conversation_id}/items/{item_id}", e.Guard(write, d.deleteItem)).Methods(http.MethodDelete)
	r.Handle(Prefix+"/responses", e.Guard(write, d.createResponse)).Methods(http.MethodPost)
	r.Handle(Prefix+"/responses/{response_id}", e.Guard(read, d.getResponse)).Methods(http.MethodGet)
	r.Handle(Prefix+"/responses/{response_id}", e.Guard(write, d.deleteResponse)).Methods(http.MethodDelete)
	r.Handle(Prefix+"/responses/{response_id}/cancel", e.Guard(write, d.cancelResponse)).Methods(http.MethodPost)
	r.Handle(Prefix+"/responses/{response_id}/input_items", e.Guard(read, d.listInputItems)).Methods(http.MethodGet)
}
