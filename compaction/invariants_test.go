package compaction

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"unicode/utf8"

	"github.com/aapd/aapd/aap"
)

// The tests below check each promise of the package documentation on every
// generated case (see propCases): hundreds of random valid histories, each
// compacted by every strategy under a random policy, fresh and again after
// the session grew.

func TestCompactKeepsSystemPrompt(t *testing.T) {
	eachCase(t, func(c propCase) error {
		n := leading(c.h.Items)
		if len(c.r.Items) < n || !sameItems(c.r.Items[:n], c.h.Items[:n]) {
			return fmt.Errorf("the %d leading system messages are not kept first", n)
		}
		return nil
	})
}

func TestCompactNeverSeparatesToolCallFromResult(t *testing.T) {
	eachCase(t, func(c propCase) error {
		inOpen, err := toolPairing(c.h.Items)
		if err != nil {
			return fmt.Errorf("generated input: %v", err)
		}
		outOpen, err := toolPairing(c.r.Items)
		if err != nil {
			return err
		}
		if !slices.Equal(inOpen, outOpen) {
			return fmt.Errorf("unresolved calls at the end: %v, want %v", outOpen, inOpen)
		}
		return nil
	})
}

func TestCompactKeepsUnresolvedToolCall(t *testing.T) {
	eachCase(t, func(c propCase) error {
		open, _ := toolPairing(c.h.Items)
		if len(open) == 0 {
			return nil
		}
		// The call and the results it has so far stay verbatim at the end.
		call := len(c.h.Items) - 1
		for c.h.Items[call].Message.Role == aap.RoleTool {
			call--
		}
		unit := c.h.Items[call:]
		if len(c.r.Items) < len(unit) || !sameItems(c.r.Items[len(c.r.Items)-len(unit):], unit) {
			return fmt.Errorf("the unresolved call %v and its results are not kept at the end", open)
		}
		return nil
	})
}

func TestCompactKeepsNewestVerbatim(t *testing.T) {
	eachCase(t, func(c propCase) error {
		k := min(c.p.KeepLast, len(c.h.Items))
		if len(c.r.Items) < k || !sameItems(c.r.Items[len(c.r.Items)-k:], c.before[len(c.before)-k:]) {
			return fmt.Errorf("the newest %d messages are not kept verbatim", k)
		}
		return nil
	})
}

func TestCompactOutputStartsWithUser(t *testing.T) {
	eachCase(t, func(c propCase) error {
		// Compaction never makes the opening worse, and whenever it removes
		// messages it opens with a user message. (A seeded history may open
		// with the assistant; pruning alone leaves it so.)
		if opener(c.h.Items) != aap.RoleUser && c.r.Dropped+c.r.Summarized == 0 {
			return nil
		}
		if role := opener(c.r.Items); role != aap.RoleUser && role != "" {
			return fmt.Errorf("the output opens with a %s message", role)
		}
		return nil
	})
}

func TestCompactTwiceChangesNothing(t *testing.T) {
	eachCase(t, func(c propCase) error {
		// Again without a report (it went stale), and with the report the
		// next model call would bring if it counted as Result did.
		for _, u := range []Usage{{}, {InputTokens: int64(c.r.TokensAfter), Items: len(c.r.Items)}} {
			s := &recorder{next: EchoSummarizer{}}
			strategy, _ := New(c.p.Strategy, s)
			again, err := strategy.Compact(context.Background(), History{Items: c.r.Items, Usage: u}, c.p)
			if err != nil {
				return fmt.Errorf("again: %v", err)
			}
			if again.Changed || !sameItems(again.Items, c.r.Items) {
				return fmt.Errorf("compacting again (report %+v) changed it to %s", u, shape(again.Items))
			}
			if len(s.calls) > 0 {
				return fmt.Errorf("compacting again called the summarizer")
			}
		}
		return nil
	})
}

func TestCompactOnlyDropsOrReplaces(t *testing.T) {
	allowed := map[StrategyName][]string{
		StrategyWindow:           {"omitted"},
		StrategyPruneToolResults: {"omitted", "pruned"},
		StrategySummarize:        {"summary"},
	}
	eachCase(t, func(c propCase) error {
		in := c.h.Items
		i := 0 // in[:i] is matched
		for j, o := range c.r.Items {
			if o.SourceSeq == 0 {
				if k := slices.IndexFunc(in[i:], func(it Item) bool { return sameItem(it, o) }); k >= 0 {
					i += k + 1 // written by an earlier compaction and kept
					continue
				}
				if kind := written(o); !slices.Contains(allowed[c.p.Strategy], kind) {
					return fmt.Errorf("item %d is a new %q item", j, kind)
				}
				if o.Extra != nil {
					return fmt.Errorf("new item %d carries provider data", j)
				}
				continue
			}
			k := slices.IndexFunc(in[i:], func(it Item) bool { return it.SourceSeq == o.SourceSeq })
			if k < 0 {
				return fmt.Errorf("item %d (seq %d) is not in the input after item %d: reordered or invented", j, o.SourceSeq, i)
			}
			if !sameItem(in[i+k], o) {
				return fmt.Errorf("item %d (seq %d) was altered", j, o.SourceSeq)
			}
			i += k + 1
		}
		return nil
	})
}

func TestCompactPrunesOnlyInPlace(t *testing.T) {
	eachCase(t, func(c propCase) error {
		// A pruned result stands where its result was: right after the
		// results before it, answering the same call.
		results := map[string]Item{}
		for _, it := range c.h.Items {
			if it.Message.Role == aap.RoleTool {
				results[it.Message.ToolCallID] = it
			}
		}
		for j, o := range c.r.Items {
			if written(o) != "pruned" {
				continue
			}
			orig, ok := results[o.Message.ToolCallID]
			if !ok {
				return fmt.Errorf("pruned item %d answers %q, which no input result answers", j, o.Message.ToolCallID)
			}
			if orig.SourceSeq != 0 {
				chars, images := 0, 0
				for _, b := range orig.Message.Content.AsBlocks() {
					switch b.Type {
					case aap.BlockText:
						chars += utf8.RuneCountInString(b.Text)
					case aap.BlockImage:
						images++
					}
				}
				if chars <= c.p.PruneMinChars && images == 0 {
					return fmt.Errorf("pruned item %d replaced a result of %d characters, not over %d", j, chars, c.p.PruneMinChars)
				}
				if o.Message.Content.Text != PrunedText(chars, images) {
					return fmt.Errorf("pruned item %d says %q", j, o.Message.Content.Text)
				}
			}
		}
		return nil
	})
}

func TestCompactLeavesHistoryUnderThresholdAlone(t *testing.T) {
	eachCase(t, func(c propCase) error {
		if Count(c.h.Items, c.h.Usage) > c.p.Threshold {
			return nil
		}
		if c.r.Changed || !sameItems(c.r.Items, c.h.Items) {
			return fmt.Errorf("changed a history of %d tokens, under the threshold", Count(c.h.Items, c.h.Usage))
		}
		return nil
	})
}

func TestCompactShrinksToTargetWhenItCan(t *testing.T) {
	eachCase(t, func(c propCase) error {
		r := c.r
		before := Count(c.h.Items, c.h.Usage)
		if !r.Changed {
			if r.TokensBefore != before || r.TokensAfter != before {
				return fmt.Errorf("unchanged, yet tokens %d -> %d, want %d", r.TokensBefore, r.TokensAfter, before)
			}
			return nil
		}
		extra := before - Estimate(c.h.Items)
		if r.TokensBefore != before || r.TokensAfter != Estimate(r.Items)+extra || r.TokensAfter >= before {
			return fmt.Errorf("tokens %d -> %d, want %d -> %d (less)", r.TokensBefore, r.TokensAfter, before, Estimate(r.Items)+extra)
		}
		if r.TokensAfter <= c.p.Target {
			return nil
		}
		// Over the target only when nothing more could go: all that is left
		// before the newest messages is what compaction wrote.
		l := layoutOf(r.Items, c.p.KeepLast)
		for i := l.head; i < l.tail; i++ {
			if r.Items[i].SourceSeq != 0 {
				return fmt.Errorf("%d tokens, over the target %d, while item %d (seq %d) could still go", r.TokensAfter, c.p.Target, i, r.Items[i].SourceSeq)
			}
		}
		return nil
	})
}

func TestCompactReportsWhatItRemoved(t *testing.T) {
	eachCase(t, func(c propCase) error {
		r := c.r
		if !r.Changed {
			if !reflect.DeepEqual(r, Result{Items: c.h.Items, TokensBefore: r.TokensBefore, TokensAfter: r.TokensAfter}) {
				return fmt.Errorf("unchanged, yet the result reports %+v", r)
			}
			return nil
		}
		seqs := removed(c.h.Items, r.Items)
		var first, last int64
		if len(seqs) > 0 {
			first, last = slices.Min(seqs), slices.Max(seqs)
		}
		if r.FirstSeq != first || r.LastSeq != last {
			return fmt.Errorf("removed seqs %d..%d, want %d..%d", r.FirstSeq, r.LastSeq, first, last)
		}
		inserted := len(r.Items) - (len(c.h.Items) - r.Dropped - r.Summarized)
		if inserted != 0 && inserted != 1 || len(seqs) > r.Dropped+r.Summarized+r.Pruned {
			return fmt.Errorf("dropped %d, summarized %d, pruned %d: does not add up from %d to %d items, %d removed",
				r.Dropped, r.Summarized, r.Pruned, len(c.h.Items), len(r.Items), len(seqs))
		}
		switch c.p.Strategy {
		case StrategyWindow:
			if r.Summarized+r.Pruned != 0 {
				return errors.New("window summarized or pruned")
			}
		case StrategySummarize:
			if r.Dropped+r.Pruned != 0 || inserted != 1 {
				return errors.New("summarize dropped or pruned, or wrote no summary")
			}
		}
		return nil
	})
}

func TestCompactDoesNotModifyInput(t *testing.T) {
	eachCase(t, func(c propCase) error {
		if !reflect.DeepEqual(c.h.Items, c.before) {
			return errors.New("the input items were modified")
		}
		return nil
	})
}

func TestSummarizerGetsWholeToolExchanges(t *testing.T) {
	eachCase(t, func(c propCase) error {
		if c.summary == nil {
			return nil
		}
		if len(c.summary.calls) != min(1, c.r.Summarized) {
			return fmt.Errorf("summarizer called %d times for %d messages summarized", len(c.summary.calls), c.r.Summarized)
		}
		for _, got := range c.summary.calls {
			// Exactly the messages replaced: those after the leading system
			// messages, up to what was kept.
			n := leading(c.h.Items)
			if len(got) != c.r.Summarized || !sameItems(got, c.h.Items[n:n+len(got)]) {
				return fmt.Errorf("summarizer got %s, not the %d oldest messages", shape(got), c.r.Summarized)
			}
			if open, err := toolPairing(got); err != nil || len(open) > 0 {
				return fmt.Errorf("summarizer got a call without its results: %v %v", err, open)
			}
		}
		return nil
	})
}

// TestGeneratedCasesCoverEveryPath keeps the generator honest: the
// invariant tests mean something only if the cases reach every path.
func TestGeneratedCasesCoverEveryPath(t *testing.T) {
	t.Parallel()
	seen := map[string]int{}
	for _, c := range propCases() {
		open, err := toolPairing(c.h.Items)
		if err != nil {
			t.Fatalf("%s: generated an invalid history: %v", c.name, err)
		}
		if err := aap.ValidateCreateSession(aap.CreateSessionRequest{Messages: aapMessages(c.h.Items)}, seedAgent); err != nil {
			t.Fatalf("%s: generated a history aapd would not accept as a seed: %v", c.name, err)
		}
		kinds := map[string]bool{
			"unchanged " + string(c.p.Strategy):   !c.r.Changed,
			"changed " + string(c.p.Strategy):     c.r.Changed,
			"over target " + string(c.p.Strategy): c.r.Changed && c.r.TokensAfter > c.p.Target,
			"unresolved tail":                     len(open) > 0,
			"reported usage":                      c.h.Usage.Items > 0,
			"opens with the assistant":            opener(c.h.Items) == aap.RoleAssistant,
			"earlier summary":                     slices.ContainsFunc(c.h.Items, IsSummary),
			"system prompt":                       leading(c.h.Items) > 0,
			"omitted placeholder written":         c.r.Changed && slices.ContainsFunc(c.r.Items, func(it Item) bool { return written(it) == "omitted" }),
			"pruned and kept":                     c.r.Pruned > 0,
			"pruned then dropped":                 c.r.Pruned > 0 && c.r.Dropped > 0,
			"parallel calls":                      slices.ContainsFunc(c.h.Items, func(it Item) bool { return len(it.Message.ToolCalls()) > 1 }),
		}
		for k, ok := range kinds {
			if ok {
				seen[k]++
			}
		}
	}
	for _, s := range []StrategyName{StrategyWindow, StrategyPruneToolResults, StrategySummarize} {
		for _, k := range []string{"unchanged ", "changed ", "over target "} {
			if seen[k+string(s)] < 10 {
				t.Errorf("only %d cases %s", seen[k+string(s)], k+string(s))
			}
		}
	}
	for _, k := range []string{"unresolved tail", "reported usage", "opens with the assistant", "earlier summary",
		"system prompt", "omitted placeholder written", "pruned and kept", "pruned then dropped", "parallel calls"} {
		if seen[k] < 10 {
			t.Errorf("only %d cases with %s", seen[k], k)
		}
	}
	t.Logf("%d cases: %v", len(propCases()), seen)
}

// seedAgent accepts every kind of content a generated history holds.
var seedAgent = aap.AgentInfo{Name: "test", Capabilities: &aap.Capabilities{
	Image: &aap.ImageCapabilities{HTTP: &aap.Empty{}, Data: &aap.Empty{}}}}

func aapMessages(items []Item) []aap.Message {
	msgs := make([]aap.Message, len(items))
	for i, it := range items {
		msgs[i] = it.Message
	}
	return msgs
}

// TestCompactToleratesInvalidHistories compacts random sequences of any
// roles — stray results, calls never answered, results answered twice —
// that aapd should never store: compaction must not fail or panic, and keeps
// its structural promises all the same.
func TestCompactToleratesInvalidHistories(t *testing.T) {
	t.Parallel()
	roles := []aap.Role{aap.RoleSystem, aap.RoleUser, aap.RoleAssistant, aap.RoleTool}
	for seed := range uint64(300) {
		r := rand.New(rand.NewPCG(seed, 3))
		items := make([]Item, r.IntN(40))
		for i := range items {
			id := fmt.Sprintf("c%d", r.IntN(4))
			var m aap.Message
			switch roles[r.IntN(len(roles))] {
			case aap.RoleSystem:
				m = systemN(5 + r.IntN(100))
			case aap.RoleUser:
				m = userN(5 + r.IntN(100))
			case aap.RoleAssistant:
				m = calls(id)
				if r.IntN(2) == 0 {
					m = assistantN(5 + r.IntN(100))
				}
			case aap.RoleTool:
				m = resultN(id, r.IntN(2_000))
			}
			items[i] = Item{Message: m, SourceSeq: int64(i + 1)}
		}
		for _, s := range []StrategyName{StrategyWindow, StrategyPruneToolResults, StrategySummarize} {
			p := randPolicy(r, s, items)
			p.PruneMinChars = r.IntN(200)
			strategy, _ := New(s, EchoSummarizer{})
			res, err := strategy.Compact(context.Background(), History{Items: items}, p)
			if err != nil {
				t.Fatalf("seed %d, %s: %v", seed, s, err)
			}
			n, k := leading(items), min(p.KeepLast, len(items))
			if !sameItems(res.Items[:n], items[:n]) || !sameItems(res.Items[len(res.Items)-k:], items[len(items)-k:]) {
				t.Fatalf("seed %d, %s: lost the system prompt or the newest messages: %s -> %s", seed, s, shape(items), shape(res.Items))
			}
			if seqs := removed(items, res.Items); len(seqs) > 0 && (seqs[0] != res.FirstSeq || seqs[len(seqs)-1] != res.LastSeq) {
				t.Fatalf("seed %d, %s: removed %v, reported %d..%d", seed, s, seqs, res.FirstSeq, res.LastSeq)
			}
			again, err := strategy.Compact(context.Background(), History{Items: res.Items}, p)
			if err != nil || again.Changed {
				t.Fatalf("seed %d, %s: compacting again changed %s to %s (%v)", seed, s, shape(res.Items), shape(again.Items), err)
			}
		}
	}
}
