package agents

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/compaction"
	"github.com/aapd/aapd/store"
)

// Metrics are the Prometheus metrics of turns, model calls, tool calls and
// compactions. Every label value comes from a bounded set: the configured
// agents, providers, models and tools, and fixed enums. Nothing a client
// sends becomes a label value: a client tool is tool="client", a model id
// the agent does not declare is model="other", and tenants, sessions and
// turns are never labels (their lines in the logs carry them).
type Metrics struct {
	turns              *prometheus.CounterVec
	turnDuration       *prometheus.HistogramVec
	modelDuration      *prometheus.HistogramVec
	modelErrors        *prometheus.CounterVec
	tokens             *prometheus.CounterVec
	toolCalls          *prometheus.CounterVec
	compactions        *prometheus.CounterVec
	compactionDuration *prometheus.HistogramVec
	background         *prometheus.CounterVec
	reg                prometheus.Registerer
}

// What befalls a background turn in a process (aapd_background_turns_total).
const (
	backgroundQueued     = "queued"      // claimed without a worker: every worker was busy
	backgroundStarted    = "started"     // a worker began it (at once, or from the queue)
	backgroundResumed    = "resumed"     // a worker went on with it after its process died
	backgroundHandedBack = "handed_back" // a shutdown cut it: another process resumes it
	backgroundExhausted  = "exhausted"   // failed with attempts_exhausted
	backgroundCancelled  = "cancelled"   // cancelled before a worker could take it again
)

// NewMetrics returns the metrics, registered with reg (nil: registered
// nowhere, as for a runner whose metrics nobody scrapes).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		turns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aapd_turns_total",
			Help: "Turns ended in this process, by agent, status (completed, failed, cancelled, interrupted) and stop reason.",
		}, []string{"agent", "status", "stop_reason"}),
		turnDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "aapd_turn_duration_seconds",
			Help:    "Turn durations from the claim of the session to the turn's recorded end, by agent.",
			Buckets: prometheus.ExponentialBuckets(0.05, 2.5, 10),
		}, []string{"agent"}),
		modelDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "aapd_model_request_duration_seconds",
			Help:    "Model calls (turns and summaries) from request to the whole message, by provider and model (\"other\" for a model the agent does not declare).",
			Buckets: prometheus.ExponentialBuckets(0.05, 2, 12),
		}, []string{"provider", "model"}),
		modelErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aapd_model_errors_total",
			Help: "Model calls that failed (after the provider client's retries; cancelled turns not counted), by provider and model.",
		}, []string{"provider", "model"}),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aapd_model_tokens_total",
			Help: "Tokens the providers reported, by provider, model and direction (input, output).",
		}, []string{"provider", "model", "direction"}),
		toolCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aapd_tool_calls_total",
			Help: "Tool calls by tool, kind (server, mcp, client) and outcome (ok, error, unavailable; delegated for a client tool, counted when the model calls it).",
		}, []string{"tool", "kind", "outcome"}),
		compactions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aapd_compactions_total",
			Help: "Compactions by strategy, trigger (auto, manual) and outcome (compacted, unchanged, conflict, error).",
		}, []string{"strategy", "trigger", "outcome"}),
		compactionDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "aapd_compaction_duration_seconds",
			Help:    "Compaction durations (summaries included) by strategy, trigger and outcome.",
			Buckets: prometheus.ExponentialBuckets(0.005, 4, 9),
		}, []string{"strategy", "trigger", "outcome"}),
		background: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aapd_background_turns_total",
			Help: "Background turns by event in this process: queued (every worker busy), started, resumed (after their process died), handed_back (at a shutdown), exhausted (failed: attempts_exhausted), cancelled (while no worker ran them).",
		}, []string{"event"}),
	}
	m.reg = reg
	if reg != nil {
		reg.MustRegister(m.turns, m.turnDuration, m.modelDuration, m.modelErrors, m.tokens,
			m.toolCalls, m.compactions, m.compactionDuration, m.background)
	}
	// Every series whose labels come from fixed sets exists, at zero, from
	// the start: a dashboard's panel or an alert sees it before the first
	// event. (The agents' own series come with the agents: exportAgents.)
	for _, e := range []string{backgroundQueued, backgroundStarted, backgroundResumed, backgroundHandedBack, backgroundExhausted, backgroundCancelled} {
		m.background.WithLabelValues(e)
	}
	for _, s := range []compaction.StrategyName{compaction.StrategyWindow, compaction.StrategyPruneToolResults, compaction.StrategySummarize} {
		for _, trigger := range []string{TriggerAuto, TriggerManual} {
			for _, outcome := range compactionOutcomes {
				m.compactions.WithLabelValues(string(s), trigger, outcome)
				m.compactionDuration.WithLabelValues(string(s), trigger, outcome)
			}
		}
	}
	m.toolCalls.WithLabelValues("unknown", "server", toolUnavailable)
	m.toolCalls.WithLabelValues("client", "client", toolDelegated)
	return m
}

// turnStatuses are the statuses a turn ends with (aapd_turns_total).
var turnStatuses = []store.TurnStatus{store.TurnCompleted, store.TurnFailed, store.TurnCancelled, store.TurnInterrupted}

// compactionOutcomes are the outcomes of aapd_compactions_total.
var compactionOutcomes = []string{"compacted", "unchanged", "conflict", "error"}

// exportAgents makes the series of the agents served exist, at zero: their
// turns by every status and stop reason, their model's calls, tokens and
// errors, and their server tools' calls by outcome. (An MCP server's tools
// are known only once it is reached: their series start with their first
// call.)
func (m *Metrics) exportAgents(agents *Registry) {
	if m == nil || agents == nil {
		return
	}
	for _, a := range agents.list {
		for _, status := range turnStatuses {
			for _, reason := range append(stopReasonLabels(), labelOther) {
				m.turns.WithLabelValues(a.Info.Name, string(status), reason)
			}
		}
		m.turnDuration.WithLabelValues(a.Info.Name)
		provider := a.providerLabel()
		for _, model := range a.modelLabels() {
			m.modelDuration.WithLabelValues(provider, model)
			m.modelErrors.WithLabelValues(provider, model)
			m.tokens.WithLabelValues(provider, model, "input")
			m.tokens.WithLabelValues(provider, model, "output")
		}
		for _, t := range a.Tools {
			if _, ok := t.(mcpTool); ok {
				continue
			}
			for _, outcome := range []string{toolOK, toolError} {
				m.toolCalls.WithLabelValues(t.Spec().Name, "server", outcome)
			}
		}
	}
}

func stopReasonLabels() []string {
	out := make([]string, len(stopReasons))
	for i, r := range stopReasons {
		out[i] = string(r)
	}
	return out
}

// backgroundTurn counts an event of a background turn.
func (m *Metrics) backgroundTurn(event string) {
	m.background.WithLabelValues(event).Inc()
}

// watchHistoryCache reports what the runner's history cache holds, read
// at each scrape: what an operator sizing --history-cache-mb looks at.
func (m *Metrics) watchHistoryCache(c *historyCache) {
	if m.reg == nil {
		return
	}
	m.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "aapd_history_cache_sessions",
			Help: "Sessions whose decoded history this process keeps, to claim and run their next turn without reading it.",
		}, func() float64 { n, _ := c.size(); return float64(n) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "aapd_history_cache_bytes",
			Help: "Estimated memory those histories hold, bounded by --history-cache-mb.",
		}, func() float64 { _, b := c.size(); return float64(b) }),
	)
}

// labelOther stands for any value outside a label's bounded set.
const labelOther = "other"

// stopReasons are the stop reasons that get a label of their own.
var stopReasons = []aap.StopReason{aap.StopEndTurn, aap.StopToolUse, aap.StopMaxTokens, aap.StopRefusal, aap.StopError}

// turnEnded counts a turn's end.
func (m *Metrics) turnEnded(agent *Agent, status store.TurnStatus, stop aap.StopReason, d time.Duration) {
	reason := labelOther
	if slices.Contains(stopReasons, stop) {
		reason = string(stop)
	}
	m.turns.WithLabelValues(agent.Info.Name, string(status), reason).Inc()
	m.turnDuration.WithLabelValues(agent.Info.Name).Observe(d.Seconds())
}

// modelCall starts timing a call of the agent's model with the requested
// model id (empty: the agent's own); the function it returns records the
// call's end. A call that ends because ctx did is not a model error.
func (m *Metrics) modelCall(ctx context.Context, agent *Agent, requested string) func(Usage, error) {
	if m == nil {
		return func(Usage, error) {}
	}
	provider, model := agent.providerLabel(), agent.modelLabel(requested)
	start := time.Now()
	return func(u Usage, err error) {
		m.modelDuration.WithLabelValues(provider, model).Observe(time.Since(start).Seconds())
		if err != nil && ctx.Err() == nil {
			m.modelErrors.WithLabelValues(provider, model).Inc()
		}
		if u.InputTokens > 0 {
			m.tokens.WithLabelValues(provider, model, "input").Add(float64(u.InputTokens))
		}
		if u.OutputTokens > 0 {
			m.tokens.WithLabelValues(provider, model, "output").Add(float64(u.OutputTokens))
		}
	}
}

// providerLabel is the agent's provider, or "other" if it names none.
func (a *Agent) providerLabel() string {
	if a.Provider == "" {
		return labelOther
	}
	return a.Provider
}

// modelLabels are every value modelLabel can return for the agent: its own
// model, its model option's values, and "other".
func (a *Agent) modelLabels() []string {
	labels := []string{labelOther}
	add := func(m string) {
		if m != "" && !slices.Contains(labels, m) {
			labels = append(labels, m)
		}
	}
	add(a.ModelName)
	if o, ok := a.Info.Option(a.ModelOption); ok && a.ModelOption != "" {
		for _, m := range o.Options {
			add(m)
		}
	}
	return labels
}

// modelLabel is the model id a call runs with when the agent's
// configuration declares it (its own model, or a value of its model
// option), else "other": a session may set an option to anything.
func (a *Agent) modelLabel(requested string) string {
	if requested == "" || requested == a.ModelName {
		if a.ModelName == "" {
			return labelOther
		}
		return a.ModelName
	}
	if o, ok := a.Info.Option(a.ModelOption); ok && a.ModelOption != "" && slices.Contains(o.Options, requested) {
		return requested
	}
	return labelOther
}

// Tool call outcomes, as labelled.
const (
	toolOK          = "ok"
	toolError       = "error"
	toolUnavailable = "unavailable"
	toolDelegated   = "delegated"
)

// mcpTool is implemented by the tools of an MCP server (agents/mcp):
// metrics and traces tell them from aapd's built-in server tools.
type mcpTool interface{ MCPServer() string }

// toolCalled counts a server tool's call: tool is nil when the call named
// no tool the session enables (its name is the model's, so not a label).
func (m *Metrics) toolCalled(tool Tool, err error) {
	name, kind, outcome := "unknown", "server", toolOK
	switch {
	case tool == nil:
		outcome = toolUnavailable
	case err != nil:
		outcome = toolError
	}
	if tool != nil {
		name = tool.Spec().Name
		if _, ok := tool.(mcpTool); ok {
			kind = "mcp"
		}
	}
	m.toolCalls.WithLabelValues(name, kind, outcome).Inc()
}

// clientToolCalled counts a call of a client tool: the client declared its
// name, so it is labelled "client".
func (m *Metrics) clientToolCalled() {
	m.toolCalls.WithLabelValues("client", "client", toolDelegated).Inc()
}

// compacted records a compaction that began at start.
func (m *Metrics) compacted(agent *Agent, trigger string, start time.Time, out CompactOutcome, err error) {
	if agent.Compaction == nil {
		return
	}
	outcome := compactionOutcomes[1]
	var running *store.TurnRunningError
	switch {
	case errors.Is(err, store.ErrCompactionConflict), errors.As(err, &running), errors.Is(err, store.ErrClaimLost):
		outcome = compactionOutcomes[2]
	case err != nil:
		outcome = compactionOutcomes[3]
	case out.Changed:
		outcome = compactionOutcomes[0]
	}
	strategy := string(agent.Compaction.Policy.Strategy)
	m.compactions.WithLabelValues(strategy, trigger, outcome).Inc()
	m.compactionDuration.WithLabelValues(strategy, trigger, outcome).Observe(time.Since(start).Seconds())
}
