package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/aapclient"
	"github.com/aapd/aapd/store"
	"github.com/aapd/aapd/store/storetest"
)

// metricsAgents serves the echo agent as the harness knows it (calculator,
// a small summarizing compaction) and "bot", an OpenAI-compatible agent on
// a fake provider that reports token usage.
const metricsAgents = `agents:
  - name: echo
    model:
      provider: echo
    tools:
      builtin: [calculator, clock]
    compaction:
      strategy: summarize
      threshold_tokens: 4000
      target_tokens: 2400
      keep_last: 8
  - name: bot
    model:
      provider: openai
      base_url: %s
      api_key: server-key
      models: [model-a, model-b]
      max_retries: 0
      timeout: 5s
`

// scrape is one reading of /metrics: every sample by its series (name and
// labels as written), and the families the TYPE lines declare.
type scrape struct {
	samples  map[string]float64
	families map[string]string // name → type
	body     string
}

func readMetrics(t *testing.T, base string) scrape {
	t.Helper()
	return readMetricsAs(t, base, "")
}

// readMetricsAs reads /metrics with a bearer token (the operator's, when
// the server has one).
func readMetricsAs(t *testing.T, base, token string) scrape {
	t.Helper()
	body := string((&client{t: t, base: base, key: token}).do("GET", "/metrics", nil).expect(t, http.StatusOK).body)
	s := scrape{samples: map[string]float64{}, families: map[string]string{}, body: body}
	sc := bufio.NewScanner(strings.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if f, ok := strings.CutPrefix(line, "# TYPE "); ok {
			name, typ, _ := strings.Cut(f, " ")
			s.families[name] = typ
			continue
		}
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		s.samples[line[:i]] = v
	}
	return s
}

// sum adds the samples of a series name whose labels include every one of
// labels (`k="v"` each).
func (s scrape) sum(name string, labels ...string) float64 {
	total := 0.0
	for series, v := range s.samples {
		n, rest, _ := strings.Cut(series, "{")
		if n != name {
			continue
		}
		ok := true
		for _, l := range labels {
			ok = ok && strings.Contains(rest, l)
		}
		if ok {
			total += v
		}
	}
	return total
}

// A real server, after a few turns — a server tool, a client tool, a
// model error, a provider's token report, a manual compaction, a 409, a
// 429, a stream open and one dropped — exports every aapd family, and each
// moved. Label values come from bounded sets: nothing a client named (a
// client tool, a made-up tool, a tenant) is a label.
func TestMetricsFamiliesMove(t *testing.T) {
	fake := &fakeProvider{t: t, script: []string{
		openaiCompletion(`{"role":"assistant","content":"Hello"}`, "stop", `{"prompt_tokens":31,"completion_tokens":4,"total_tokens":35}`),
	}}
	provider := httptest.NewServer(fake)
	defer provider.Close()
	path := filepath.Join(t.TempDir(), "agents.yaml")
	if err := os.WriteFile(path, []byte(fmt.Sprintf(metricsAgents, provider.URL+"/v1")), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, func(c *Config) {
		c.DatabaseURL = storetest.NewDatabase(t) // its own: the limits below are its alone
		c.AgentsFile = path
	})
	before := readMetrics(t, s.base)
	c, tn := s.newTenantWithID(t)

	// A server tool, a tool nobody enabled, a client tool, a model error.
	sid := c.echoSession([]aap.ServerToolRef{{Name: "calculator", Trust: true}}, "secret_lookup")
	c.say(sid, `/tool calculator {"expression":"6*7"}`)
	c.say(sid, `/tool made_up_tool {}`)
	if r := c.say(sid, `/tool secret_lookup {}`); r.StopReason != aap.StopToolUse {
		t.Fatalf("client tool call: stop %q", r.StopReason)
	}
	if r := c.say(c.echoSession(nil), "/error boom"); r.StopReason != aap.StopError {
		t.Fatalf("/error: stop %q", r.StopReason)
	}
	// A provider that reports tokens, on a model the agent declares.
	bot := c.createSession(map[string]any{"agent": map[string]any{"name": "bot", "options": map[string]string{"model": "model-b"}}})
	c.say(bot, "hi")

	// A manual compaction that compacts.
	long := c.echoSession(nil)
	chatter(c, long, 6) // over the target, under the threshold: compacted only when asked
	if compacted := c.compact(long); !compacted.Compacted {
		t.Fatalf("manual compaction: %+v", compacted)
	}

	// A stream open, and a second turn on its session: 409.
	slow := c.startSlowTurn()
	during := readMetrics(t, s.base)
	c.turnRefusal(t, slow.sid, http.StatusConflict, "turn-running", true)
	slow.stop()
	// A stream whose client leaves.
	goneSID := c.echoSession(nil)
	gone := c.openTurn(goneSID, streamUser("delta", slowWords(3000, 50)))
	goneTurn := gone.TurnID()
	gone.close()

	// A tenant over its rate: 429.
	b, bt := s.newTenantWithID(t)
	if _, err := s.Store.TenantSetLimits(context.Background(), bt.ID, store.TenantLimits{RequestsPerSecond: 1, Burst: 1}); err != nil {
		t.Fatal(err)
	}
	rateLimited(t, b)

	var after scrape
	waitFor(t, "the dropped stream to be counted", 10*time.Second, func() bool {
		after = readMetrics(t, s.base)
		return after.sum("aapd_http_client_disconnects_total") > 0
	})
	_, _, _ = c.api().CancelTurn(t.Context(), goneSID, goneTurn) // waitTurn judges
	c.waitTurn(goneSID, goneTurn)

	moved := []struct {
		name   string
		labels []string
	}{
		{"aapd_http_requests_total", []string{`route="/sessions/{id}/turns"`}},
		{"aapd_http_request_duration_seconds_count", []string{`route="/sessions/{id}/turns"`}},
		{"aapd_http_client_disconnects_total", nil},
		{"aapd_turns_total", []string{`agent="echo"`, `status="completed"`, `stop_reason="end_turn"`}},
		{"aapd_turns_total", []string{`agent="echo"`, `status="completed"`, `stop_reason="tool_use"`}},
		{"aapd_turns_total", []string{`agent="echo"`, `status="failed"`, `stop_reason="error"`}},
		{"aapd_turns_total", []string{`agent="echo"`, `status="cancelled"`}},
		{"aapd_turns_total", []string{`agent="bot"`, `status="completed"`}},
		{"aapd_turn_duration_seconds_count", []string{`agent="echo"`}},
		{"aapd_model_request_duration_seconds_count", []string{`provider="echo"`, `model="echo"`}},
		{"aapd_model_request_duration_seconds_count", []string{`provider="openai"`, `model="model-b"`}},
		{"aapd_model_errors_total", []string{`provider="echo"`, `model="echo"`}},
		{"aapd_model_tokens_total", []string{`provider="openai"`, `model="model-b"`, `direction="input"`}},
		{"aapd_model_tokens_total", []string{`provider="openai"`, `model="model-b"`, `direction="output"`}},
		{"aapd_tool_calls_total", []string{`tool="calculator"`, `kind="server"`, `outcome="ok"`}},
		{"aapd_tool_calls_total", []string{`tool="unknown"`, `kind="server"`, `outcome="unavailable"`}},
		{"aapd_tool_calls_total", []string{`tool="client"`, `kind="client"`, `outcome="delegated"`}},
		{"aapd_compactions_total", []string{`strategy="summarize"`, `trigger="manual"`, `outcome="compacted"`}},
		{"aapd_compaction_duration_seconds_count", []string{`strategy="summarize"`, `trigger="manual"`}},
		{"aapd_rejections_total", []string{`cause="busy"`}},
		{"aapd_rejections_total", []string{`cause="rate_limited"`}},
		{"aapd_db_pool_acquires_total", nil},
		{"aapd_db_pool_acquire_wait_seconds_total", nil},
	}
	for _, m := range moved {
		if got, was := after.sum(m.name, m.labels...), before.sum(m.name, m.labels...); got <= was {
			t.Errorf("%s%v: %v after, %v before: did not move", m.name, m.labels, got, was)
		}
	}
	if got := during.sum("aapd_sse_streams_open"); got < 1 {
		t.Errorf("aapd_sse_streams_open = %v while a stream is open", got)
	}
	if got := during.sum("aapd_turns_running"); got < 1 {
		t.Errorf("aapd_turns_running = %v while a turn runs", got)
	}
	if got := after.sum("aapd_build_info", `goversion="go`, `version="`, `revision="`); got != 1 {
		t.Errorf("aapd_build_info = %v, want 1:\n%s", got, after.body)
	}
	for _, g := range []string{"aapd_db_pool_total_connections", "aapd_db_pool_max_connections", "aapd_history_cache_sessions", "aapd_history_cache_bytes"} {
		if after.sum(g) < 1 {
			t.Errorf("%s = %v", g, after.sum(g))
		}
	}
	for _, g := range []string{"aapd_db_pool_acquired_connections", "aapd_db_pool_idle_connections", "aapd_db_pool_empty_acquires_total", "aapd_sse_streams_open"} {
		if _, ok := after.families[g]; !ok {
			t.Errorf("no %s family", g)
		}
	}
	for _, leak := range []string{"secret_lookup", "made_up_tool", tn.ID, sid, bt.ID} {
		if strings.Contains(after.body, leak) {
			t.Errorf("/metrics names %q, which came from a client", leak)
		}
	}

	t.Run("dashboard names only exported metrics", func(t *testing.T) {
		checkDashboard(t, "../../deploy/grafana/aapd.json", after.families)
	})
}

// rateLimited lists sessions as c through aapclient (which does not retry
// here) until a request is refused with 429.
func rateLimited(t *testing.T, c *client) {
	t.Helper()
	api := c.api()
	for range 100 {
		_, err := api.ListSessions(t.Context(), aapclient.ListOptions{})
		if err == nil {
			continue
		}
		refusal(t, err, http.StatusTooManyRequests, "rate-limited")
		return
	}
	t.Fatal("100 requests in a row passed a limit of one per second")
}
