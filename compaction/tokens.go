package compaction

import "github.com/aapd/aapd/aap"

// The token estimate. Providers tokenize differently and aapd has no
// tokenizer for each, so the history is measured by a rule that is cheap,
// deterministic and errs on the high side for English and code.
const (
	// BytesPerToken: about 4 bytes of English or code make one token in
	// the tokenizers of GPT-4-class and Claude models.
	BytesPerToken = 4
	// MessageTokens is each message's own cost: its role and the framing a
	// provider wraps around it.
	MessageTokens = 4
	// BlockTokens is each content block's framing.
	BlockTokens = 2
	// ImageTokens is one image's cost, whatever its URL: providers charge
	// images by their pixels (Anthropic about 1,600 tokens for a 1.15
	// megapixel image, OpenAI 765 for a 1024×1024 one in high detail), so
	// counting the bytes of a data: URI would overstate it a hundredfold.
	ImageTokens = 1_600
)

// Estimate estimates the tokens a provider counts for items: for each
// message MessageTokens, plus BlockTokens per content block, plus ImageTokens
// per image, plus its text bytes divided by BytesPerToken, rounded up. Text
// bytes are those of its string content, text and thinking blocks, tool
// names, tool call ids and tool inputs (JSON). Item.Extra is not counted: it
// is the provider's own bookkeeping.
func Estimate(items []Item) int {
	n := 0
	for _, it := range items {
		n += messageTokens(it.Message)
	}
	return n
}

// Count counts the tokens of items using the provider's report u when there
// is one: u.InputTokens for the u.Items leading items the provider was sent,
// plus the estimate of the items appended since (its answer, tool results, a
// new user message). The report includes what the items do not — the system
// prompt and tool definitions — so it measures the model's whole input, and
// it corrects the estimate for languages and content the estimate
// misjudges.
//
// A report only ever raises the count: when the provider counts less than
// the estimate (some drop old thinking, say), the estimate stands, so a
// history compacted by the estimate is never compacted again because of a
// report. A report that cannot apply to items (no tokens, or more items
// than there are) is ignored.
func Count(items []Item, u Usage) int {
	return Estimate(items) + reportedExtra(items, u)
}

// reportedExtra is what the provider's report adds to the estimate of items:
// zero or more.
func reportedExtra(items []Item, u Usage) int {
	if u.InputTokens <= 0 || u.Items <= 0 || u.Items > len(items) {
		return 0
	}
	return max(0, int(u.InputTokens)-Estimate(items[:u.Items]))
}

// messageTokens is the estimate of one message.
func messageTokens(m aap.Message) int {
	textBytes := len(m.ToolCallID)
	tokens := MessageTokens
	if !m.Content.IsBlocks() {
		textBytes += len(m.Content.Text)
	}
	for _, b := range m.Content.Blocks {
		tokens += BlockTokens
		switch b.Type {
		case aap.BlockText:
			textBytes += len(b.Text)
		case aap.BlockThinking:
			textBytes += len(b.Thinking)
		case aap.BlockToolUse:
			textBytes += len(b.ToolCallID) + len(b.Name) + len(b.Input)
		case aap.BlockImage:
			tokens += ImageTokens
		}
	}
	return tokens + (textBytes+BytesPerToken-1)/BytesPerToken
}
