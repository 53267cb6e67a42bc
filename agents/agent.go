// Package agents runs AAP turns: the agent loop over a Model, server-side
// tools with AAP's trust and permission flow, and the worker pool (Runner)
// that runs each turn off the request that started it, durably, one turn at a
// time per session across every aapd process.
package agents

import (
	"fmt"
	"maps"
	"strings"

	"github.com/aapd/aapd/aap"
)

// DefaultMaxSteps bounds the model calls of one turn when an agent sets none.
const DefaultMaxSteps = 25

// Agent is an agent sessions can use: what it declares in GET /meta and what
// runs it.
type Agent struct {
	// Info is what GET /meta shows. Info.Tools is filled from Tools by
	// NewRegistry.
	Info aap.AgentInfo
	// System is the system prompt put before every conversation.
	System string
	// Model generates the agent's messages.
	Model Model
	// Provider names the model's provider (openai, anthropic, echo) in
	// metrics labels; empty is labelled "other".
	Provider string
	// ModelName is the provider model id the agent runs unless a session's
	// ModelOption picks another: metrics label model calls with it.
	ModelName string
	// Tools are the server-side tools clients can enable.
	Tools []Tool
	// MaxSteps bounds the model calls of one turn (DefaultMaxSteps if 0).
	MaxSteps int
	// ModelOption names the option whose value is the provider model id
	// (ModelRequest.Model); empty if the agent has none.
	ModelOption string
	// Compaction keeps the compacted history bounded; nil keeps it equal to
	// the full history.
	Compaction *Compaction
}

// SystemFor returns the system prompt for a session: each {{name}} of a
// text or select option replaced by the session's value of it, so that an
// option such as a response language takes effect. Secrets never reach a
// prompt.
func (a *Agent) SystemFor(opts map[string]string) string {
	if !strings.Contains(a.System, "{{") {
		return a.System
	}
	out := a.System
	for _, o := range a.Info.Options {
		if o.Type != aap.OptionSecret {
			out = strings.ReplaceAll(out, "{{"+o.Name+"}}", opts[o.Name])
		}
	}
	return out
}

// HasTool reports whether the agent has a server tool of that name.
func (a *Agent) HasTool(name string) bool { return a.tool(name) != nil }

// tool returns the server tool with the given name.
func (a *Agent) tool(name string) Tool {
	for _, t := range a.Tools {
		if t.Spec().Name == name {
			return t
		}
	}
	return nil
}

func (a *Agent) maxSteps() int {
	if a.MaxSteps > 0 {
		return a.MaxSteps
	}
	return DefaultMaxSteps
}

// ResolveOptions returns the option values a session runs with: its own
// values over the agent's defaults.
func (a *Agent) ResolveOptions(set map[string]string) map[string]string {
	out := make(map[string]string, len(a.Info.Options))
	for _, o := range a.Info.Options {
		out[o.Name] = o.Default
	}
	maps.Copy(out, set)
	return out
}

// SplitOptions separates secret option values (stored encrypted, never
// returned) from the others.
func (a *Agent) SplitOptions(opts map[string]string) (plain, secret map[string]string) {
	for k, v := range opts {
		if o, ok := a.Info.Option(k); ok && o.Type == aap.OptionSecret {
			if secret == nil {
				secret = map[string]string{}
			}
			secret[k] = v
			continue
		}
		if plain == nil {
			plain = map[string]string{}
		}
		plain[k] = v
	}
	return plain, secret
}

// Registry is the set of agents a server offers.
type Registry struct {
	list   []*Agent
	byName map[string]*Agent
}

// NewRegistry checks the agents and indexes them by name: names must be
// unique, tool names valid and unique per agent, and select options must
// list their default.
func NewRegistry(agents ...*Agent) (*Registry, error) {
	r := &Registry{byName: map[string]*Agent{}}
	for _, a := range agents {
		name := a.Info.Name
		if name == "" {
			return nil, fmt.Errorf("agent without a name")
		}
		if _, dup := r.byName[name]; dup {
			return nil, fmt.Errorf("agent %q is declared twice", name)
		}
		if a.Model == nil {
			return nil, fmt.Errorf("agent %q has no model", name)
		}
		a.Info.Tools = nil
		seen := map[string]bool{}
		for _, t := range a.Tools {
			spec := t.Spec()
			if !aap.ValidToolName(spec.Name) {
				return nil, fmt.Errorf("agent %q: tool name %q is not valid (1 to 64 letters, digits, '_' or '-')", name, spec.Name)
			}
			if seen[spec.Name] {
				return nil, fmt.Errorf("agent %q: tool %q is declared twice", name, spec.Name)
			}
			seen[spec.Name] = true
			a.Info.Tools = append(a.Info.Tools, spec)
		}
		for _, o := range a.Info.Options {
			if o.Type == aap.OptionSelect && !contains(o.Options, o.Default) {
				return nil, fmt.Errorf("agent %q: option %q: default %q is not one of its options", name, o.Name, o.Default)
			}
		}
		r.list = append(r.list, a)
		r.byName[name] = a
	}
	return r, nil
}

// Get returns the agent with the given name.
func (r *Registry) Get(name string) (*Agent, bool) {
	a, ok := r.byName[name]
	return a, ok
}

// Meta is the body of GET /meta.
func (r *Registry) Meta() aap.Meta {
	m := aap.Meta{Version: aap.Version, Agents: make([]aap.AgentInfo, len(r.list))}
	for i, a := range r.list {
		m.Agents[i] = a.Info
	}
	return m
}

// Names lists the agents' names in order.
func (r *Registry) Names() []string {
	names := make([]string, len(r.list))
	for i, a := range r.list {
		names[i] = a.Info.Name
	}
	return names
}

func contains(list []string, v string) bool {
	for _, s := range list {
		if s == v {
			return true
		}
	}
	return false
}
