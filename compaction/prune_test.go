package compaction

import (
	"testing"

	"github.com/aapd/aapd/aap"
)

func TestPruneToolResults(t *testing.T) {
	t.Parallel()
	imageResult := aap.Message{Role: aap.RoleTool, ToolCallID: "i", Content: aap.BlockContent(
		aap.TextBlock("a chart"), aap.ContentBlock{Type: aap.BlockImage, URL: "https://example.com/chart.png"})}
	tests := []struct {
		name   string
		items  []Item
		policy Policy
		want   string // shape of the result; "" for no change
	}{
		{
			name: "prunes the oldest bulky result first, and only what it takes",
			items: hist(userN(20), calls("a"), resultN("a", 4_000), assistantN(20),
				userN(20), calls("b"), resultN("b", 4_000), assistantN(20), userN(20), assistantN(20)),
			policy: policy(StrategyPruneToolResults, 2_000, 1_500, 2),
			want:   "U1 A2 pruned:a A4 U5 A6 T7 A8 U9 A10",
		},
		{
			name: "prunes every bulky result outside the newest when needed",
			items: hist(userN(20), calls("a"), resultN("a", 4_000), assistantN(20),
				userN(20), calls("b"), resultN("b", 4_000), assistantN(20), userN(20), assistantN(20)),
			policy: policy(StrategyPruneToolResults, 2_000, 500, 2),
			want:   "U1 A2 pruned:a A4 U5 A6 pruned:b A8 U9 A10",
		},
		{
			name: "drops rather than prune small results or the newest results",
			items: hist(userN(20), calls("a"), resultN("a", 900), assistantN(20),
				userN(20), calls("b"), resultN("b", 4_000)),
			policy: policy(StrategyPruneToolResults, 1_000, 900, 3),
			want:   "U5 A6 T7",
		},
		{
			name: "prunes parallel results in place, each keeping its call id",
			items: hist(userN(20), calls("a", "b", "c"), resultN("a", 4_000), resultN("b", 10), resultN("c", 4_000),
				assistantN(20), userN(20), assistantN(20)),
			policy: policy(StrategyPruneToolResults, 1_000, 500, 2),
			want:   "U1 A2 pruned:a T4 pruned:c A6 U7 A8",
		},
		{
			name:   "prunes a result with an image, however short its text",
			items:  hist(userN(20), calls("i"), imageResult, assistantN(20), userN(20), assistantN(20)),
			policy: policy(StrategyPruneToolResults, 1_000, 500, 2),
			want:   "U1 A2 pruned:i A4 U5 A6",
		},
		{
			name:   "prunes a result with an image under a large prune_min_chars",
			items:  hist(userN(20), calls("i"), imageResult, assistantN(20), userN(20), assistantN(20)),
			policy: Policy{Strategy: StrategyPruneToolResults, Threshold: 1_000, Target: 500, KeepLast: 2, PruneMinChars: 20_000},
			want:   "U1 A2 pruned:i A4 U5 A6",
		},
		{
			name: "drops the oldest when pruning is not enough",
			items: hist(userN(200), calls("a"), resultN("a", 4_000), assistantN(200),
				userN(200), assistantN(200), userN(20), assistantN(20)),
			policy: policy(StrategyPruneToolResults, 1_000, 500, 2),
			want:   "U5 A6 U7 A8",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := compact(t, PruneToolResults{}, History{Items: tt.items}, tt.policy)
			if tt.want == "" {
				if r.Changed || shape(r.Items) != shape(tt.items) {
					t.Fatalf("changed to %s, want no change", shape(r.Items))
				}
				return
			}
			if got := shape(r.Items); !r.Changed || got != tt.want {
				t.Fatalf("got %s (changed %v), want %s", got, r.Changed, tt.want)
			}
		})
	}
}

func TestPrunedResultSaysWhatWasThere(t *testing.T) {
	t.Parallel()
	items := hist(userN(20), calls("a"), aap.ToolMessage("a", text(12_344)+"é"), assistantN(20), userN(20), assistantN(20))
	r := compact(t, PruneToolResults{}, History{Items: items}, policy(StrategyPruneToolResults, 2_000, 1_000, 2))
	if r.Pruned != 1 || r.Dropped != 0 || r.FirstSeq != 3 || r.LastSeq != 3 {
		t.Fatalf("pruned %d, dropped %d, removed seqs %d..%d; want 1, 0, 3..3", r.Pruned, r.Dropped, r.FirstSeq, r.LastSeq)
	}
	got := r.Items[2]
	want := aap.ToolMessage("a", "[tool result pruned: 12,345 characters]")
	if !sameItem(got, Item{Message: want}) {
		t.Fatalf("pruned result = %+v, want %+v with no source or provider data", got, want)
	}
}

func TestPruneLeavesPlaceholdersCompactionWrote(t *testing.T) {
	t.Parallel()
	items := hist(userN(20), calls("b"), resultN("b", 5_000), assistantN(20),
		userN(20), calls("c"), resultN("c", 4_000), assistantN(20), userN(20), assistantN(20))
	// An earlier compaction pruned b's result.
	written := Item{Message: aap.ToolMessage("b", PrunedText(5_000, 0))}
	items[2] = written
	// Every result is bulky by this policy, the placeholder included: it
	// must stay as it is, saying how much the original result held.
	p := policy(StrategyPruneToolResults, 1_000, 500, 2)
	p.PruneMinChars = 1
	r := compact(t, PruneToolResults{}, History{Items: items}, p)
	if got, want := shape(r.Items), "U1 A2 pruned:b A4 U5 A6 pruned:c A8 U9 A10"; got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
	if !sameItem(r.Items[2], written) {
		t.Errorf("the earlier placeholder became %q", r.Items[2].Message.Content.Text)
	}
	if r.Pruned != 1 {
		t.Errorf("Pruned = %d, want 1", r.Pruned)
	}
}

func TestPrunedText(t *testing.T) {
	t.Parallel()
	tests := []struct {
		chars, images int
		want          string
	}{
		{0, 0, "[tool result pruned: 0 characters]"},
		{1, 0, "[tool result pruned: 1 character]"},
		{999, 0, "[tool result pruned: 999 characters]"},
		{1_000, 0, "[tool result pruned: 1,000 characters]"},
		{1_234_567, 0, "[tool result pruned: 1,234,567 characters]"},
		{0, 1, "[tool result pruned: 1 image]"},
		{2_500, 2, "[tool result pruned: 2,500 characters and 2 images]"},
	}
	for _, tt := range tests {
		if got := PrunedText(tt.chars, tt.images); got != tt.want {
			t.Errorf("PrunedText(%d, %d) = %q, want %q", tt.chars, tt.images, got, tt.want)
		}
	}
}
