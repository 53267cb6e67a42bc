package openai

import (
	"cmp"

	"github.com/aapd/aapd/agents"
)

var _ agents.ModelDescriber = (*Model)(nil)

// Provider is "openai" for every OpenAI-compatible server: the API spoken,
// which is what traces group by.
func (m *Model) Provider() string { return "openai" }

// ModelID is the model a request goes to: its own, else the default.
func (m *Model) ModelID(req agents.ModelRequest) string { return cmp.Or(req.Model, m.cfg.DefaultModel) }
