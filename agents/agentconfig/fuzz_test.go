package agentconfig_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/aapd/aapd/agents/agentconfig"
)

// FuzzAgentsFile feeds an operator's agents file to the loader. The
// property: no panic; a file is either refused with an *agentconfig.Error
// (one line naming the file, the field and the problem, which stops the
// server at start) or loaded into agents that each have a name. Files that
// declare MCP servers are skipped: loading one starts a process or dials a
// server, which a fuzzer must not do.
func FuzzAgentsFile(f *testing.F) {
	example, err := os.ReadFile("../../docs/agents.example.yaml")
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{
		string(example),
		"agents:\n  - name: echo\n    model:\n      provider: echo\n",
		"agents:\n  - name: a\n    model: {provider: openai, base_url: 'http://127.0.0.1:1/v1', models: [m1, m2], temperature: 3}\n",
		"agents:\n  - name: a\n    model: {provider: anthropic, api_key: '${KEY}'}\n    options: [{name: s, type: select, options: [x], default: y}]\n",
		"agents: []\n",
		"agents:\n  - name: a\n  - name: a\n",
		"- 1\n",
	} {
		f.Add([]byte(s))
	}
	env := func(name string) (string, bool) {
		if name == "KEY" || name == "OPENAI_API_KEY" || name == "ANTHROPIC_API_KEY" {
			return "sk-test", true
		}
		return "", false
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		var probe struct {
			Agents []struct {
				Tools struct {
					MCP []any `yaml:"mcp"`
				} `yaml:"tools"`
			} `yaml:"agents"`
		}
		if yaml.NewDecoder(bytes.NewReader(data)).Decode(&probe) == nil {
			for _, a := range probe.Agents {
				if len(a.Tools.MCP) > 0 {
					return
				}
			}
		}
		path := filepath.Join(dir, "agents.yaml")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		loaded, err := agentconfig.Load(context.Background(), path, env)
		if err != nil {
			var e *agentconfig.Error
			if !errors.As(err, &e) {
				t.Fatalf("refused with %T (%v), not one line naming the field", err, err)
			}
			return
		}
		defer loaded.Close()
		for _, a := range loaded.Agents {
			if a.Info.Name == "" {
				t.Fatalf("loaded an agent without a name")
			}
		}
	})
}
