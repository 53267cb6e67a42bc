package compaction

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/aapd/aapd/aap"
)

// Item is one message of a compacted history.
type Item struct {
	Message aap.Message
	// Extra is the provider data stored beside the message (such as
	// thinking signatures). It is opaque here and always travels with its
	// message; items compaction writes carry none.
	Extra json.RawMessage
	// SourceSeq is the full-history message this item copies, or 0 for an
	// item compaction wrote (a summary or a placeholder). Compaction never
	// changes the SourceSeq of an item it keeps, and never prunes an item
	// whose SourceSeq is 0 (a placeholder it wrote).
	SourceSeq int64
}

// Usage is what a provider reported for its latest call over a history: the
// input tokens it counted, and how many leading items of the history it was
// sent. It makes the token count exact for that prefix (see Count). The zero
// Usage means no report; a report is stale, and must not be passed, once the
// history has been compacted since that call.
type Usage struct {
	// InputTokens is every input token of the call, cached ones included:
	// Anthropic reports cache reads and writes apart from input_tokens, and
	// they must be added, or a cached conversation looks nearly empty.
	InputTokens int64
	Items       int
}

// History is a compacted history to compact, with the provider's latest
// report on it when there is one.
type History struct {
	Items []Item
	Usage Usage
}

// Result is what a compaction did.
type Result struct {
	// Changed reports whether Items differ from the input. When false,
	// Items is the input slice itself and there is nothing to store.
	Changed bool
	// Items is the new compacted history.
	Items []Item
	// FirstSeq and LastSeq bound the full-history seqs whose verbatim copies
	// this compaction removed (dropped, pruned or summarized); both are 0
	// when it removed none. Items kept between them keep their SourceSeq.
	FirstSeq, LastSeq int64
	// Dropped, Pruned and Summarized count the input items removed, turned
	// into a placeholder, and replaced by the summary.
	Dropped, Pruned, Summarized int
	// TokensBefore and TokensAfter count the history before and after, by
	// the rule of Count (the provider's report, when given, raises both by
	// the same amount).
	TokensBefore, TokensAfter int
}

// Strategy is one way of compacting. Compact compacts h when it is over
// p.Threshold, down to about p.Target, and keeps every promise listed in the
// package documentation. It never modifies h.Items. On error the Result
// reports no change.
type Strategy interface {
	Compact(ctx context.Context, h History, p Policy) (Result, error)
}

// New returns the strategy a policy names. The summarize strategy needs s;
// the others ignore it.
func New(name StrategyName, s Summarizer) (Strategy, error) {
	switch name {
	case StrategyWindow:
		return Window{}, nil
	case StrategyPruneToolResults:
		return PruneToolResults{}, nil
	case StrategySummarize:
		if s == nil {
			return nil, errors.New("compaction: the summarize strategy needs a summarizer")
		}
		return Summarize{Summarizer: s}, nil
	}
	return nil, fmt.Errorf("compaction: %w", unknownStrategy(name))
}

// Needed reports whether h is over the policy's threshold, i.e. whether a
// compaction would do something (if anything can be removed). It is the
// trigger to check after each turn.
func Needed(h History, p Policy) bool {
	return Count(h.Items, h.Usage) > p.Threshold
}

// unchanged is the result of a compaction that does nothing.
func unchanged(h History, tokens int) Result {
	return Result{Items: h.Items, TokensBefore: tokens, TokensAfter: tokens}
}

// finish completes a strategy's result: tokens after, Changed and the range
// of removed seqs. extra is what the provider counts beyond the estimate
// (see Count). A result that does not lower the count is no change — this
// includes one that comes out identical to the input — and that is what
// makes compacting a compacted history a no-op.
func finish(h History, out []Item, r Result, extra int) Result {
	r.Items = out
	r.TokensAfter = Estimate(out) + extra
	if r.TokensAfter >= r.TokensBefore {
		return unchanged(h, r.TokensBefore)
	}
	r.Changed = true
	r.FirstSeq, r.LastSeq = removedSeqs(h.Items, out)
	return r
}

// removedSeqs returns the lowest and highest SourceSeq of the input items
// out no longer holds. Strategies keep items as they are and in order, so
// one walk over both finds them by seq.
func removedSeqs(in, out []Item) (first, last int64) {
	j := 0
	for _, it := range in {
		if it.SourceSeq == 0 {
			continue
		}
		for j < len(out) && out[j].SourceSeq == 0 {
			j++
		}
		if j < len(out) && out[j].SourceSeq == it.SourceSeq {
			j++
			continue
		}
		if first == 0 {
			first = it.SourceSeq
		}
		last = it.SourceSeq
	}
	return first, last
}
