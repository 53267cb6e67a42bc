package compaction

import (
	"strings"
	"testing"
)

func TestDefaultPolicy(t *testing.T) {
	t.Parallel()
	p := DefaultPolicy()
	want := Policy{Strategy: StrategyPruneToolResults, Threshold: 100_000, Target: 60_000, KeepLast: 8,
		PruneMinChars: 2_000, SummaryMaxTokens: 2_000}
	if p != want {
		t.Fatalf("DefaultPolicy() = %+v, want %+v", p, want)
	}
	for _, s := range []StrategyName{StrategyWindow, StrategyPruneToolResults, StrategySummarize} {
		p.Strategy = s
		if err := p.Validate(); err != nil {
			t.Errorf("default policy with strategy %s: %v", s, err)
		}
	}
}

func TestWithDefaultsScalesToTheThreshold(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   Policy
		want Policy
	}{
		{
			in:   Policy{Strategy: StrategySummarize, Threshold: 6_000},
			want: Policy{Strategy: StrategySummarize, Threshold: 6_000, Target: 3_600, KeepLast: 8, PruneMinChars: 2_000, SummaryMaxTokens: 900},
		},
		{
			in:   Policy{Strategy: StrategyWindow, Threshold: 500, KeepLast: 2},
			want: Policy{Strategy: StrategyWindow, Threshold: 500, Target: 300, KeepLast: 2, PruneMinChars: 2_000, SummaryMaxTokens: MinSummaryMaxTokens},
		},
		{
			in:   Policy{Strategy: StrategyWindow, Threshold: 1_000, Target: 900, KeepLast: 1, PruneMinChars: 5, SummaryMaxTokens: 300},
			want: Policy{Strategy: StrategyWindow, Threshold: 1_000, Target: 900, KeepLast: 1, PruneMinChars: 5, SummaryMaxTokens: 300},
		},
	}
	for _, tt := range tests {
		got := tt.in.WithDefaults()
		if got != tt.want {
			t.Errorf("%+v.WithDefaults() = %+v, want %+v", tt.in, got, tt.want)
		}
		if err := got.Validate(); err != nil {
			t.Errorf("%+v: %v", got, err)
		}
	}
}

func TestValidateNamesEveryBadField(t *testing.T) {
	t.Parallel()
	ok := DefaultPolicy()
	tests := []struct {
		name string
		edit func(*Policy)
		want []string
	}{
		{"unknown strategy", func(p *Policy) { p.Strategy = "drop" }, []string{`strategy "drop" is not one of "window", "prune_tool_results" or "summarize"`}},
		{"empty strategy", func(p *Policy) { p.Strategy = "" }, []string{`strategy "" is not one of`}},
		{"zero threshold", func(p *Policy) { p.Threshold = 0 }, []string{"threshold_tokens must be positive, not 0"}},
		{"negative target", func(p *Policy) { p.Target = -1 }, []string{"target_tokens must be positive, not -1"}},
		{"target at threshold", func(p *Policy) { p.Target = p.Threshold }, []string{"target_tokens (100000) must be below threshold_tokens (100000)"}},
		{"keep nothing", func(p *Policy) { p.KeepLast = 0 }, []string{"keep_last must be at least 1, not 0"}},
		{"negative prune size", func(p *Policy) { p.PruneMinChars = -5 }, []string{"prune_min_chars must not be negative, not -5"}},
		{"tiny summary", func(p *Policy) { p.Strategy, p.SummaryMaxTokens = StrategySummarize, 10 }, []string{"summary_max_tokens must be at least 100, not 10"}},
		{"summary fills target", func(p *Policy) { p.Strategy, p.SummaryMaxTokens = StrategySummarize, p.Target },
			[]string{"summary_max_tokens (60000) must be below target_tokens (60000)"}},
		{"several at once", func(p *Policy) { p.Threshold, p.KeepLast = -1, -1 },
			[]string{"threshold_tokens must be positive, not -1", "keep_last must be at least 1, not -1"}},
	}
	for _, tt := range tests {
		p := ok
		tt.edit(&p)
		err := p.Validate()
		if err == nil {
			t.Errorf("%s: Validate(%+v) = nil", tt.name, p)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not say %q", tt.name, err, w)
			}
		}
	}
}

func TestNew(t *testing.T) {
	t.Parallel()
	for name, want := range map[StrategyName]Strategy{
		StrategyWindow:           Window{},
		StrategyPruneToolResults: PruneToolResults{},
		StrategySummarize:        Summarize{Summarizer: EchoSummarizer{}},
	} {
		got, err := New(name, EchoSummarizer{})
		if err != nil || got != want {
			t.Errorf("New(%s) = %#v, %v; want %#v", name, got, err, want)
		}
	}
	if _, err := New(StrategySummarize, nil); err == nil {
		t.Error("New(summarize, nil) did not fail")
	}
	if _, err := New("compress", nil); err == nil || !strings.Contains(err.Error(), `"compress"`) {
		t.Errorf("New(compress) error = %v", err)
	}
}

func TestCompactRejectsAnInvalidPolicy(t *testing.T) {
	t.Parallel()
	items := hist(userN(500), assistantN(500), userN(500), assistantN(500))
	p := policy(StrategyWindow, 100, 200, 1)
	for _, s := range []Strategy{Window{}, PruneToolResults{}, Summarize{Summarizer: &recorder{}}} {
		r, err := s.Compact(t.Context(), History{Items: items}, p)
		if err == nil || !strings.Contains(err.Error(), "target_tokens") {
			t.Errorf("%T: err = %v, want the bad target named", s, err)
		}
		if r.Changed || !sameItems(r.Items, items) {
			t.Errorf("%T changed the history under an invalid policy", s)
		}
	}
}
