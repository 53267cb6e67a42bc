package openai

import (
	"cmp"

	"github.com/aapd/aapd/agents"
)

var (
	_ agents.ModelDescriber = (*Model)(nil)
	_ agents.ToolForcer     = (*Model)(nil)
)

// Provider is "openai" for every OpenAI-compatible server: the API spoken,
// which is what traces group by.
func (m *Model) Provider() string { return "openai" }

// ModelID is the model a request goes to: its own, else the default.
func (m *Model) ModelID(req agents.ModelRequest) string { return cmp.Or(req.Model, m.cfg.DefaultModel) }

// ForcesToolCalls is true: a forced call is sent as chat completions'
// tool_choice. A compatible server that ignores tool_choice (Ollama does)
// leaves the call to its model.
func (m *Model) ForcesToolCalls() bool { return true }
