package main

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/httpapi/agui"
	"github.com/aapd/aapd/store"
)

// aguiAbortGrace is how long a thread's run waits for its previous run to
// end before it is refused as running (httpapi/agui's previousRunWait,
// docs/protocols.md "Aborting a run").
const aguiAbortGrace = 5 * time.Second

// An AG-UI run aborted on one aapd process (its client closes the
// connection) is stopped there, and the thread's next run, sent at once to
// another process, waits for it within the grace instead of being refused
// as running: two real processes on one database, which share nothing but
// it. The history, read from either process, holds the aborted answer as
// far as it went and the next run's exchange, message by message.
func TestAGUIAbortOnOneProcessFreesTheThreadOnAnother(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	dbURL, key := processTenant(t)
	a, b := startProc(t, dbURL), startProc(t, dbURL)
	ca, cb := &client{t: t, base: a.base, key: key}, &client{t: t, base: b.base, key: key}

	// 1,000 words, one every 50 ms: the run would go on for 50 s.
	const long = "/slow 50\n/words 1000"
	res, sc, sid, turnID := ca.startAGUIRun("t-abort", long)
	if sid == "" || turnID == "" {
		t.Fatalf("the run names session %q, turn %q", sid, turnID)
	}
	for said := 0; said < 4 && sc.Scan(); { // a few words said
		if strings.Contains(sc.Text(), agui.TextMessageContent) {
			said++
		}
	}
	res.Body.Close() // the abort, on process a
	aborted := time.Now()

	next := cb.runAGUI("echo", map[string]any{"threadId": "t-abort",
		"messages": []any{aguiUser("u1", long), aguiUser("u2", "next")}})
	took := time.Since(aborted)
	next.expect(t, http.StatusOK)
	if next.last().Type() != agui.RunFinished {
		t.Fatalf("the next run, on process b: %v", next.types())
	}
	if took >= aguiAbortGrace {
		t.Errorf("the next run ended %s after the abort, not within the grace (%s)", took, aguiAbortGrace)
	}

	var turn struct{ Status string }
	cb.do("GET", "/sessions/"+sid+"/turns/"+turnID, nil).expect(t, http.StatusOK).json(t, &turn)
	if turn.Status != string(store.TurnCancelled) {
		t.Fatalf("the aborted turn is %q, want cancelled", turn.Status)
	}

	// The aborted run stopped: what it said stays as it was.
	first := cb.history(sid, aap.HistoryFull)
	time.Sleep(300 * time.Millisecond) // six more words, had it gone on
	for _, c := range []*client{ca, cb} {
		h := c.history(sid, aap.HistoryFull)
		if len(h) != 4 {
			t.Fatalf("history read from %s: %d messages, want 4: %v", c.base, len(h), h)
		}
		if h[0].Role != aap.RoleUser || h[0].Content.PlainText() != long {
			t.Errorf("message 1 (from %s): %s %q, want the user's first message", c.base, h[0].Role, h[0].Content.PlainText())
		}
		partial := h[1].Content.PlainText()
		if h[1].Role != aap.RoleAssistant || !strings.Contains(partial, "word1 word2 word3") || strings.Contains(partial, "word1000") {
			t.Errorf("message 2 (from %s): %s %q, want the aborted answer cut short", c.base, h[1].Role, partial)
		}
		if partial != first[1].Content.PlainText() {
			t.Errorf("message 2 (from %s) grew after the abort: %q, then %q", c.base, first[1].Content.PlainText(), partial)
		}
		if h[2].Role != aap.RoleUser || h[2].Content.PlainText() != "next" {
			t.Errorf("message 3 (from %s): %s %q, want the user's %q", c.base, h[2].Role, h[2].Content.PlainText(), "next")
		}
		if h[3].Role != aap.RoleAssistant || !strings.HasSuffix(h[3].Content.PlainText(), "next") {
			t.Errorf("message 4 (from %s): %s %q, want the echo of %q", c.base, h[3].Role, h[3].Content.PlainText(), "next")
		}
	}
}
