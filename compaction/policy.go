package compaction

import (
	"errors"
	"fmt"
)

// StrategyName names a compaction strategy in an agent's configuration.
type StrategyName string

// The strategies.
const (
	// StrategyWindow drops the oldest messages.
	StrategyWindow StrategyName = "window"
	// StrategyPruneToolResults replaces bulky old tool results with a short
	// placeholder, then drops the oldest messages if still over.
	StrategyPruneToolResults StrategyName = "prune_tool_results"
	// StrategySummarize replaces the oldest messages with one summary.
	StrategySummarize StrategyName = "summarize"
)

// Defaults of Policy, applied by WithDefaults to fields left zero.
const (
	// DefaultStrategy loses the least for free: old tool results are
	// usually most of a history's bulk and least of its meaning, and
	// pruning them needs no model call.
	DefaultStrategy = StrategyPruneToolResults
	// DefaultThreshold leaves room in a 128k-token context window for the
	// system prompt, tool definitions and the model's answer.
	DefaultThreshold = 100_000
	// DefaultTargetPercent sets Target to this share of Threshold: far
	// enough below it that a compaction buys many turns before the next
	// one (each compaction also invalidates a provider's prompt cache).
	DefaultTargetPercent = 60
	// DefaultKeepLast keeps the latest exchange or two — a question, the
	// tool calls it led to and their results — word for word.
	DefaultKeepLast = 8
	// DefaultPruneMinChars is about 500 tokens: smaller tool results are
	// not worth losing.
	DefaultPruneMinChars = 2_000
	// DefaultSummaryMaxTokens bounds the summary when the target allows; it
	// is lowered to a quarter of Target for small targets.
	DefaultSummaryMaxTokens = 2_000
	// MinSummaryMaxTokens leaves a summary room for its heading and a few
	// lines of facts.
	MinSummaryMaxTokens = 100
)

// Policy is an agent's compaction configuration. Token amounts are counted
// by the rule of Count: the provider's report when there is one (which
// includes the system prompt and tool definitions), the estimate of the
// history otherwise.
type Policy struct {
	// Strategy is how to compact.
	Strategy StrategyName `json:"strategy"`
	// Threshold: compact when the history counts more tokens than this.
	Threshold int `json:"threshold_tokens"`
	// Target: compact down to at most this many tokens when the history
	// allows. It must be below Threshold, so that a compacted history is
	// not compacted again until it grows.
	Target int `json:"target_tokens"`
	// KeepLast newest messages always stay verbatim (at least 1: the model
	// needs the newest message to go on). A tool call whose results are
	// among them stays too.
	KeepLast int `json:"keep_last"`
	// PruneMinChars (prune_tool_results): tool results with more
	// characters of text than this, or with an image, may become a
	// placeholder.
	PruneMinChars int `json:"prune_min_chars"`
	// SummaryMaxTokens (summarize) bounds the summary message; a longer
	// summary is cut. It must be below Target.
	SummaryMaxTokens int `json:"summary_max_tokens"`
}

// DefaultPolicy is the policy of an agent that configures none.
func DefaultPolicy() Policy { return Policy{}.WithDefaults() }

// WithDefaults returns p with its zero fields set to the defaults. Target
// defaults to DefaultTargetPercent of Threshold, so setting Threshold alone
// scales the policy to a model's context window. PruneMinChars has no zero
// value of its own: 0 means the default.
func (p Policy) WithDefaults() Policy {
	if p.Strategy == "" {
		p.Strategy = DefaultStrategy
	}
	if p.Threshold == 0 {
		p.Threshold = DefaultThreshold
	}
	if p.Target == 0 {
		p.Target = p.Threshold * DefaultTargetPercent / 100
	}
	if p.KeepLast == 0 {
		p.KeepLast = DefaultKeepLast
	}
	if p.PruneMinChars == 0 {
		p.PruneMinChars = DefaultPruneMinChars
	}
	if p.SummaryMaxTokens == 0 {
		p.SummaryMaxTokens = max(MinSummaryMaxTokens, min(DefaultSummaryMaxTokens, p.Target/4))
	}
	return p
}

// Validate reports every field that cannot work, naming it as configured.
func (p Policy) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	switch p.Strategy {
	case StrategyWindow, StrategyPruneToolResults, StrategySummarize:
	default:
		errs = append(errs, unknownStrategy(p.Strategy))
	}
	if p.Threshold <= 0 {
		bad("threshold_tokens must be positive, not %d", p.Threshold)
	}
	switch {
	case p.Target <= 0:
		bad("target_tokens must be positive, not %d", p.Target)
	case p.Threshold > 0 && p.Target >= p.Threshold:
		bad("target_tokens (%d) must be below threshold_tokens (%d): a history compacted only down to the threshold would be compacted again at once", p.Target, p.Threshold)
	}
	if p.KeepLast < 1 {
		bad("keep_last must be at least 1, not %d: the model needs the newest message to go on", p.KeepLast)
	}
	if p.PruneMinChars < 0 {
		bad("prune_min_chars must not be negative, not %d", p.PruneMinChars)
	}
	if p.Strategy == StrategySummarize {
		switch {
		case p.SummaryMaxTokens < MinSummaryMaxTokens:
			bad("summary_max_tokens must be at least %d, not %d: a summary needs room for its facts", MinSummaryMaxTokens, p.SummaryMaxTokens)
		case p.Target > 0 && p.SummaryMaxTokens >= p.Target:
			bad("summary_max_tokens (%d) must be below target_tokens (%d): the summary alone would fill the target", p.SummaryMaxTokens, p.Target)
		}
	}
	return errors.Join(errs...)
}

func unknownStrategy(name StrategyName) error {
	return fmt.Errorf("strategy %q is not one of %q, %q or %q", name, StrategyWindow, StrategyPruneToolResults, StrategySummarize)
}
