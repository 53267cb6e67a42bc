package compaction

import (
	"encoding/json"
	"testing"

	"github.com/aapd/aapd/aap"
)

func TestWindow(t *testing.T) {
	t.Parallel()
	image := aap.Message{Role: aap.RoleUser, Content: aap.BlockContent(
		aap.TextBlock("what is this?"), aap.ContentBlock{Type: aap.BlockImage, URL: "data:image/png;base64," + text(100_000)})}
	tests := []struct {
		name   string
		items  []Item
		usage  Usage
		policy Policy
		want   string // shape of the result; "" for no change
	}{
		{
			name:   "under the threshold nothing changes",
			items:  hist(systemN(50), userN(100), assistantN(100)),
			policy: policy(StrategyWindow, 250, 100, 1),
		},
		{
			name:   "drops the oldest turns to the target and keeps the system prompt",
			items:  hist(systemN(50), userN(100), assistantN(100), userN(100), assistantN(100), userN(100), assistantN(100)),
			policy: policy(StrategyWindow, 600, 460, 2),
			want:   "S1 U4 A5 U6 A7",
		},
		{
			name:   "keeps every seeded system message that opens the history",
			items:  hist(systemN(50), systemN(50), userN(100), assistantN(100), userN(100), assistantN(100)),
			policy: policy(StrategyWindow, 400, 320, 2),
			want:   "S1 S2 U5 A6",
		},
		{
			name:   "puts the omitted placeholder first when the oldest kept is an assistant message",
			items:  hist(systemN(50), userN(100), assistantN(100), userN(100), assistantN(100), userN(100), assistantN(100)),
			policy: policy(StrategyWindow, 600, 400, 2),
			want:   "S1 omitted A5 U6 A7",
		},
		{
			name: "drops parallel tool calls with all their results",
			items: hist(userN(100), calls("a", "b"), resultN("a", 400), resultN("b", 400),
				assistantN(50), userN(20), assistantN(20)),
			policy: policy(StrategyWindow, 350, 250, 2),
			want:   "omitted A5 U6 A7",
		},
		{
			name:  "keeps a call with its results when the newest results are kept",
			items: hist(userN(300), assistantN(300), userN(20), calls("a", "b"), resultN("a", 40), resultN("b", 40)),
			// KeepLast 1 keeps T6, so its call A4 and T5 stay with it.
			policy: policy(StrategyWindow, 500, 200, 1),
			want:   "U3 A4 T5 T6",
		},
		{
			name:   "keeps an unresolved tool call at the end",
			items:  hist(userN(300), assistantN(300), userN(20), calls("a", "b"), resultN("a", 40)),
			policy: policy(StrategyWindow, 500, 60, 1),
			want:   "U3 A4 T5",
		},
		{
			name:   "keeps the newest messages even over the target",
			items:  hist(userN(300), assistantN(300), userN(300), assistantN(300)),
			policy: policy(StrategyWindow, 1000, 100, 2),
			want:   "U3 A4",
		},
		{
			name:   "changes nothing when the newest messages are all there is",
			items:  hist(systemN(50), userN(300), assistantN(300)),
			policy: policy(StrategyWindow, 500, 100, 5),
		},
		{
			name:   "counts an image at its fixed cost, not its URL's length",
			items:  hist(image, assistantN(10), userN(10), assistantN(10)),
			policy: policy(StrategyWindow, ImageTokens, 100, 2),
			want:   "omitted A2 U3 A4",
		},
		{
			name:   "compacts when the provider's report is over the threshold though the estimate is not",
			items:  hist(userN(100), assistantN(100), userN(100), assistantN(100)),
			usage:  Usage{InputTokens: 1_000, Items: 3},
			policy: policy(StrategyWindow, 900, 800, 1),
			want:   "omitted A4",
		},
		{
			name:   "ignores a report lower than the estimate",
			items:  hist(userN(100), assistantN(100), userN(100), assistantN(100)),
			usage:  Usage{InputTokens: 10, Items: 4},
			policy: policy(StrategyWindow, 350, 250, 1),
			want:   "U3 A4",
		},
		{
			name:   "does not replace a single small message by a bigger placeholder",
			items:  hist(userN(5), assistantN(300)),
			policy: policy(StrategyWindow, 200, 100, 1),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := History{Items: tt.items, Usage: tt.usage}
			r := compact(t, Window{}, h, tt.policy)
			if tt.want == "" {
				if r.Changed || shape(r.Items) != shape(tt.items) {
					t.Fatalf("changed to %s, want no change", shape(r.Items))
				}
				return
			}
			if !r.Changed {
				t.Fatalf("no change, want %s", tt.want)
			}
			if got := shape(r.Items); got != tt.want {
				t.Fatalf("got %s, want %s", got, tt.want)
			}
			if r.TokensBefore != Count(tt.items, tt.usage) || r.TokensAfter >= r.TokensBefore {
				t.Errorf("tokens %d -> %d, want %d -> less", r.TokensBefore, r.TokensAfter, Count(tt.items, tt.usage))
			}
		})
	}
}

func TestWindowResultAccounting(t *testing.T) {
	t.Parallel()
	items := hist(systemN(50), userN(100), assistantN(100), userN(100), assistantN(100), userN(100), assistantN(100))
	items[4].Extra = json.RawMessage(`{"signature":"abc"}`)
	r := compact(t, Window{}, History{Items: items}, policy(StrategyWindow, 600, 400, 2))
	if got := shape(r.Items); got != "S1 omitted A5 U6 A7" {
		t.Fatalf("got %s", got)
	}
	if r.Dropped != 3 || r.Pruned != 0 || r.Summarized != 0 {
		t.Errorf("dropped %d, pruned %d, summarized %d; want 3, 0, 0", r.Dropped, r.Pruned, r.Summarized)
	}
	if r.FirstSeq != 2 || r.LastSeq != 4 {
		t.Errorf("removed seqs %d..%d, want 2..4", r.FirstSeq, r.LastSeq)
	}
	if string(r.Items[2].Extra) != `{"signature":"abc"}` {
		t.Errorf("A5 lost its provider data: %s", r.Items[2].Extra)
	}
	if want := Estimate(r.Items); r.TokensAfter != want {
		t.Errorf("TokensAfter = %d, want %d", r.TokensAfter, want)
	}
	if r.TokensAfter > 400 {
		t.Errorf("TokensAfter = %d, over the target 400", r.TokensAfter)
	}
	if r.Items[1].Extra != nil || r.Items[1].SourceSeq != 0 {
		t.Errorf("the placeholder carries provider data or a source: %+v", r.Items[1])
	}
}
