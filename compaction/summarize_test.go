package compaction

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aapd/aapd/aap"
)

func TestSummarizeReplacesOldestWithOneUserMessage(t *testing.T) {
	t.Parallel()
	items := hist(systemN(50), userN(200), calls("a", "b"), resultN("a", 800), resultN("b", 800),
		assistantN(200), userN(200), assistantN(200), userN(20), assistantN(20))
	s := &recorder{summary: "The user asked twice; lookups a and b found the answer."}
	p := policy(StrategySummarize, 1_000, 600, 2)
	r := compact(t, Summarize{Summarizer: s}, History{Items: items}, p)

	if got, want := shape(r.Items), "S1 summary U7 A8 U9 A10"; got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
	if len(s.calls) != 1 {
		t.Fatalf("summarizer called %d times, want 1", len(s.calls))
	}
	if got, want := shape(s.calls[0]), "U2 A3 T4 T5 A6"; got != want {
		t.Errorf("summarizer got %s, want %s: the replaced messages, tool calls with their results", got, want)
	}
	if s.maxTokens[0] != p.SummaryMaxTokens {
		t.Errorf("summarizer asked for %d tokens, want %d", s.maxTokens[0], p.SummaryMaxTokens)
	}
	summary := r.Items[1]
	want := aap.UserMessage(SummaryPrefix + s.summary)
	if !sameItem(summary, Item{Message: want}) {
		t.Errorf("summary = %+v, want %+v with no source or provider data", summary, want)
	}
	if r.Summarized != 5 || r.Dropped != 0 || r.FirstSeq != 2 || r.LastSeq != 6 {
		t.Errorf("summarized %d, dropped %d, removed seqs %d..%d; want 5, 0, 2..6", r.Summarized, r.Dropped, r.FirstSeq, r.LastSeq)
	}
	if r.TokensAfter > p.Target {
		t.Errorf("TokensAfter = %d, over the target %d", r.TokensAfter, p.Target)
	}
}

func TestSummarizeRollsTheEarlierSummaryForward(t *testing.T) {
	t.Parallel()
	earlier := summaryItem("The user's name is Ada.", 200)
	items := append([]Item{earlier}, hist(userN(300), assistantN(300), userN(300), assistantN(300), userN(20), assistantN(20))...)
	s := &recorder{}
	r := compact(t, Summarize{Summarizer: s}, History{Items: items}, policy(StrategySummarize, 1_000, 400, 2))
	if got, want := shape(r.Items), "summary U5 A6"; got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
	if len(s.calls) != 1 || !sameItem(s.calls[0][0], earlier) {
		t.Fatalf("summarizer was not given the earlier summary first: %v", s.calls)
	}
}

func TestSummarizeLeavesAnEarlierSummaryAlone(t *testing.T) {
	t.Parallel()
	// Over the threshold, but only an earlier summary, within
	// summary_max_tokens, precedes the newest messages: summarizing it again
	// would change without shrinking.
	p := policy(StrategySummarize, 1_000, 400, 2)
	items := append([]Item{summaryItem(text(1_000), p.SummaryMaxTokens)}, hist(userN(600), assistantN(600))...)
	s := &recorder{}
	r := compact(t, Summarize{Summarizer: s}, History{Items: items}, p)
	if r.Changed || len(s.calls) != 0 {
		t.Fatalf("changed %v to %s after %d summarizer calls; want no change and no call", r.Changed, shape(r.Items), len(s.calls))
	}
}

func TestSummarizeShortensAnEarlierSummaryOverTheLimit(t *testing.T) {
	t.Parallel()
	// The policy's summary_max_tokens was lowered since the summary was
	// written: rewriting it is the only way left to shrink the history.
	p := policy(StrategySummarize, 1_000, 400, 2)
	earlier := summaryItem(text(4_000), 2_000)
	items := append([]Item{earlier}, hist(userN(600), assistantN(600))...)
	s := &recorder{summary: "shorter"}
	r := compact(t, Summarize{Summarizer: s}, History{Items: items}, p)
	if got, want := shape(r.Items), "summary U1 A2"; !r.Changed || got != want {
		t.Fatalf("got %s (changed %v), want %s", got, r.Changed, want)
	}
	if r.Items[0].Message.Content.Text != SummaryPrefix+"shorter" || r.FirstSeq != 0 || r.Summarized != 1 {
		t.Errorf("summary %q, removed seqs from %d, summarized %d; want the new summary, none, 1",
			r.Items[0].Message.Content.Text, r.FirstSeq, r.Summarized)
	}
}

func TestSummarizeSkipsWhatASummaryCannotShrink(t *testing.T) {
	t.Parallel()
	// The removable part is smaller than the summary may be.
	items := hist(userN(50), assistantN(50), userN(600), assistantN(600))
	s := &recorder{}
	r := compact(t, Summarize{Summarizer: s}, History{Items: items}, policy(StrategySummarize, 1_000, 400, 2))
	if r.Changed || len(s.calls) != 0 {
		t.Fatalf("changed %v to %s after %d summarizer calls; want no change and no call", r.Changed, shape(r.Items), len(s.calls))
	}
}

func TestSummarizeCutsALongSummary(t *testing.T) {
	t.Parallel()
	items := hist(userN(500), assistantN(500), userN(20), assistantN(20))
	s := &recorder{summary: strings.Repeat("é", 10_000)}
	p := policy(StrategySummarize, 1_000, 400, 2)
	r := compact(t, Summarize{Summarizer: s}, History{Items: items}, p)
	summary := r.Items[0].Message.Content.Text
	if got := Estimate(r.Items[:1]); got > p.SummaryMaxTokens {
		t.Errorf("summary estimates %d tokens, over summary_max_tokens %d", got, p.SummaryMaxTokens)
	}
	if !strings.HasPrefix(summary, SummaryPrefix+"é") || !strings.HasSuffix(summary, "é"+ellipsis) {
		t.Errorf("summary not cut on a character with an ellipsis: %q", summary)
	}
}

func TestSummarizeFailureChangesNothing(t *testing.T) {
	t.Parallel()
	items := hist(userN(500), assistantN(500), userN(20), assistantN(20))
	p := policy(StrategySummarize, 1_000, 400, 2)
	boom := errors.New("model unavailable")
	tests := []struct {
		name    string
		s       *recorder
		ctx     context.Context
		wantErr error
	}{
		{name: "summarizer error", s: &recorder{err: boom}, ctx: context.Background(), wantErr: boom},
		{name: "empty summary", s: &recorder{summary: " \n "}, ctx: context.Background()},
		{name: "cancelled context reaches the summarizer", s: &recorder{}, ctx: cancelled(), wantErr: context.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r, err := Summarize{Summarizer: tt.s}.Compact(tt.ctx, History{Items: items}, p)
			if err == nil || tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if r.Changed || !sameItems(r.Items, items) || r.TokensAfter != r.TokensBefore {
				t.Errorf("result changed on error: %s, tokens %d -> %d", shape(r.Items), r.TokensBefore, r.TokensAfter)
			}
			if len(tt.s.calls) != 1 {
				t.Errorf("summarizer called %d times, want 1", len(tt.s.calls))
			}
		})
	}
}

func cancelled() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

func TestEchoSummarizer(t *testing.T) {
	t.Parallel()
	items := []Item{summaryItem("Earlier: the user is Ada.\nShe likes tea.", 200)}
	items = append(items, hist(
		aap.SystemMessage("Be brief."),
		aap.UserMessage("What time is it?\nPlease be exact."),
		calls("a", "b"),
		aap.ToolMessage("a", "12:00"),
		aap.ToolMessage("b", "UTC"),
		aap.Message{Role: aap.RoleAssistant, Content: aap.TextContent("It is noon UTC.")},
		aap.UserMessage(text(500)),
	)...)
	got, err := EchoSummarizer{}.Summarize(context.Background(), items, 500)
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Join([]string{
		"Earlier: the user is Ada.",
		"She likes tea.",
		"system: Be brief.",
		"user: What time is it?",
		"assistant: Let me look. [called lookup, lookup]",
		"tool: 12:00",
		"tool: UTC",
		"assistant: It is noon UTC.",
		truncate("user: "+text(500), EchoLineChars),
	}, "\n")
	if got != want {
		t.Errorf("summary:\n%s\nwant:\n%s", got, want)
	}

	// Over its budget it keeps the newest lines.
	short, _ := EchoSummarizer{}.Summarize(context.Background(), items, MinSummaryMaxTokens)
	if !strings.HasSuffix(want, short) || strings.Contains(short, "Ada") {
		t.Errorf("short summary %q is not the newest lines of the full one", short)
	}
	if n := Estimate([]Item{summaryItem(short, 1<<20)}); n > MinSummaryMaxTokens {
		t.Errorf("short summary estimates %d tokens, over %d", n, MinSummaryMaxTokens)
	}
}
