package anthropic

import (
	"cmp"

	"github.com/aapd/aapd/agents"
)

var _ agents.ModelDescriber = (*Model)(nil)

// Provider is "anthropic".
func (m *Model) Provider() string { return "anthropic" }

// ModelID is the model a request goes to: its own, else the default.
func (m *Model) ModelID(req agents.ModelRequest) string { return cmp.Or(req.Model, m.cfg.DefaultModel) }
