package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aapd/aapd/store/storetest"
)

// Honest overload answers (docs/errors.md), against a real aapd process:
// a tenant that alone fills every worker is told it is over its fair
// share (429, its own doing, retry later) while another tenant is still
// served; only a server that can serve no one answers 503.
func TestOverloadAnswersFairShareToTheTenantAnd503OnlyWhenDraining(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	dbURL := storetest.NewDatabase(t)
	st := storetest.OpenURL(t, dbURL)
	keyA, keyB := storetest.NewTenant(t, st).Key, storetest.NewTenant(t, st).Key
	p := startProc(t, dbURL, "--workers", "2", "--shutdown-delay", "1s", "--drain-timeout", "10s")
	a := &client{t: t, base: p.base, key: keyA}
	b := &client{t: t, base: p.base, key: keyB}

	// A fills both workers with turns that would take minutes.
	var busy []*turnStream
	var busySID []string
	for range 2 {
		sid := a.echoSession(nil)
		ts := a.openTurn(sid, streamUser("delta", slowWords(3000, 50)))
		ts.read(1)
		busy, busySID = append(busy, ts), append(busySID, sid)
	}
	// A's next turn: 429 fair-share with Retry-After, not 503.
	a.turnRefusal(t, a.echoSession(nil), http.StatusTooManyRequests, "fair-share", true)
	// B is still served.
	if got := b.say(b.echoSession(nil), "hello").Messages[0].Content.PlainText(); got != "Echo: hello" {
		t.Fatalf("B's turn answered %q", got)
	}

	// Draining: a request under way when the process stops taking turns
	// is answered, and a turn it asks for is 503 unavailable. Each request
	// below sends its headers before SIGTERM (its handler runs, waiting
	// for the body) and its body after: a follower's stream ends just
	// before the runner stops (after --shutdown-delay), and from then on
	// A's turn is refused with 503 where it was 429.
	sids := make([]string, 20)
	for i := range sids {
		sids[i] = a.echoSession(nil)
	}
	follower := a.followTurn(busySID[0], busy[0].TurnID(), 0)
	pending := make([]*heldRequest, len(sids))
	for i := range pending {
		pending[i] = holdTurn(t, p.base, sids[i], keyA)
	}
	p.signal(syscall.SIGTERM)
	// It ends (or breaks, and aapclient would resume it elsewhere) when
	// the drain stops followers.
	_, _ = follower.tryRead(-1)
	var refused *http.Response
	var seen []int
	for _, h := range pending {
		res := h.finish(t)
		seen = append(seen, res.StatusCode)
		if res.StatusCode == http.StatusServiceUnavailable {
			refused = res
			break
		}
		if res.StatusCode != http.StatusTooManyRequests {
			t.Fatalf("a turn of A while draining: status %d, want 429 (before the runner stops) or 503", res.StatusCode)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if refused == nil {
		t.Fatalf("no turn was refused with 503 while draining: statuses %v", seen)
	}
	defer refused.Body.Close()
	var prob struct{ Type, Detail string }
	if err := json.NewDecoder(refused.Body).Decode(&prob); err != nil || prob.Type != problemType("unavailable") {
		t.Errorf("the 503 while draining: problem %+v (%v), want type %s", prob, err, problemType("unavailable"))
	}
	checkRetryAfter(t, response{Response: refused})
}

// heldRequest is a turn request whose headers were sent and whose body
// was not yet.
type heldRequest struct {
	conn net.Conn
	body string
}

// holdTurn sends the headers of a turn request on a connection of its own.
func holdTurn(t *testing.T, base, sid, key string) *heldRequest {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	body := `{"messages":[{"role":"user","content":"now?"}],"stream":"none"}`
	_, err = fmt.Fprintf(c, "POST /sessions/%s/turns HTTP/1.1\r\nHost: aapd\r\nAuthorization: Bearer %s\r\n"+
		"Content-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n", sid, key, len(body))
	if err != nil {
		t.Fatal(err)
	}
	return &heldRequest{conn: c, body: body}
}

// finish sends the body and reads the answer.
func (h *heldRequest) finish(t *testing.T) *http.Response {
	t.Helper()
	if err := h.conn.SetDeadline(time.Now().Add(20 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(h.conn, h.body); err != nil {
		t.Fatalf("send a held request's body: %v", err)
	}
	res, err := http.ReadResponse(bufio.NewReader(h.conn), nil)
	if err != nil {
		t.Fatalf("read a held request's answer: %v", err)
	}
	return res
}
