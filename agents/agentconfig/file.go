// Package agentconfig reads the agents a deployment offers from its
// configuration file (docs/agents.md; aapd serve --config) and builds them:
// their models, options, server tools (built-in and MCP) and compaction.
//
// A file that cannot work is refused whole, with one line naming the file,
// the field and the problem, so that a server never starts half-configured.
package agentconfig

import (
	"time"
)

// File is the configuration file.
type File struct {
	Agents []AgentSpec `yaml:"agents"`
}

// AgentSpec declares one agent.
type AgentSpec struct {
	Name        string `yaml:"name"`
	Title       string `yaml:"title"`
	Version     string `yaml:"version"`
	Description string `yaml:"description"`
	// SystemPrompt is put before every conversation; {{option}} is replaced
	// by the session's value of that option.
	SystemPrompt string          `yaml:"system_prompt"`
	Model        ModelSpec       `yaml:"model"`
	Options      []OptionSpec    `yaml:"options"`
	Tools        ToolsSpec       `yaml:"tools"`
	Capabilities CapabilitySpec  `yaml:"capabilities"`
	MaxSteps     int             `yaml:"max_steps"`
	Compaction   *CompactionSpec `yaml:"compaction"`
}

// ModelSpec says which model runs an agent and how to reach it.
type ModelSpec struct {
	// Provider is openai (and every OpenAI-compatible server), anthropic or
	// echo.
	Provider string `yaml:"provider"`
	BaseURL  string `yaml:"base_url"`
	APIKey   string `yaml:"api_key"`
	// APIKeyOption names a secret option through which a session may bring
	// its own provider key; it is declared for the agent if not listed.
	APIKeyOption string `yaml:"api_key_option"`
	// Models are offered to clients as the "model" select option.
	Models       []string `yaml:"models"`
	DefaultModel string   `yaml:"default_model"`
	// Generation settings.
	Temperature      *float64 `yaml:"temperature"`
	MaxOutputTokens  int64    `yaml:"max_output_tokens"`
	ThinkingBudget   int64    `yaml:"thinking_budget"`
	AdaptiveThinking bool     `yaml:"adaptive_thinking"`
	// Failure handling.
	Timeout    time.Duration     `yaml:"timeout"`
	MaxRetries *int              `yaml:"max_retries"`
	Headers    map[string]string `yaml:"headers"`
}

// OptionSpec declares an option clients may set per session.
type OptionSpec struct {
	Name        string   `yaml:"name"`
	Type        string   `yaml:"type"`
	Title       string   `yaml:"title"`
	Description string   `yaml:"description"`
	Options     []string `yaml:"options"`
	Default     string   `yaml:"default"`
}

// ToolsSpec lists an agent's server tools.
type ToolsSpec struct {
	// Builtin names built-in tools: clock, calculator.
	Builtin []string  `yaml:"builtin"`
	MCP     []MCPSpec `yaml:"mcp"`
}

// MCPSpec is an MCP server whose tools become the agent's server tools.
type MCPSpec struct {
	Name string `yaml:"name"`
	// Command starts a stdio server; URL reaches a streamable HTTP one.
	Command    []string          `yaml:"command"`
	Env        map[string]string `yaml:"env"`
	URL        string            `yaml:"url"`
	Headers    map[string]string `yaml:"headers"`
	ToolPrefix string            `yaml:"tool_prefix"`
	Include    []string          `yaml:"include"`
	Timeout    time.Duration     `yaml:"timeout"`
}

// CapabilitySpec turns off what an agent would otherwise declare (and
// allow): by default an agent accepts images of both kinds and client
// tools, streams in the three modes and serves both histories. What is
// off is absent from GET /meta and refused in requests.
type CapabilitySpec struct {
	ImageHTTP   *bool `yaml:"image_http"`
	ImageData   *bool `yaml:"image_data"`
	ClientTools *bool `yaml:"client_tools"`
	// Stream modes; at least one stays on.
	StreamDelta   *bool `yaml:"stream_delta"`
	StreamMessage *bool `yaml:"stream_message"`
	StreamNone    *bool `yaml:"stream_none"`
	// Histories GET /sessions/:id/history serves (the specification lets
	// an agent keep its compacted history private).
	HistoryFull      *bool `yaml:"history_full"`
	HistoryCompacted *bool `yaml:"history_compacted"`
}

// CompactionSpec is an agent's compaction policy (docs/compaction.md).
type CompactionSpec struct {
	Strategy         string `yaml:"strategy"`
	ThresholdTokens  int    `yaml:"threshold_tokens"`
	TargetTokens     int    `yaml:"target_tokens"`
	KeepLast         int    `yaml:"keep_last"`
	PruneMinChars    int    `yaml:"prune_min_chars"`
	SummaryMaxTokens int    `yaml:"summary_max_tokens"`
}
