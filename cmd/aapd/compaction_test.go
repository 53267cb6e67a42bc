package main

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/aapclient"
	"github.com/aapd/aapd/agents/echo"
	"github.com/aapd/aapd/compaction"
)

// The echo agent compacts with DefaultCompaction: summarize over 4,000
// tokens, down to 2,400, keeping the newest 8 messages.

// chatter holds a conversation of n turns of long answers.
func chatter(c *client, sid string, n int) {
	c.t.Helper()
	for i := range n {
		c.say(sid, "/words 300\nturn "+string(rune('A'+i%26)))
	}
}

// awaitCompactions waits until the session has at least n compaction
// records. The automatic compaction follows a turn's answer, so a client
// that reads right after the answer may find it still running.
func awaitCompactions(t *testing.T, c *client, sid string, n int) []aapclient.Compaction {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		list := c.as(t).compactions(sid, 0)
		if len(list) >= n {
			return list
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d compactions after 10 s, want %d", len(list), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestCompactionAfterTurnKeepsFullHistoryExact(t *testing.T) {
	s := startServer(t)
	c := s.newTenant(t)
	sid := c.createSession(map[string]any{"agent": map[string]any{"name": "echo"},
		"messages": []any{map[string]any{"role": "system", "content": "You are terse."}}})
	chatter(c, sid, 12)
	list := awaitCompactions(t, c, sid, 1)

	full := c.history(sid, aap.HistoryFull)
	if len(full) != 1+2*12 {
		t.Fatalf("full history has %d messages, want %d", len(full), 1+2*12)
	}
	compacted := c.history(sid, aap.HistoryCompacted)
	if len(compacted) >= len(full) {
		t.Fatalf("no compaction: %d compacted messages", len(compacted))
	}
	if compacted[0].Role != aap.RoleSystem || compacted[0].Content.Text != "You are terse." {
		t.Errorf("system prompt lost: %+v", compacted[0])
	}
	if compacted[1].Role != aap.RoleUser || !strings.HasPrefix(compacted[1].Content.PlainText(), compaction.SummaryPrefix) {
		t.Errorf("no summary after the system prompt: %+v", compacted[1])
	}
	// The newest messages stay verbatim.
	keep := echo.DefaultCompaction.KeepLast
	for i := 1; i <= keep; i++ {
		a, b := full[len(full)-i], compacted[len(compacted)-i]
		if a.Role != b.Role || a.Content.PlainText() != b.Content.PlainText() {
			t.Errorf("newest message -%d changed: %+v vs %+v", i, a, b)
		}
	}
	rec := list[0]
	if rec.Trigger != "auto" || rec.Strategy != "summarize" || rec.TokensAfter >= rec.TokensBefore ||
		rec.FromSeq < 2 || rec.ToSeq < rec.FromSeq || rec.MessagesAfter >= rec.MessagesBefore {
		t.Errorf("record = %+v", rec)
	}
	// The model sees the compacted history: it still answers.
	if got := c.say(sid, "still there?").Messages[0].Content.PlainText(); got != "Echo: still there?" {
		t.Errorf("answer after compaction: %q", got)
	}
}

func TestManualCompaction(t *testing.T) {
	s := startServer(t)
	c := s.newTenant(t)
	sid := c.echoSession(nil)
	c.say(sid, "short")
	out := c.compact(sid)
	if out.Compacted || out.Reason == "" || out.Tokens == 0 {
		t.Errorf("compacting a short history: %+v", out)
	}
	chatter(c, sid, 5) // over the target, under the threshold: no automatic compaction
	before := len(c.history(sid, aap.HistoryCompacted))
	if before != 12 {
		t.Fatalf("compacted history has %d messages before the manual compaction", before)
	}
	if out = c.compact(sid); !out.Compacted || out.Compaction == nil || out.Compaction.Trigger != "manual" {
		t.Fatalf("manual compaction: %+v", out)
	}
	if after := len(c.history(sid, aap.HistoryCompacted)); after >= before || len(c.history(sid, aap.HistoryFull)) != 12 {
		t.Errorf("compacted %d → %d", before, after)
	}
	// Compacting twice in a row changes nothing the second time.
	again := c.history(sid, aap.HistoryCompacted)
	if out = c.compact(sid); out.Compacted {
		t.Errorf("second compaction changed something: %+v", out)
	}
	if now := c.history(sid, aap.HistoryCompacted); len(now) != len(again) {
		t.Errorf("second compaction: %d → %d messages", len(again), len(now))
	}
	// Running turns and other tenants are refused.
	c.openTurn(sid, streamUser("delta", slowWords(5, 60)))
	_, err := c.api().Compact(t.Context(), sid)
	refusal(t, err, http.StatusConflict, "turn-running")
	other := s.newTenant(t).api()
	_, err = other.Compact(t.Context(), sid)
	refusal(t, err, http.StatusNotFound, "not-found")
	_, err = other.Compactions(t.Context(), sid, 0)
	refusal(t, err, http.StatusNotFound, "not-found")
}

func TestCompactionKeepsAnUnresolvedToolCall(t *testing.T) {
	s := startServer(t)
	c := s.newTenant(t)
	sid := c.echoSession(nil, "lookup")
	chatter(c, sid, 5)
	calls := toolCalls(c.say(sid, "/tool lookup {\"q\":\"x\"}").Messages)
	if out := c.compact(sid); !out.Compacted {
		t.Fatalf("no compaction: %+v", out)
	}
	h := c.history(sid, aap.HistoryCompacted)
	last := h[len(h)-1]
	if got := last.ToolCalls(); len(got) != 1 || got[0].ToolCallID != calls[0].ToolCallID {
		t.Fatalf("the pending call is not last in the compacted history: %+v", last)
	}
	resp := c.turn(sid, map[string]any{"messages": []any{map[string]any{"role": "tool", "toolCallId": calls[0].ToolCallID, "content": "found"}}})
	if resp.Messages[0].Content.PlainText() != "Tool results: lookup: found" {
		t.Errorf("after the result: %+v", resp)
	}
}
