package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/aapclient"
	"github.com/aapd/aapd/compaction"
	"github.com/aapd/aapd/httpapi"
)

// compactBurst fires n concurrent compactions of sid through aapclient,
// spread over the clients (one per replica), and checks every answer is a
// 200 or a 409 saying when to retry (the OpenAPI check holds Retry-After
// to whole seconds). It returns how many of them compacted.
func compactBurst(t *testing.T, sid string, n int, clients ...*client) (compacted int) {
	t.Helper()
	apis := make([]*aapclient.Client, len(clients))
	for i, c := range clients {
		apis[i] = c.api()
	}
	answers := make([]aapclient.CompactResult, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { answers[i], errs[i] = apis[i%len(apis)].Compact(context.Background(), sid) })
	}
	wg.Wait()
	for i, out := range answers {
		var e *aapclient.Error
		switch {
		case errs[i] == nil:
			if out.Compacted {
				compacted++
			}
		case !errors.As(errs[i], &e):
			t.Fatalf("compact %d: %v", i, errs[i])
		case e.Status != http.StatusConflict:
			t.Errorf("compact %d: status %d, want 200 or 409: %v", i, e.Status, e)
		default:
			if e.RetryAfter <= 0 {
				t.Errorf("compact %d: 409 without Retry-After: %v", i, e)
			}
			if e.Type != httpapi.ProblemTypeBase+"compaction-conflict" && e.Type != httpapi.ProblemTypeBase+"turn-running" {
				t.Errorf("compact %d: 409 of type %q: %v", i, e.Type, e)
			}
		}
	}
	return compacted
}

// Compactions of one session sent at once — to one replica, to two, and
// right after a turn while the automatic compaction runs — never fail with
// a 5xx (they used to: "the compacted history changed since it was read"),
// and leave a compacted history the model can use.
func TestConcurrentCompactsNeverFail(t *testing.T) {
	s := startServer(t)
	other := startServer(t) // a second replica on the same database
	c := s.newTenant(t)
	c2 := &client{t: t, base: other.base, key: c.key}
	sid := c.createSession(map[string]any{"agent": map[string]any{"name": "echo"},
		"messages": []any{map[string]any{"role": "system", "content": "You are terse."}}})
	turns := 6
	chatter(c, sid, turns) // over the target, under the threshold

	// One replica: the compactions wait for each other, and only the first
	// has anything to do.
	if n := compactBurst(t, sid, 12, c); n != 1 {
		t.Errorf("%d compactions compacted, want 1", n)
	}
	if list := c.compactions(sid, 0); len(list) != 1 || list[0].Trigger != "manual" {
		t.Fatalf("compactions after one burst: %+v", list)
	}

	// Two replicas, and manual compactions racing the automatic one after
	// each turn (each of these turns passes the threshold).
	for i := range 8 {
		c.say(sid, "/words 700\nmore "+strconv.Itoa(i))
		turns++
		compactBurst(t, sid, 6, c, c2)
	}
	checkCompactedHistory(t, c, sid, turns)
	if got := c.say(sid, "still there?").Messages[0].Content.PlainText(); got != "Echo: still there?" {
		t.Errorf("answer after the compactions: %q", got)
	}
}

// checkCompactedHistory checks what every compaction must leave: the full
// history whole, and a compacted history that is the system prompt, one
// summary, and the newest messages of the full history word for word; and
// a record for each compaction that lowered the count.
func checkCompactedHistory(t *testing.T, c *client, sid string, turns int) {
	t.Helper()
	full := c.history(sid, aap.HistoryFull)
	if len(full) != 1+2*turns {
		t.Fatalf("full history has %d messages, want %d", len(full), 1+2*turns)
	}
	compacted := c.history(sid, aap.HistoryCompacted)
	if len(compacted) < 3 || len(compacted) >= len(full) {
		t.Fatalf("compacted history has %d messages (full: %d)", len(compacted), len(full))
	}
	if compacted[0].Role != aap.RoleSystem || compacted[0].Content.Text != "You are terse." {
		t.Errorf("system prompt lost: %+v", compacted[0])
	}
	if compacted[1].Role != aap.RoleUser || !strings.HasPrefix(compacted[1].Content.PlainText(), compaction.SummaryPrefix) {
		t.Errorf("no summary after the system prompt: %+v", compacted[1])
	}
	tail := full[len(full)-(len(compacted)-2):]
	for i, m := range compacted[2:] {
		if m.Role != tail[i].Role || m.Content.PlainText() != tail[i].Content.PlainText() {
			t.Errorf("compacted message %d is not the full history's %d: %s vs %s",
				i+2, len(full)-len(tail)+i, describe(m), describe(tail[i]))
		}
	}
	for _, rec := range c.compactions(sid, 100) {
		if rec.TokensAfter >= rec.TokensBefore || rec.MessagesAfter >= rec.MessagesBefore || rec.ToSeq < rec.FromSeq {
			t.Errorf("record = %+v", rec)
		}
	}
}

func describe(m aap.Message) string {
	text := m.Content.PlainText()
	if len(text) > 40 {
		text = text[:40] + "…"
	}
	return fmt.Sprintf("%s %q", m.Role, text)
}
