package main

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// An MCP server (stdio, built here) gives an agent its tools, end to end:
// listed in /meta, called inline when trusted, after permission otherwise.
func TestMCPServerToolsEndToEnd(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "mcpserver")
	if out, err := runTool(t.Context(), buildTimeout, commandSpec{}, "go", "build", "-o", bin, "../../agents/mcp/testdata/mcpserver"); err != nil {
		t.Fatalf("build the MCP test server: %v\n%s", err, out)
	}
	cfg := filepath.Join(dir, "agents.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`agents:
  - name: tooled
    model: {provider: echo}
    tools:
      mcp:
        - name: test
          command: [%s]
          tool_prefix: m_
          include: [add, fail]
`, bin)), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, func(c *Config) { c.AgentsFile = cfg })
	c := s.newTenant(t)
	meta := c.meta()
	var names []string
	for _, tl := range meta.Agents[0].Tools {
		names = append(names, tl.Name)
	}
	if !reflect.DeepEqual(names, []string{"m_add", "m_fail"}) {
		t.Fatalf("/meta tools = %v", names)
	}

	sid := c.createSession(map[string]any{"agent": map[string]any{"name": "tooled",
		"tools": []any{map[string]any{"name": "m_add", "trust": true}, map[string]any{"name": "m_fail"}}}})
	_, events := c.streamTurn(sid, streamUser("message", `/tool m_add {"a":40,"b":2}`))
	if got := types(events); !reflect.DeepEqual(got, []string{"turn_start", "tool_call", "tool_result", "text", "turn_stop"}) {
		t.Fatalf("events = %v", got)
	}
	if r := events[2]; r.Content.PlainText() != "42" {
		t.Errorf("tool_result = %+v", r)
	}
	// The untrusted one asks first; its failure reaches the model as an error.
	id := toolCalls(c.say(sid, "/tool m_fail {}").Messages)[0].ToolCallID
	resp := c.turn(sid, map[string]any{"messages": []any{map[string]any{"role": "tool_permission", "toolCallId": id, "granted": true}}})
	if resp.Messages[0].Content.PlainText() != "Error: it failed" {
		t.Errorf("after permission: %+v", resp.Messages)
	}
}
