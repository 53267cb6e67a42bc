package compaction

import (
	"encoding/json"
	"testing"

	"github.com/aapd/aapd/aap"
)

func TestEstimate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		msg  aap.Message
		want int
	}{
		{"empty string content", aap.UserMessage(""), MessageTokens},
		{"string content, bytes rounded up", aap.UserMessage("hello"), MessageTokens + 2},
		{"multi-byte text counts bytes", aap.UserMessage("éé"), MessageTokens + 1},
		{"system message", aap.SystemMessage(text(400)), MessageTokens + 100},
		{"tool result counts its call id", aap.ToolMessage("call_1", text(10)), MessageTokens + 4},
		{"blocks: text and thinking", aap.AssistantMessage(aap.ThinkingBlock(text(8)), aap.TextBlock(text(8))),
			MessageTokens + 2*BlockTokens + 4},
		{"tool_use: id, name and input", aap.AssistantMessage(aap.ToolUseBlock(aap.ToolCall{
			ToolCallID: "c1", Name: "clock", Input: json.RawMessage(`{"tz":"UTC"}`)})),
			MessageTokens + BlockTokens + 5},
		{"images at a fixed cost", aap.Message{Role: aap.RoleUser, Content: aap.BlockContent(
			aap.ContentBlock{Type: aap.BlockImage, URL: "data:image/png;base64," + text(1<<20)},
			aap.ContentBlock{Type: aap.BlockImage, URL: "https://example.com/a.png"})},
			MessageTokens + 2*BlockTokens + 2*ImageTokens},
	}
	for _, tt := range tests {
		if got := Estimate([]Item{{Message: tt.msg}}); got != tt.want {
			t.Errorf("%s: Estimate = %d, want %d", tt.name, got, tt.want)
		}
	}
	all := make([]Item, len(tests))
	sum := 0
	for i, tt := range tests {
		all[i] = Item{Message: tt.msg, Extra: json.RawMessage(`{"signature":"` + text(4000) + `"}`)}
		sum += tt.want
	}
	if got := Estimate(all); got != sum {
		t.Errorf("Estimate of all = %d, want the sum %d (provider data not counted)", got, sum)
	}
}

func TestCount(t *testing.T) {
	t.Parallel()
	items := hist(userN(100), assistantN(100), userN(100), assistantN(100)) // 400 estimated
	tests := []struct {
		name  string
		usage Usage
		want  int
	}{
		{"no report: the estimate", Usage{}, 400},
		{"report for a prefix plus the estimate after it", Usage{InputTokens: 1_000, Items: 2}, 1_000 + 200},
		{"report for all", Usage{InputTokens: 1_000, Items: 4}, 1_000},
		{"a report below the estimate is ignored", Usage{InputTokens: 150, Items: 2}, 400},
		{"a report for more items than there are is ignored", Usage{InputTokens: 1_000, Items: 5}, 400},
		{"a report for no items is ignored", Usage{InputTokens: 1_000}, 400},
		{"a report of no tokens is ignored", Usage{Items: 3}, 400},
	}
	for _, tt := range tests {
		if got := Count(items, tt.usage); got != tt.want {
			t.Errorf("%s: Count = %d, want %d", tt.name, got, tt.want)
		}
	}
}

func TestNeeded(t *testing.T) {
	t.Parallel()
	items := hist(userN(100), assistantN(100), userN(100), assistantN(100))
	p := policy(StrategyWindow, 400, 300, 1)
	if Needed(History{Items: items}, p) {
		t.Error("Needed at exactly the threshold")
	}
	if !Needed(History{Items: items, Usage: Usage{InputTokens: 301, Items: 3}}, p) {
		t.Error("not Needed when the report puts the history over the threshold")
	}
	if !Needed(History{Items: append(items, hist(userN(5))...)}, p) {
		t.Error("not Needed over the threshold")
	}
}
