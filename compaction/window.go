package compaction

import (
	"context"

	"github.com/aapd/aapd/aap"
)

// OmittedText is the user message that stands first in a window when the
// oldest message kept is not a user message (an assistant's answer or tool
// call whose question was dropped): providers such as Anthropic want the
// conversation to open with the user, and it tells the model that it is not
// seeing the beginning. The text is fixed so that compacting again leaves it
// as it is.
const OmittedText = "[Earlier messages were omitted to fit the context window.]"

// Window drops the oldest messages until the history is under the policy's
// target, whole units at a time: a message, or an assistant message that
// calls tools with the results answering it. It is the cheapest strategy and
// loses the most: what was dropped is gone from the model's view.
type Window struct{}

// Compact implements Strategy.
func (Window) Compact(_ context.Context, h History, p Policy) (Result, error) {
	l, before, extra, over, err := prepare(h, p)
	if !over {
		return unchanged(h, before), err
	}
	out, from := dropOldest(h.Items, l, before, p.Target)
	return finish(h, out, Result{TokensBefore: before, Dropped: from - l.head}, extra), nil
}

// prepare validates p and counts h (by Count), returning also what the
// provider's report adds to the estimate. Only a history over the threshold
// is laid out: over reports it.
func prepare(h History, p Policy) (l layout, tokens, extra int, over bool, err error) {
	extra = reportedExtra(h.Items, h.Usage)
	tokens = Estimate(h.Items) + extra
	if err := p.Validate(); err != nil || tokens <= p.Threshold {
		return layout{}, tokens, extra, false, err
	}
	return layoutOf(h.Items, p.KeepLast), tokens, extra, true, nil
}

// dropOldest removes the fewest oldest units of items (laid out by l, whose
// tokens are current) that bring the count from total to target or below —
// all of them if none does — and puts the OmittedText placeholder first when
// the kept part would not start with a user message. It returns the new
// items and the index in items where the kept part starts.
func dropOldest(items []Item, l layout, total, target int) ([]Item, int) {
	if l.units() == 0 {
		return items, l.head
	}
	omitted := omittedItem()
	omittedTokens := messageTokens(omitted.Message)
	c := l.cut(total, target, func(c int) int {
		if needsOmitted(items[l.starts[c]:]) {
			return omittedTokens
		}
		return 0
	})
	from := l.starts[c]
	out := make([]Item, 0, len(items)-from+l.head+1)
	out = append(out, items[:l.head]...)
	if needsOmitted(items[from:]) {
		out = append(out, omitted)
	}
	return append(out, items[from:]...), from
}

// cut returns the smallest number of removable units whose removal, with
// cost(c) tokens of replacement for c units, brings the count from total to
// target or below; all units if no number does.
func (l layout) cut(total, target int, cost func(c int) int) int {
	removed := 0
	for c := 1; c < l.units(); c++ {
		for i := l.starts[c-1]; i < l.starts[c]; i++ {
			removed += l.tokens[i]
		}
		if total-removed+cost(c) <= target {
			return c
		}
	}
	return l.units()
}

// needsOmitted reports whether a kept part would open, after any system
// messages, with something other than a user message.
func needsOmitted(kept []Item) bool {
	for _, it := range kept {
		if it.Message.Role != aap.RoleSystem {
			return it.Message.Role != aap.RoleUser
		}
	}
	return false
}

func omittedItem() Item { return Item{Message: aap.UserMessage(OmittedText)} }
