package main

import (
	"bufio"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/aapd/aapd/aap"
)

// Defect 8: shutdown was held for 37–40 s by streams that never ended. On
// SIGTERM, /readyz fails at once while the listener keeps serving for
// --shutdown-delay; then streams that only follow a turn end where they are,
// and turns running here drain within --drain-timeout.
func TestShutdownFailsReadinessAtOnceEndsFollowersThenDrains(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	dbURL, key := processTenant(t)
	a := startProc(t, dbURL, "--shutdown-delay", "1s", "--drain-timeout", "2s")
	c := &client{t: t, base: a.base, key: key}
	sid := c.echoSession(nil)
	turn := c.openTurn(sid, streamUser("delta", slowWords(400, 50)))
	turnID := turn.TurnID()
	turn.read(2)

	// Raw: the follower is cut where it is, which aapclient would resume.
	follower, err := http.NewRequest("GET", a.base+"/sessions/"+sid+"/turns/"+turnID+"/events", nil)
	if err != nil {
		t.Fatal(err)
	}
	follower.Header.Set("Authorization", "Bearer "+key)
	fres, err := http.DefaultClient.Do(follower)
	if err != nil {
		t.Fatal(err)
	}
	checkOpenAPIStream(t, follower, nil, fres) // openapi_test.go
	defer fres.Body.Close()
	followerDone := make(chan []sseEvent, 1)
	go func() { followerDone <- readEvents(t, bufio.NewReader(fres.Body), -1) }()

	sigterm := time.Now()
	a.signal(syscall.SIGTERM)
	time.Sleep(100 * time.Millisecond)
	// Raw: the operations routes are no AAP calls.
	c.do("GET", "/readyz", nil).expect(t, http.StatusServiceUnavailable)
	c.do("GET", "/healthz", nil).expect(t, http.StatusOK) // still serving during the delay

	var followed []sseEvent
	select {
	case followed = <-followerDone:
	case <-time.After(10 * time.Second):
		t.Fatal("the follower's stream did not end")
	}
	if since := time.Since(sigterm); since < 900*time.Millisecond {
		t.Errorf("the follower ended %s after SIGTERM, before the shutdown delay", since)
	}
	if n := len(followed); n > 0 && followed[n-1].Event == "turn_stop" {
		t.Errorf("the follower saw the turn end: it should have been cut where it was (%v)", eventTypes(followed))
	}
	// The turn itself runs on until the drain timeout, then ends with
	// turn_stop "error".
	rest := turn.read(-1)
	if last := rest[len(rest)-1]; last.Type != aap.EventTurnStop || last.StopReason != aap.StopError {
		t.Errorf("the running turn's stream ended with %v", types(rest))
	}
	if code := a.exitCode(15 * time.Second); code != 0 {
		t.Errorf("exit code %d", code)
	}
	if _, err := http.Get(a.base + "/healthz"); err == nil {
		t.Error("the stopped server still accepts connections")
	}
}
