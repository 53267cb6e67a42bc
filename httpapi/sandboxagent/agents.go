package sandboxagent

import (
	"net/http"
	"strings"

	"github.com/gorilla/mux"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/agents"
	"github.com/aapd/aapd/httpapi"
)

// The agents are aapd's (GET /meta): configured by the operator, not
// installed, so each is installed, and installing one is a no-op.

// agentInfo is an AgentInfo of the API.
type agentInfo struct {
	ID                   string       `json:"id"`
	Installed            bool         `json:"installed"`
	CredentialsAvailable bool         `json:"credentialsAvailable"`
	Version              string       `json:"version,omitempty"`
	Capabilities         capabilities `json:"capabilities"`
}

// capabilities is an AgentCapabilities: what the door's events carry for
// the agent.
type capabilities struct {
	PlanMode         bool `json:"planMode"`
	Permissions      bool `json:"permissions"`
	Questions        bool `json:"questions"`
	ToolCalls        bool `json:"toolCalls"`
	ToolResults      bool `json:"toolResults"`
	TextMessages     bool `json:"textMessages"`
	Images           bool `json:"images"`
	FileAttachments  bool `json:"fileAttachments"`
	SessionLifecycle bool `json:"sessionLifecycle"`
	ErrorEvents      bool `json:"errorEvents"`
	Reasoning        bool `json:"reasoning"`
	Status           bool `json:"status"`
	CommandExecution bool `json:"commandExecution"`
	FileChanges      bool `json:"fileChanges"`
	McpTools         bool `json:"mcpTools"`
	StreamingDeltas  bool `json:"streamingDeltas"`
	ItemStarted      bool `json:"itemStarted"`
	Variants         bool `json:"variants"`
	SharedProcess    bool `json:"sharedProcess"`
}

func describe(a *agents.Agent) agentInfo {
	info := a.Info
	return agentInfo{
		ID: info.Name, Installed: true, CredentialsAvailable: true, Version: info.Version,
		Capabilities: capabilities{
			Permissions: len(a.Tools) > 0, Questions: info.AcceptsClientTools(),
			ToolCalls: true, ToolResults: true, TextMessages: true,
			Images:           info.Capabilities != nil && info.Capabilities.Image != nil,
			SessionLifecycle: true, ErrorEvents: true, Reasoning: true, Status: true,
			StreamingDeltas: info.SupportsStream(aap.StreamDelta), ItemStarted: true,
		},
	}
}

// agent returns the agent the route names: an unknown one is a 400
// unsupported_agent, as the seed has it for modes and models.
func (d *Door) agent(r *http.Request) (*agents.Agent, error) {
	name := mux.Vars(r)["agent"]
	a, ok := d.cfg.Agents.Get(name)
	if !ok {
		return nil, problem(http.StatusBadRequest, slugUnsupportedAgent, "unknown agent %q: this server runs %s", name, strings.Join(d.cfg.Agents.Names(), ", "))
	}
	return a, nil
}

// listAgents is GET /v1/agents: the agents of GET /meta.
func (d *Door) listAgents(w http.ResponseWriter, _ *http.Request) error {
	out := struct {
		Agents []agentInfo `json:"agents"`
	}{Agents: []agentInfo{}}
	for _, name := range d.cfg.Agents.Names() {
		a, _ := d.cfg.Agents.Get(name)
		out.Agents = append(out.Agents, describe(a))
	}
	return writeJSON(w, out)
}

// installAgent is POST /v1/agents/{agent}/install: 204 for an agent the
// operator configured (there is nothing to install), 404
// agent_not_installed for any other (aapd installs nothing).
func (d *Door) installAgent(w http.ResponseWriter, r *http.Request) error {
	if _, err := d.edge.ReadBody(w, r); err != nil {
		return err
	}
	name := mux.Vars(r)["agent"]
	if _, ok := d.cfg.Agents.Get(name); !ok {
		return problem(http.StatusNotFound, slugNotInstalled, "agent %q is not configured on this server, and aapd installs no agent: the operator configures them (docs/agents.md)", name)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// defaultMode is the one mode of every agent: aapd's agents have none.
var defaultMode = map[string]string{"id": "default", "name": "Default", "description": "The agent as its operator configured it"}

// getModes is GET /v1/agents/{agent}/modes.
func (d *Door) getModes(w http.ResponseWriter, r *http.Request) error {
	if _, err := d.agent(r); err != nil {
		return err
	}
	return writeJSON(w, map[string]any{"modes": []any{defaultMode}})
}

// modelInfo is an AgentModelInfo.
type modelInfo struct {
	ID string `json:"id"`
}

// getModels is GET /v1/agents/{agent}/models: the models the agent's
// configuration lets a session choose (modelsOf).
func (d *Door) getModels(w http.ResponseWriter, r *http.Request) error {
	a, err := d.agent(r)
	if err != nil {
		return err
	}
	models, def := modelsOf(a)
	out := struct {
		DefaultModel string      `json:"defaultModel,omitempty"`
		Models       []modelInfo `json:"models"`
	}{DefaultModel: def, Models: []modelInfo{}}
	for _, m := range models {
		out.Models = append(out.Models, modelInfo{ID: m})
	}
	return writeJSON(w, out)
}

// modelsOf returns the models a session of the agent may run and the
// default: the choices of its model option (agents.Agent.ModelOption) when
// it is a select, else the model it runs (and, for a text option, any
// other a session sets).
func modelsOf(a *agents.Agent) (models []string, def string) {
	def = a.ModelName
	if o, ok := a.Info.Option(a.ModelOption); ok && a.ModelOption != "" {
		if o.Default != "" {
			def = o.Default
		}
		if o.Type == aap.OptionSelect {
			return o.Options, def
		}
	}
	if def == "" {
		return nil, ""
	}
	return []string{def}, def
}

// writeJSON answers 200 with v.
func writeJSON(w http.ResponseWriter, v any) error { return httpapi.WriteJSON(w, http.StatusOK, v) }
