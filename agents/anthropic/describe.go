package anthropic

import (
	"cmp"

	"github.com/aapd/aapd/agents"
)

var (
	_ agents.ModelDescriber = (*Model)(nil)
	_ agents.ToolForcer     = (*Model)(nil)
)

// Provider is "anthropic".
func (m *Model) Provider() string { return "anthropic" }

// ModelID is the model a request goes to: its own, else the default.
func (m *Model) ModelID(req agents.ModelRequest) string { return cmp.Or(req.Model, m.cfg.DefaultModel) }

// ForcesToolCalls is true unless the model thinks: the Messages API takes
// tool_choice "any" or "tool" only without extended thinking (with it,
// only "auto" and "none").
func (m *Model) ForcesToolCalls() bool { return m.cfg.ThinkingBudget == 0 && !m.cfg.AdaptiveThinking }
