package agentconfig

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/agents"
	"github.com/aapd/aapd/agents/anthropic"
	"github.com/aapd/aapd/agents/echo"
	"github.com/aapd/aapd/agents/openai"
	"github.com/aapd/aapd/agents/tools"
	"github.com/aapd/aapd/compaction"
)

// Loaded is what a configuration file built.
type Loaded struct {
	Agents []*agents.Agent
	// closers stop what the agents started (MCP servers).
	closers []func() error
}

// Close stops everything the agents started.
func (l *Loaded) Close() error {
	var errs []error
	for _, c := range l.closers {
		errs = append(errs, c())
	}
	return errors.Join(errs...)
}

// Error is a configuration problem: the file, the field (a YAML path such
// as agents[0].model.provider, or a line) and what is wrong, on one line.
type Error struct {
	File  string
	Field string
	Msg   string
}

func (e *Error) Error() string {
	if e.Field == "" {
		return e.File + ": " + e.Msg
	}
	return e.File + ": " + e.Field + ": " + e.Msg
}

// Env looks up an environment variable for ${VAR} references.
type Env func(name string) (string, bool)

// Load reads a configuration file and builds its agents, starting their MCP
// servers. lookup resolves ${VAR} references (os.LookupEnv if nil).
func Load(ctx context.Context, path string, lookup Env) (*Loaded, error) {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	name := filepath.Base(path)
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, &Error{File: path, Msg: fmt.Sprintf("cannot read: %v", errors.Unwrap(err))}
	}
	var f File
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		return nil, &Error{File: name, Msg: yamlMessage(err)}
	}
	if len(f.Agents) == 0 {
		return nil, &Error{File: name, Field: "agents", Msg: "no agents are declared"}
	}
	b := &builder{file: name, env: lookup, loaded: &Loaded{}}
	seen := map[string]bool{}
	for i, spec := range f.Agents {
		field := fmt.Sprintf("agents[%d]", i)
		if seen[spec.Name] {
			return nil, b.fail(field+".name", "agent %q is declared twice", spec.Name)
		}
		seen[spec.Name] = true
		a, err := b.agent(ctx, field, spec)
		if err != nil {
			_ = b.loaded.Close()
			return nil, err
		}
		b.loaded.Agents = append(b.loaded.Agents, a)
	}
	if _, err := agents.NewRegistry(b.loaded.Agents...); err != nil {
		_ = b.loaded.Close()
		return nil, &Error{File: name, Msg: err.Error()}
	}
	return b.loaded, nil
}

// yamlMessage turns a YAML error into one line.
func yamlMessage(err error) string {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	msg = strings.TrimPrefix(msg, "unmarshal errors:\n")
	lines := strings.Split(msg, "\n")
	for i, l := range lines {
		l = strings.TrimSpace(l)
		if m := unknownField.FindStringSubmatch(l); m != nil {
			l = fmt.Sprintf("%s: unknown field %q", m[1], m[2])
		}
		lines[i] = l
	}
	return strings.Join(lines, "; ")
}

var unknownField = regexp.MustCompile(`^(line \d+): field (\S+) not found in type \S+$`)

type builder struct {
	file   string
	env    Env
	loaded *Loaded
}

func (b *builder) fail(field, format string, args ...any) error {
	return &Error{File: b.file, Field: field, Msg: fmt.Sprintf(format, args...)}
}

// expand resolves ${VAR} references; an unset variable is an error, so a
// missing credential is found at start, not at the first turn.
func (b *builder) expand(field, s string) (string, error) {
	var missing []string
	out := envRef.ReplaceAllStringFunc(s, func(ref string) string {
		name := ref[2 : len(ref)-1]
		v, ok := b.env(name)
		if !ok {
			missing = append(missing, name)
		}
		return v
	})
	if len(missing) > 0 {
		return "", b.fail(field, "environment variable %s is not set", missing[0])
	}
	return out, nil
}

var envRef = regexp.MustCompile(`\$\{[A-Za-z_][A-Za-z0-9_]*\}`)

func (b *builder) expandMap(field string, m map[string]string) (map[string]string, error) {
	out := make(map[string]string, len(m))
	for k, v := range m {
		var err error
		if out[k], err = b.expand(field+"."+k, v); err != nil {
			return nil, err
		}
	}
	return out, nil
}

var agentName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

func (b *builder) agent(ctx context.Context, field string, s AgentSpec) (*agents.Agent, error) {
	if !agentName.MatchString(s.Name) {
		return nil, b.fail(field+".name", "%q is not a valid agent name (letters, digits, '.', '_' or '-', up to 64)", s.Name)
	}
	if s.Version == "" {
		s.Version = "1.0.0"
	}
	if s.MaxSteps < 0 {
		return nil, b.fail(field+".max_steps", "must not be negative")
	}
	a := &agents.Agent{
		Info:   aap.AgentInfo{Name: s.Name, Title: s.Title, Version: s.Version, Description: s.Description},
		System: s.SystemPrompt, MaxSteps: s.MaxSteps,
	}
	var err error
	if err = b.model(field+".model", s.Model, a); err != nil {
		return nil, err
	}
	if err = b.options(field+".options", s.Options, s.Model, a); err != nil {
		return nil, err
	}
	if err = b.tools(ctx, field+".tools", s.Tools, a); err != nil {
		return nil, err
	}
	if a.Compaction, err = b.compaction(field+".compaction", s.Compaction, s.Model.Provider); err != nil {
		return nil, err
	}
	a.Info.Capabilities = capabilities(s.Capabilities)
	if a.Info.Capabilities.Stream == nil {
		return nil, b.fail(field+".capabilities", "stream_delta, stream_message and stream_none are all off: a client could send no turn")
	}
	return a, nil
}

// capabilities are what every agent aapd runs can do — images of both
// kinds, client tools, all stream modes, both histories — less what the
// file turns off (some local models take no images; an agent may keep its
// compacted history private).
func capabilities(c CapabilitySpec) *aap.Capabilities {
	e := &aap.Empty{}
	on := func(v *bool) *aap.Empty {
		if v != nil && !*v {
			return nil
		}
		return e
	}
	caps := &aap.Capabilities{}
	if h := (aap.HistoryCapabilities{Compacted: on(c.HistoryCompacted), Full: on(c.HistoryFull)}); h != (aap.HistoryCapabilities{}) {
		caps.History = &h
	}
	if s := (aap.StreamCapabilities{Delta: on(c.StreamDelta), Message: on(c.StreamMessage), None: on(c.StreamNone)}); s != (aap.StreamCapabilities{}) {
		caps.Stream = &s
	}
	if t := on(c.ClientTools); t != nil {
		caps.Application = &aap.ApplicationCapabilities{Tools: t}
	}
	if h, d := on(c.ImageHTTP), on(c.ImageData); h != nil || d != nil {
		caps.Image = &aap.ImageCapabilities{HTTP: h, Data: d}
	}
	return caps
}

func (b *builder) model(field string, m ModelSpec, a *agents.Agent) error {
	if m.Temperature != nil && (*m.Temperature < 0 || *m.Temperature > 2) {
		return b.fail(field+".temperature", "must be between 0 and 2")
	}
	if m.MaxOutputTokens < 0 || m.ThinkingBudget < 0 || m.Timeout < 0 || (m.MaxRetries != nil && *m.MaxRetries < 0) {
		return b.fail(field, "max_output_tokens, thinking_budget, timeout and max_retries must not be negative")
	}
	if len(m.Models) > 0 {
		a.ModelOption = "model"
	}
	apiKey, err := b.expand(field+".api_key", m.APIKey)
	if err != nil {
		return err
	}
	baseURL, err := b.expand(field+".base_url", m.BaseURL)
	if err != nil {
		return err
	}
	headers, err := b.expandMap(field+".headers", m.Headers)
	if err != nil {
		return err
	}
	retries := 2
	if m.MaxRetries != nil {
		retries = *m.MaxRetries
	}
	defaultModel := m.DefaultModel
	if defaultModel == "" && len(m.Models) > 0 {
		defaultModel = m.Models[0]
	}
	a.Provider, a.ModelName = m.Provider, defaultModel
	switch m.Provider {
	case "echo":
		a.Model = echo.Model{}
		if a.ModelName == "" {
			a.ModelName = "echo"
		}
		return nil
	case "openai":
		a.Model, err = openai.New(openai.Config{
			BaseURL: baseURL, APIKey: apiKey, APIKeyOption: m.APIKeyOption, DefaultModel: defaultModel,
			Temperature: m.Temperature, MaxTokens: m.MaxOutputTokens, Headers: headers,
			Timeout: m.Timeout, MaxRetries: retries,
		})
	case "anthropic":
		if len(headers) > 0 {
			return b.fail(field+".headers", "not supported by the anthropic provider")
		}
		a.Model, err = anthropic.New(anthropic.Config{
			BaseURL: baseURL, APIKey: apiKey, APIKeyOption: m.APIKeyOption, DefaultModel: defaultModel,
			Temperature: m.Temperature, MaxTokens: m.MaxOutputTokens, ThinkingBudget: m.ThinkingBudget,
			AdaptiveThinking: m.AdaptiveThinking, Timeout: m.Timeout, MaxRetries: retries,
		})
	case "":
		return b.fail(field+".provider", "required: openai, anthropic or echo")
	default:
		return b.fail(field+".provider", "must be openai, anthropic or echo, not %q", m.Provider)
	}
	if err != nil {
		return b.fail(field, "%v", err)
	}
	if defaultModel == "" {
		return b.fail(field+".models", "list at least one model (or set default_model)")
	}
	return nil
}

func (b *builder) options(field string, specs []OptionSpec, m ModelSpec, a *agents.Agent) error {
	if len(m.Models) > 0 {
		def := m.DefaultModel
		if def == "" {
			def = m.Models[0]
		}
		a.Info.Options = append(a.Info.Options, aap.AgentOption{
			Type: aap.OptionSelect, Name: "model", Title: "Model", Description: "The model that answers.",
			Options: m.Models, Default: def,
		})
	}
	for i, o := range specs {
		f := fmt.Sprintf("%s[%d]", field, i)
		if o.Name == "" {
			return b.fail(f+".name", "required")
		}
		if _, dup := a.Info.Option(o.Name); dup {
			return b.fail(f+".name", "option %q is declared twice (\"model\" comes from model.models)", o.Name)
		}
		switch o.Type {
		case aap.OptionText, aap.OptionSecret:
			if len(o.Options) > 0 {
				return b.fail(f+".options", "only a select option lists options")
			}
		case aap.OptionSelect:
			if len(o.Options) == 0 {
				return b.fail(f+".options", "a select option needs its list of options")
			}
			if o.Default == "" {
				o.Default = o.Options[0]
			}
		default:
			return b.fail(f+".type", "must be text, select or secret, not %q", o.Type)
		}
		a.Info.Options = append(a.Info.Options, aap.AgentOption{Type: o.Type, Name: o.Name, Title: o.Title,
			Description: o.Description, Options: o.Options, Default: o.Default})
	}
	if k := m.APIKeyOption; k != "" {
		o, ok := a.Info.Option(k)
		switch {
		case !ok:
			a.Info.Options = append(a.Info.Options, aap.AgentOption{Type: aap.OptionSecret, Name: k, Title: "API key",
				Description: "Your own provider API key, used instead of the server's. Stored encrypted, never shown again."})
		case o.Type != aap.OptionSecret:
			return b.fail(field, "option %q carries an API key (model.api_key_option): it must be of type secret", k)
		}
	}
	return nil
}

var builtins = map[string]func() agents.Tool{
	"clock":      func() agents.Tool { return tools.Clock(nil) },
	"calculator": func() agents.Tool { return tools.Calculator() },
}

func (b *builder) compaction(field string, c *CompactionSpec, provider string) (*agents.Compaction, error) {
	if c == nil {
		return nil, nil
	}
	p := compaction.Policy{
		Strategy: compaction.StrategyName(c.Strategy), Threshold: c.ThresholdTokens, Target: c.TargetTokens,
		KeepLast: c.KeepLast, PruneMinChars: c.PruneMinChars, SummaryMaxTokens: c.SummaryMaxTokens,
	}.WithDefaults()
	if err := p.Validate(); err != nil {
		return nil, b.fail(field, "%s", strings.ReplaceAll(err.Error(), "\n", "; "))
	}
	out := &agents.Compaction{Policy: p}
	if provider == "echo" {
		out.Summarizer = compaction.EchoSummarizer{}
	}
	return out, nil
}
