package main

import (
	"bufio"
	"bytes"
	"encoding/json"
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

	// Draining: connections opened before the listener closes may still
	// send a request, and a turn on one after the process stopped taking
	// turns is 503 unavailable. A follower's stream ends just before the
	// runner stops (after --shutdown-delay): from then on, A's turn is
	// refused with 503 where it was 429.
	sids := make([]string, 20)
	for i := range sids {
		sids[i] = a.echoSession(nil)
	}
	follower := a.followTurn(busySID[0], busy[0].TurnID(), 0)
	conns := make([]net.Conn, len(sids))
	for i := range conns {
		c, err := net.Dial("tcp", strings.TrimPrefix(p.base, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		conns[i] = c
	}
	p.signal(syscall.SIGTERM)
	if _, err := follower.tryRead(-1); err == nil {
		t.Fatal("the follower's stream ended with its turn, not at the drain")
	}
	var refused *http.Response
	var seen []int
	for i, c := range conns {
		res := rawTurn(t, c, p.base, sids[i], keyA)
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

// rawTurn sends one turn request on a connection opened earlier and reads
// its answer: the connection, not a client's pool, is what a draining
// server still serves.
func rawTurn(t *testing.T, c net.Conn, base, sid, key string) *http.Response {
	t.Helper()
	req, err := http.NewRequest("POST", base+"/sessions/"+sid+"/turns", bytes.NewReader([]byte(`{"messages":[{"role":"user","content":"now?"}],"stream":"none"}`)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	req.Close = true
	if err := c.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := req.Write(c); err != nil {
		t.Fatalf("write a turn on an open connection: %v", err)
	}
	res, err := http.ReadResponse(bufio.NewReader(c), req)
	if err != nil {
		t.Fatalf("read the answer on an open connection: %v", err)
	}
	return res
}
