package compaction

import (
	"context"
	"strings"
)

// EchoLineChars bounds each line of an EchoSummarizer summary.
const EchoLineChars = 200

// EchoSummarizer is a deterministic Summarizer that needs no model: for the
// echo agent and for tests. Its summary has one line per message — the
// role, the first line of its text, the tools an assistant called — each cut
// to EchoLineChars bytes, and carries over the lines of an earlier summary
// whole. When that exceeds maxTokens it keeps the newest lines.
type EchoSummarizer struct{}

// Summarize implements Summarizer.
func (EchoSummarizer) Summarize(_ context.Context, items []Item, maxTokens int) (string, error) {
	var lines []string
	for _, it := range items {
		m := it.Message
		if IsSummary(it) {
			lines = append(lines, strings.Split(strings.TrimPrefix(m.Content.Text, SummaryPrefix), "\n")...)
			continue
		}
		line := string(m.Role) + ": " + firstLine(m.Content.PlainText())
		if calls := m.ToolCalls(); len(calls) > 0 {
			names := make([]string, len(calls))
			for i, c := range calls {
				names[i] = c.Name
			}
			line += " [called " + strings.Join(names, ", ") + "]"
		}
		lines = append(lines, truncate(line, EchoLineChars))
	}
	budget := (maxTokens-MessageTokens)*BytesPerToken - len(SummaryPrefix)
	size := 0
	first := len(lines)
	for first > 0 && size+len(lines[first-1])+1 <= budget {
		first--
		size += len(lines[first]) + 1
	}
	return strings.Join(lines[first:], "\n"), nil
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return strings.TrimSpace(s[:i])
	}
	return s
}
