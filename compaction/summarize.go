package compaction

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/aapd/aapd/aap"
)

// SummaryPrefix opens the summary message, so the model reads it as an
// account of what came before rather than as a new request.
const SummaryPrefix = "Summary of the earlier conversation:\n\n"

// Summarizer writes the summary that replaces the oldest part of a history.
// In aapd the agents package adapts the agent's own model to it; tests and
// the echo agent use EchoSummarizer.
type Summarizer interface {
	// Summarize returns a summary of items in at most about maxTokens tokens
	// (by Estimate's rule; a longer one is cut). items are whole units — a
	// tool call always comes with its results — but need not open with a
	// user message, and may include an earlier summary (a user message
	// starting with SummaryPrefix, SourceSeq 0) whose facts should carry
	// over. A model-backed summarizer should therefore show them to the
	// model as a transcript to summarize, not as the conversation to
	// continue. Summarize must not modify items.
	Summarize(ctx context.Context, items []Item, maxTokens int) (string, error)
}

// Summarize replaces the oldest messages with one summary message, so their
// facts survive in far fewer tokens: the fewest oldest units that, with a
// summary of Policy.SummaryMaxTokens, get the history under the target (all
// that may be removed if none do). Each compaction summarizes the previous
// summary along with what follows it, so one summary rolls forward.
//
// The summary is a user message starting with SummaryPrefix, placed where
// the messages it replaces were, and carries SourceSeq 0. Not a system
// message: Anthropic's Messages API has no system role among messages and
// would have to move it, and a summary quotes the users and tools of the
// conversation, which must not gain a system prompt's authority. Not an
// assistant message: Anthropic wants the conversation to open with a user
// message. A user message is valid first for every provider, and whatever
// was kept after it — a user message (consecutive user messages are accepted
// and merged), an assistant message, or its tool calls with their results —
// follows it validly.
//
// When the Summarizer fails, Compact returns its error and no change.
type Summarize struct {
	Summarizer Summarizer
}

// Compact implements Strategy.
func (s Summarize) Compact(ctx context.Context, h History, p Policy) (Result, error) {
	l, before, extra, over, err := prepare(h, p)
	if !over || l.units() == 0 {
		return unchanged(h, before), err
	}
	c := l.cut(before, p.Target, func(int) int { return p.SummaryMaxTokens })
	from := l.starts[c]
	replaced := h.Items[l.head:from:from]
	// Summarize only what is longer than a summary may be. This also leaves
	// alone an earlier summary that is all there is to remove, as it was
	// cut to that length: compacting again is a no-op.
	tokens := 0
	for _, t := range l.tokens[l.head:from] {
		tokens += t
	}
	if tokens <= p.SummaryMaxTokens {
		return unchanged(h, before), nil
	}
	text, err := s.Summarizer.Summarize(ctx, replaced, p.SummaryMaxTokens)
	if err != nil {
		return unchanged(h, before), fmt.Errorf("compaction: summarize %d messages: %w", len(replaced), err)
	}
	text = strings.TrimSpace(text)
	if text == "" {
		return unchanged(h, before), errors.New("compaction: the summarizer returned an empty summary")
	}
	out := make([]Item, 0, l.head+1+len(h.Items)-from)
	out = append(out, h.Items[:l.head]...)
	out = append(out, summaryItem(text, p.SummaryMaxTokens))
	out = append(out, h.Items[from:]...)
	return finish(h, out, Result{TokensBefore: before, Summarized: len(replaced)}, extra), nil
}

// summaryItem is the summary message, its text cut so that the message
// counts at most maxTokens.
func summaryItem(text string, maxTokens int) Item {
	limit := (maxTokens-MessageTokens)*BytesPerToken - len(SummaryPrefix)
	return Item{Message: aap.UserMessage(SummaryPrefix + truncate(text, limit))}
}

// IsSummary reports whether it is a summary compaction wrote.
func IsSummary(it Item) bool {
	return it.SourceSeq == 0 && it.Message.Role == aap.RoleUser && !it.Message.Content.IsBlocks() &&
		strings.HasPrefix(it.Message.Content.Text, SummaryPrefix)
}

// ellipsis ends a cut text.
const ellipsis = "…"

// truncate cuts s to at most limit bytes, on a character boundary, ending it
// with an ellipsis when it cuts.
func truncate(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	cut := max(0, limit-len(ellipsis))
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + ellipsis
}
