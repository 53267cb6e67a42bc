package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// has reports whether a series of the name whose labels include every one
// of labels (`k="v"` each) was exported, whatever its value.
func (s scrape) has(name string, labels ...string) bool {
	for series := range s.samples {
		n, rest, _ := strings.Cut(series, "{")
		if n != name {
			continue
		}
		ok := true
		for _, l := range labels {
			ok = ok && strings.Contains(rest, l)
		}
		if ok {
			return true
		}
	}
	return false
}

// documentedMetrics are the metric names of docs/operations.md's table.
func documentedMetrics(t *testing.T) []string {
	t.Helper()
	doc, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range regexp.MustCompile("(?m)^\\| `(aapd_[a-z_]+)` \\|").FindAllSubmatch(doc, -1) {
		names = append(names, string(m[1]))
	}
	if len(names) < 20 {
		t.Fatalf("docs/operations.md lists %d metrics: the table was not found", len(names))
	}
	return names
}

// A fresh server, before any turn or request but the scrape, exports every
// family documented, and every series whose labels come from a fixed set,
// at zero: a dashboard's panel or an alert sees them from the start (the
// client-disconnect panel had no series until a client disconnected).
func TestFreshServerExportsEveryFixedSeriesAtZero(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agents.yaml")
	if err := os.WriteFile(path, []byte(fmt.Sprintf(metricsAgents, "http://127.0.0.1:1/v1")), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, func(c *Config) { c.AgentsFile = path })
	fresh := readMetrics(t, s.base)

	for _, name := range documentedMetrics(t) {
		if _, ok := fresh.families[name]; !ok {
			t.Errorf("%s: documented, not exported by a fresh server", name)
		}
	}
	type series struct {
		name   string
		labels []string
	}
	var want []series
	add := func(name string, labels ...string) { want = append(want, series{name, labels}) }
	for _, route := range []string{"/sessions", "/sessions/{id}/turns", "/sessions/{id}/turns/{turnId}/events", "unmatched"} {
		add("aapd_http_client_disconnects_total", `route="`+route+`"`)
	}
	for _, class := range []string{"2xx", "4xx", "5xx"} {
		add("aapd_http_requests_total", `method="POST"`, `route="/sessions/{id}/turns"`, `status="`+class+`"`)
	}
	add("aapd_http_request_duration_seconds_count", `method="POST"`, `route="/sessions/{id}/turns"`)
	for _, cause := range []string{"busy", "compacting", "rate_limited", "running_turns_limit", "fair_share", "queue_full", "auth_throttled", "saturated", "unavailable"} {
		add("aapd_rejections_total", `cause="`+cause+`"`)
	}
	for _, result := range []string{"found", "unknown", "error"} {
		add("aapd_api_key_lookups_total", `result="`+result+`"`)
	}
	for _, event := range []string{"queued", "started", "resumed", "handed_back", "exhausted", "cancelled"} {
		add("aapd_background_turns_total", `event="`+event+`"`)
	}
	for _, agent := range []string{"echo", "bot"} {
		for _, status := range []string{"completed", "failed", "cancelled", "interrupted"} {
			for _, stop := range []string{"end_turn", "tool_use", "max_tokens", "refusal", "error", "other"} {
				add("aapd_turns_total", `agent="`+agent+`"`, `status="`+status+`"`, `stop_reason="`+stop+`"`)
			}
		}
		add("aapd_turn_duration_seconds_count", `agent="`+agent+`"`)
	}
	// Labels are written in the order of their names.
	for _, model := range [][]string{{`provider="echo"`}, {`model="model-a"`, `provider="openai"`}, {`model="model-b"`, `provider="openai"`}, {`model="other"`, `provider="openai"`}} {
		add("aapd_model_request_duration_seconds_count", model...)
		add("aapd_model_errors_total", model...)
		add("aapd_model_tokens_total", append(model, `direction="input"`)...)
		add("aapd_model_tokens_total", append(model, `direction="output"`)...)
	}
	for _, tool := range []string{`kind="server",outcome="ok",tool="calculator"`, `kind="server",outcome="error",tool="calculator"`,
		`kind="server",outcome="ok",tool="clock"`, `kind="server",outcome="unavailable",tool="unknown"`, `kind="client",outcome="delegated",tool="client"`} {
		add("aapd_tool_calls_total", tool)
	}
	for _, strategy := range []string{"window", "prune_tool_results", "summarize"} {
		for _, trigger := range []string{"auto", "manual"} {
			for _, outcome := range []string{"compacted", "unchanged", "conflict", "error"} {
				l := fmt.Sprintf(`outcome="%s",strategy="%s",trigger="%s"`, outcome, strategy, trigger)
				add("aapd_compactions_total", l)
				add("aapd_compaction_duration_seconds_count", l)
			}
		}
	}
	for _, result := range []string{"success", "status", "timeout", "network", "refused"} {
		add("aapd_webhook_attempts_total", `result="`+result+`"`)
	}
	for _, outcome := range []string{"delivered", "failed"} {
		add("aapd_webhook_deliveries_total", `outcome="`+outcome+`"`)
	}
	for _, result := range []string{"done", "busy", "failed"} {
		add("aapd_retention_sweeps_total", `result="`+result+`"`)
	}
	add("aapd_retention_messages_deleted_total", `kind="idle_session"`)
	for _, w := range want {
		if !fresh.has(w.name, w.labels...) {
			t.Errorf("a fresh server exports no %s%v", w.name, w.labels)
		}
	}
	if got := fresh.sum("aapd_turns_total"); got != 0 {
		t.Errorf("aapd_turns_total sums to %v before any turn", got)
	}
	t.Run("every metric the dashboard queries is there from the start", func(t *testing.T) {
		checkDashboard(t, "../../deploy/grafana/aapd.json", fresh.families)
	})
}
