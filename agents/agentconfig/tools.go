package agentconfig

import (
	"context"
	"fmt"
	"slices"

	"github.com/aapd/aapd/agents"
	"github.com/aapd/aapd/agents/mcp"
)

// tools builds an agent's server tools: the built-in ones it names, then
// the tools of its MCP servers, which are started (or reached) now.
func (b *builder) tools(ctx context.Context, field string, t ToolsSpec, a *agents.Agent) error {
	for i, name := range t.Builtin {
		mk, ok := builtins[name]
		if !ok {
			known := make([]string, 0, len(builtins))
			for k := range builtins {
				known = append(known, k)
			}
			slices.Sort(known)
			return b.fail(fmt.Sprintf("%s.builtin[%d]", field, i), "unknown built-in tool %q (there are %q)", name, known)
		}
		a.Tools = append(a.Tools, mk())
	}
	for i, s := range t.MCP {
		f := fmt.Sprintf("%s.mcp[%d]", field, i)
		cfg, err := b.mcpConfig(f, s)
		if err != nil {
			return err
		}
		srv, err := mcp.Connect(ctx, cfg)
		if err != nil {
			return b.fail(f, "%v", err)
		}
		b.loaded.closers = append(b.loaded.closers, srv.Close)
		a.Tools = append(a.Tools, srv.Tools()...)
	}
	seen := map[string]bool{}
	for _, tl := range a.Tools {
		name := tl.Spec().Name
		if seen[name] {
			return b.fail(field, "two server tools are named %q (give an MCP server a tool_prefix)", name)
		}
		seen[name] = true
	}
	return nil
}

func (b *builder) mcpConfig(field string, s MCPSpec) (mcp.ServerConfig, error) {
	if s.Name == "" {
		return mcp.ServerConfig{}, b.fail(field+".name", "required")
	}
	if (len(s.Command) == 0) == (s.URL == "") {
		return mcp.ServerConfig{}, b.fail(field, "set exactly one of command (a stdio server) and url (a streamable HTTP server)")
	}
	cfg := mcp.ServerConfig{Name: s.Name, ToolPrefix: s.ToolPrefix, Include: s.Include, Timeout: s.Timeout}
	var err error
	for j, arg := range s.Command {
		v, err := b.expand(fmt.Sprintf("%s.command[%d]", field, j), arg)
		if err != nil {
			return cfg, err
		}
		cfg.Command = append(cfg.Command, v)
	}
	if cfg.URL, err = b.expand(field+".url", s.URL); err != nil {
		return cfg, err
	}
	if cfg.Env, err = b.expandMap(field+".env", s.Env); err != nil {
		return cfg, err
	}
	if cfg.Headers, err = b.expandMap(field+".headers", s.Headers); err != nil {
		return cfg, err
	}
	return cfg, nil
}
