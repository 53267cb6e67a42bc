package agentconfig_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/agents"
	"github.com/aapd/aapd/agents/agentconfig"
	"github.com/aapd/aapd/compaction"
)

var mcpServer string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "agentconfig-")
	if err != nil {
		panic(err)
	}
	mcpServer = filepath.Join(dir, "mcpserver")
	if out, err := exec.Command("go", "build", "-o", mcpServer, "../mcp/testdata/mcpserver").CombinedOutput(); err != nil {
		os.Stderr.Write(out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

var testEnv = agentconfig.Env(func(name string) (string, bool) {
	v, ok := map[string]string{"OPENAI_API_KEY": "sk-test", "ANTHROPIC_API_KEY": "ak-test", "TOKEN": "t0k"}[name]
	return v, ok
})

func write(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// The documented example is complete and loads (its MCP server swapped for
// the test server, which needs no network).
func TestExampleConfigLoads(t *testing.T) {
	example, err := os.ReadFile("../../docs/agents.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	text := regexp.MustCompile(`command: \[npx[^\]]*\]`).ReplaceAllString(string(example), "command: ["+mcpServer+"]")
	text = strings.Replace(text, "include: [read_file, list_directory]", "include: [add]", 1)
	loaded, err := agentconfig.Load(context.Background(), write(t, "agents.yaml", text), testEnv)
	if err != nil {
		t.Fatal(err)
	}
	defer loaded.Close()
	reg, err := agents.NewRegistry(loaded.Agents...)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(reg.Names(), ","); got != "assistant,researcher,echo" {
		t.Fatalf("agents = %s", got)
	}
	a, _ := reg.Get("assistant")
	var opts []string
	for _, o := range a.Info.Options {
		opts = append(opts, o.Name+":"+o.Type+":"+o.Default)
	}
	if got := strings.Join(opts, ","); got != "model:select:gpt-4.1,language:select:English,api_key:secret:" {
		t.Errorf("options = %s", got)
	}
	var tools []string
	for _, tl := range a.Info.Tools {
		tools = append(tools, tl.Name)
	}
	if got := strings.Join(tools, ","); got != "clock,calculator,fs_add" {
		t.Errorf("tools = %s", got)
	}
	if a.ModelOption != "model" || a.Info.Version != "1.2.0" || a.MaxSteps != 25 {
		t.Errorf("agent = %+v", a)
	}
	if !a.Info.AcceptsImage("https://x/y.png") || !a.Info.AcceptsClientTools() || !a.Info.SupportsStream(aap.StreamDelta) ||
		!a.Info.SupportsHistory(aap.HistoryFull) {
		t.Errorf("capabilities = %+v", a.Info.Capabilities)
	}
	if p := a.Compaction.Policy; p.Strategy != compaction.StrategyPruneToolResults || p.Threshold != 100000 || p.Target != 60000 {
		t.Errorf("compaction = %+v", p)
	}
	if got := a.SystemFor(map[string]string{"language": "French", "api_key": "secret!"}); got != "You are a helpful assistant. Answer in French.\n" {
		t.Errorf("system prompt = %q", got)
	}
	r, _ := reg.Get("researcher")
	if p := r.Compaction.Policy; p.Strategy != compaction.StrategySummarize || r.Compaction.Summarizer != nil {
		t.Errorf("researcher compaction = %+v (summaries by its own model)", r.Compaction)
	}
	e, _ := reg.Get("echo")
	if e.Compaction.Summarizer == nil {
		t.Error("the echo agent has no deterministic summarizer")
	}
}

func TestCapabilitiesCanBeTurnedOff(t *testing.T) {
	loaded, err := agentconfig.Load(context.Background(), write(t, "a.yaml", `
agents:
  - name: local
    model: {provider: openai, base_url: "http://127.0.0.1:1/v1", models: [llama3]}
    capabilities: {image_http: false, image_data: false, client_tools: false}
  - name: terse
    model: {provider: echo}
    capabilities: {image_data: false, stream_delta: false, stream_none: false, history_compacted: false}
`), testEnv)
	if err != nil {
		t.Fatal(err)
	}
	info := loaded.Agents[0].Info
	if info.Capabilities.Image != nil || info.Capabilities.Application != nil || info.AcceptsImage("https://x") {
		t.Errorf("capabilities = %+v", info.Capabilities)
	}
	terse := loaded.Agents[1].Info
	if !terse.AcceptsImage("https://x") || terse.AcceptsImage("data:image/png;base64,AA==") ||
		terse.SupportsStream(aap.StreamDelta) || terse.SupportsStream(aap.StreamNone) || !terse.SupportsStream(aap.StreamMessage) ||
		terse.SupportsHistory(aap.HistoryCompacted) || !terse.SupportsHistory(aap.HistoryFull) || !terse.AcceptsClientTools() {
		t.Errorf("terse capabilities = %+v", terse.Capabilities)
	}
	// No stream mode at all is no agent.
	_, err = agentconfig.Load(context.Background(), write(t, "b.yaml", `
agents:
  - name: mute
    model: {provider: echo}
    capabilities: {stream_delta: false, stream_message: false, stream_none: false}
`), testEnv)
	if err == nil || !strings.Contains(err.Error(), "agents[0].capabilities") {
		t.Errorf("an agent with no stream mode: %v", err)
	}
}

// A file that cannot work is refused with one line naming the file, the
// field and the problem.
func TestBadConfigFailsWithOneLineNamingFileFieldAndProblem(t *testing.T) {
	agent := func(model string, extra ...string) string {
		return "agents:\n  - name: a\n    model: " + model + "\n" + strings.Join(extra, "\n") + "\n"
	}
	cases := []struct {
		name, yaml string
		want       []string
	}{
		{"unknown field", agent("{provider: echo}", "    temprature: 1"), []string{"line 4", `unknown field "temprature"`}},
		{"yaml syntax", "agents: [\n", []string{"bad.yaml"}},
		{"no agents", "agents: []\n", []string{"agents", "no agents"}},
		{"missing provider", agent("{models: [x]}"), []string{"agents[0].model.provider", "required"}},
		{"unknown provider", agent("{provider: gemini}"), []string{"agents[0].model.provider", `not "gemini"`}},
		{"unset variable", agent("{provider: openai, api_key: '${NOPE}', models: [m]}"), []string{"agents[0].model.api_key", "NOPE is not set"}},
		{"no model listed", agent("{provider: openai}"), []string{"agents[0].model.models", "at least one model"}},
		{"temperature out of range", agent("{provider: openai, models: [m], temperature: 7}"), []string{"agents[0].model.temperature"}},
		{"anthropic thinking budget", agent("{provider: anthropic, api_key: k, models: [m], max_output_tokens: 2000, thinking_budget: 5000}"), []string{"agents[0].model"}},
		{"duplicate agent", "agents:\n  - {name: a, model: {provider: echo}}\n  - {name: a, model: {provider: echo}}\n", []string{"agents[1].name", "twice"}},
		{"bad agent name", "agents:\n  - {name: 'a b', model: {provider: echo}}\n", []string{"agents[0].name"}},
		{"bad option type", agent("{provider: echo}", "    options: [{name: x, type: number}]"), []string{"agents[0].options[0].type"}},
		{"select without options", agent("{provider: echo}", "    options: [{name: x, type: select}]"), []string{"agents[0].options[0].options"}},
		{"key option not secret", agent("{provider: openai, models: [m], api_key_option: k}", "    options: [{name: k, type: text}]"), []string{"agents[0].options", "secret"}},
		{"unknown builtin", agent("{provider: echo}", "    tools: {builtin: [shell]}"), []string{"agents[0].tools.builtin[0]", `"shell"`}},
		{"mcp fails to start", agent("{provider: echo}", "    tools: {mcp: [{name: gone, command: [/nonexistent/server]}]}"), []string{"agents[0].tools.mcp[0]", `"gone"`}},
		{"mcp both transports", agent("{provider: echo}", "    tools: {mcp: [{name: m, command: [x], url: 'http://x'}]}"), []string{"agents[0].tools.mcp[0]", "exactly one"}},
		{"mcp tool clash", agent("{provider: echo}", "    tools: {builtin: [calculator], mcp: [{name: m, command: ["+"MCP"+"], include: [add], tool_prefix: ''}, {name: n, command: ["+"MCP"+"], include: [add]}]}"), []string{"agents[0].tools", `"add"`}},
		{"compaction target over threshold", agent("{provider: echo}", "    compaction: {threshold_tokens: 1000, target_tokens: 2000}"), []string{"agents[0].compaction", "target_tokens"}},
		{"compaction strategy", agent("{provider: echo}", "    compaction: {strategy: magic}"), []string{"agents[0].compaction", "magic"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			text := strings.ReplaceAll(tc.yaml, "MCP", mcpServer)
			_, err := agentconfig.Load(context.Background(), write(t, "bad.yaml", text), testEnv)
			if err == nil {
				t.Fatal("loaded")
			}
			msg := err.Error()
			if strings.Contains(msg, "\n") || !strings.HasPrefix(msg, "bad.yaml: ") {
				t.Errorf("not one line starting with the file: %q", msg)
			}
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("%q does not say %q", msg, w)
				}
			}
		})
	}
	_, err := agentconfig.Load(context.Background(), "/nonexistent/agents.yaml", testEnv)
	if err == nil || !strings.Contains(err.Error(), "/nonexistent/agents.yaml: cannot read") {
		t.Errorf("missing file: %v", err)
	}
}

// The configuration docker-compose.yml mounts loads as it is.
func TestComposeConfigLoads(t *testing.T) {
	loaded, err := agentconfig.Load(context.Background(), "../../deploy/agents.yaml", testEnv)
	if err != nil {
		t.Fatal(err)
	}
	defer loaded.Close()
	reg, err := agents.NewRegistry(loaded.Agents...)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(reg.Names(), ","); got != "echo" {
		t.Fatalf("agents = %s", got)
	}
}
