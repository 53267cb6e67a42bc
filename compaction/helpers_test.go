package compaction

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/aapd/aapd/aap"
)

// text returns a string of n bytes, so a string-content message of it
// estimates MessageTokens + n/BytesPerToken tokens.
func text(n int) string { return strings.Repeat("x", n) }

// userN and assistantN return messages that estimate exactly n tokens.
func userN(n int) aap.Message { return aap.UserMessage(text((n - MessageTokens) * BytesPerToken)) }
func assistantN(n int) aap.Message {
	return aap.Message{Role: aap.RoleAssistant, Content: aap.TextContent(text((n - MessageTokens) * BytesPerToken))}
}
func systemN(n int) aap.Message { return aap.SystemMessage(text((n - MessageTokens) * BytesPerToken)) }

// calls returns an assistant message calling a tool once per id.
func calls(ids ...string) aap.Message {
	blocks := []aap.ContentBlock{aap.TextBlock("Let me look.")}
	for _, id := range ids {
		blocks = append(blocks, aap.ToolUseBlock(aap.ToolCall{ToolCallID: id, Name: "lookup", Input: json.RawMessage(`{"q":"` + id + `"}`)}))
	}
	return aap.AssistantMessage(blocks...)
}

// resultN returns a tool result of n bytes of text.
func resultN(id string, n int) aap.Message { return aap.ToolMessage(id, text(n)) }

// hist numbers messages as a history fresh from the store: SourceSeq 1, 2…
func hist(msgs ...aap.Message) []Item {
	items := make([]Item, len(msgs))
	for i, m := range msgs {
		items[i] = Item{Message: m, SourceSeq: int64(i + 1)}
	}
	return items
}

// shape writes a history compactly: a role letter and SourceSeq per item
// (S1 U2 A3 T4), and what compaction wrote by name (omitted, summary,
// pruned:ID).
func shape(items []Item) string {
	parts := make([]string, len(items))
	for i, it := range items {
		m := it.Message
		switch {
		case it.SourceSeq != 0:
			parts[i] = fmt.Sprintf("%s%d", strings.ToUpper(string(m.Role[:1])), it.SourceSeq)
		case m.Role == aap.RoleUser && m.Content.Text == OmittedText:
			parts[i] = "omitted"
		case IsSummary(it):
			parts[i] = "summary"
		case m.Role == aap.RoleTool:
			parts[i] = "pruned:" + m.ToolCallID
		default:
			parts[i] = "new-" + string(m.Role)
		}
	}
	return strings.Join(parts, " ")
}

// policy returns a valid policy for tests.
func policy(s StrategyName, threshold, target, keepLast int) Policy {
	return Policy{Strategy: s, Threshold: threshold, Target: target, KeepLast: keepLast,
		PruneMinChars: 1_000, SummaryMaxTokens: MinSummaryMaxTokens}
}

// compact runs the named strategy, failing the test on error.
func compact(t testing.TB, s Strategy, h History, p Policy) Result {
	t.Helper()
	r, err := s.Compact(context.Background(), h, p)
	if err != nil {
		t.Fatalf("Compact: %v", err)
	}
	return r
}

// recorder is a fake Summarizer: it records what it was given and answers
// with a fixed summary or error, or with what next answers.
type recorder struct {
	mu        sync.Mutex
	calls     [][]Item
	maxTokens []int
	summary   string
	err       error
	next      Summarizer
}

func (r *recorder) Summarize(ctx context.Context, items []Item, maxTokens int) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, append([]Item(nil), items...))
	r.maxTokens = append(r.maxTokens, maxTokens)
	if r.err != nil {
		return "", r.err
	}
	if err := ctx.Err(); err != nil {
		return "", err
	}
	if r.summary != "" {
		return r.summary, nil
	}
	if r.next != nil {
		return r.next.Summarize(ctx, items, maxTokens)
	}
	return fmt.Sprintf("%d messages, from %s", len(items), shape(items)), nil
}

func sameItems(a, b []Item) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !sameItem(a[i], b[i]) {
			return false
		}
	}
	return true
}

// sameItem reports whether two items are identical: same source, same
// provider bytes and the same message (content form included).
func sameItem(a, b Item) bool {
	return a.SourceSeq == b.SourceSeq && bytes.Equal(a.Extra, b.Extra) && reflect.DeepEqual(a.Message, b.Message)
}
