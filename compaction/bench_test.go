package compaction

import (
	"context"
	"sync"
	"testing"
)

// benchHistory is a generated history of 10,000 messages.
var benchHistory = sync.OnceValue(func() []Item {
	g := newGen(42)
	g.history(1)
	for len(g.items) < 10_000 {
		g.more(50)
	}
	return g.items[:10_000:10_000]
})

func BenchmarkEstimate(b *testing.B) {
	items := benchHistory()
	b.ReportAllocs()
	for b.Loop() {
		Estimate(items)
	}
}

// BenchmarkCompact compacts the 10,000 messages to a fraction of their
// count, as after a long unattended session, and checks an already-compact
// history (the common case after every turn).
func BenchmarkCompact(b *testing.B) {
	items := benchHistory()
	total := Estimate(items)
	for _, s := range []StrategyName{StrategyWindow, StrategyPruneToolResults, StrategySummarize} {
		p := Policy{Strategy: s, Threshold: total / 2, Target: total / 4, KeepLast: 8,
			PruneMinChars: 2_000, SummaryMaxTokens: 2_000}
		strategy, err := New(s, EchoSummarizer{})
		if err != nil {
			b.Fatal(err)
		}
		b.Run(string(s), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				r, err := strategy.Compact(context.Background(), History{Items: items}, p)
				if err != nil || !r.Changed {
					b.Fatalf("changed %v, err %v", r.Changed, err)
				}
			}
		})
		b.Run(string(s)+"/under-threshold", func(b *testing.B) {
			p := p
			p.Threshold, p.Target = total, total/2
			b.ReportAllocs()
			for b.Loop() {
				if r, _ := strategy.Compact(context.Background(), History{Items: items}, p); r.Changed {
					b.Fatal("changed under the threshold")
				}
			}
		})
	}
}
