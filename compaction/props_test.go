package compaction

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/aapd/aapd/aap"
)

// propSeeds is how many random histories the invariant tests compact, each
// with every strategy, fresh and again after it grew.
const propSeeds = 300

// propCase is one random history compacted by one strategy under a random
// policy.
type propCase struct {
	name     string
	strategy Strategy
	h        History
	before   []Item // a deep copy of h.Items made before compacting
	p        Policy
	r        Result
	err      error
	summary  *recorder // what the summarizer was given, for summarize
}

// propCases generates the cases once; tests only read them.
var propCases = sync.OnceValue(func() []propCase {
	var cases []propCase
	for seed := range uint64(propSeeds) {
		pr := rand.New(rand.NewPCG(seed, 2))
		maxTurns := 1 + pr.IntN(30)
		items := newGen(seed).history(maxTurns)
		for _, s := range []StrategyName{StrategyWindow, StrategyPruneToolResults, StrategySummarize} {
			p := randPolicy(pr, s, items)
			c := runCase(fmt.Sprintf("seed %d, %s", seed, s), History{Items: items, Usage: randUsage(pr, items)}, p)
			cases = append(cases, c)
			// The session goes on after compaction and is compacted again.
			g := newGen(seed)
			g.history(maxTurns)
			g.items = slices.Clone(c.r.Items)
			grown := g.more(1 + pr.IntN(10))
			cases = append(cases, runCase(c.name+", grown", History{Items: grown, Usage: randUsage(pr, grown)}, p))
		}
	}
	return cases
})

func runCase(name string, h History, p Policy) propCase {
	c := propCase{name: name, h: h, before: cloneItems(h.Items), p: p}
	if p.Strategy == StrategySummarize {
		c.summary = &recorder{next: EchoSummarizer{}}
	}
	c.strategy, c.err = New(p.Strategy, c.summary)
	if c.err == nil {
		c.r, c.err = c.strategy.Compact(context.Background(), h, p)
	}
	return c
}

// randPolicy returns a random valid policy for strategy s sized to items:
// its threshold is as likely to be under as over their count.
func randPolicy(r *rand.Rand, s StrategyName, items []Item) Policy {
	threshold := 200 + r.IntN(max(1, Estimate(items)))
	target := 101 + r.IntN(threshold-101)
	return Policy{
		Strategy:         s,
		Threshold:        threshold,
		Target:           target,
		KeepLast:         1 + r.IntN(12),
		PruneMinChars:    r.IntN(3_000),
		SummaryMaxTokens: 100 + r.IntN(target-100),
	}
}

// randUsage returns a provider report for items about a third of the time:
// for a random prefix, sometimes below the estimate.
func randUsage(r *rand.Rand, items []Item) Usage {
	if len(items) == 0 || r.IntN(3) != 0 {
		return Usage{}
	}
	n := 1 + r.IntN(len(items))
	return Usage{InputTokens: int64(max(1, Estimate(items[:n])+r.IntN(3_000)-500)), Items: n}
}

// eachCase runs check on every case and reports the first failures.
func eachCase(t *testing.T, check func(c propCase) error) {
	t.Helper()
	t.Parallel()
	failures := 0
	for _, c := range propCases() {
		err := c.err
		if err == nil {
			err = check(c)
		}
		if err != nil {
			t.Errorf("%s: %v\n  policy %+v\n  in:  %s\n  out: %s", c.name, err, c.p, shape(c.h.Items), shape(c.r.Items))
			if failures++; failures == 5 {
				t.Fatal("stopping after 5 failures")
			}
		}
	}
}

// leading counts the system messages that open items.
func leading(items []Item) int {
	n := 0
	for n < len(items) && items[n].Message.Role == aap.RoleSystem {
		n++
	}
	return n
}

// opener returns the role of the first message after the leading system
// messages, "" if there is none.
func opener(items []Item) aap.Role {
	if n := leading(items); n < len(items) {
		return items[n].Message.Role
	}
	return ""
}

// toolPairing checks that every tool message answers a call of the
// assistant message before its run of tool messages, and that every call is
// answered before the next other message. It returns the calls left open at
// the end.
func toolPairing(items []Item) (open []string, err error) {
	var calls []string
	for i, it := range items {
		m := it.Message
		if m.Role == aap.RoleTool {
			k := slices.Index(calls, m.ToolCallID)
			if k < 0 {
				return nil, fmt.Errorf("item %d answers %q, which the assistant message before it does not call (or is answered twice)", i, m.ToolCallID)
			}
			calls = slices.Delete(calls, k, k+1)
			continue
		}
		if len(calls) > 0 {
			return nil, fmt.Errorf("tool call %q has no result before item %d", calls[0], i)
		}
		for _, c := range m.ToolCalls() {
			calls = append(calls, c.ToolCallID)
		}
	}
	return calls, nil
}

// written says what kind of item compaction wrote it is: "omitted",
// "summary", "pruned", or "" for a copy of the full history.
func written(it Item) string {
	switch {
	case it.SourceSeq != 0:
		return ""
	case IsSummary(it):
		return "summary"
	case it.Message.Role == aap.RoleUser && it.Message.Content.Text == OmittedText:
		return "omitted"
	case it.Message.Role == aap.RoleTool && strings.HasPrefix(it.Message.Content.Text, "[tool result pruned: "):
		return "pruned"
	}
	return "unknown"
}

// removed returns the SourceSeqs of in's full-history copies that out does
// not hold verbatim.
func removed(in, out []Item) []int64 {
	kept := map[int64]Item{}
	for _, it := range out {
		if it.SourceSeq != 0 {
			kept[it.SourceSeq] = it
		}
	}
	var seqs []int64
	for _, it := range in {
		if o, ok := kept[it.SourceSeq]; it.SourceSeq != 0 && (!ok || !sameItem(o, it)) {
			seqs = append(seqs, it.SourceSeq)
		}
	}
	return seqs
}

// cloneItems copies items deeply, so a test can tell whether Compact wrote
// to its input.
func cloneItems(items []Item) []Item {
	out := make([]Item, len(items))
	for i, it := range items {
		it.Extra = slices.Clone(it.Extra)
		if it.Message.Content.Blocks != nil {
			blocks := slices.Clone(it.Message.Content.Blocks)
			for j := range blocks {
				blocks[j].Input = slices.Clone(blocks[j].Input)
			}
			it.Message.Content.Blocks = blocks
		}
		out[i] = it
	}
	return out
}
