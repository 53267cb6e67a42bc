package main

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"net/http"
	"reflect"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/httpapi"
	"github.com/aapd/aapd/store/storetest"
)

// processTenant gives a test its own database, a tenant in it and its key.
func processTenant(t *testing.T) (dbURL, key string) {
	t.Helper()
	dbURL = storetest.NewDatabase(t)
	return dbURL, storetest.NewTenant(t, storetest.OpenURL(t, dbURL)).Key
}

func TestKilledProcessMidTurnIsRecoveredAtOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	dbURL, key := processTenant(t)
	a := startProc(t, dbURL)
	c := &client{t: t, base: a.base, key: key}
	sid := c.echoSession(nil)
	c.say(sid, "before")
	res := c.openStream(sid, streamUser("delta", slowWords(500, 20)))
	turnID := res.Header.Get(httpapi.TurnIDHeader)
	readEvents(t, bufio.NewReader(res.Body), 5)
	a.kill()
	res.Body.Close()

	b := startProc(t, dbURL)
	cb := &client{t: t, base: b.base, key: key}
	start := time.Now()
	if got := cb.say(sid, "after").Messages[0].Content.PlainText(); got != "Echo: after" {
		t.Fatalf("turn after restart answered %q", got)
	}
	// A dead claim is taken over at once, not after its 30 s lease.
	if waited := time.Since(start); waited > 10*time.Second {
		t.Errorf("the next turn waited %s", waited)
	}
	dead := cb.turnInfo(sid, turnID)
	if dead.Status != "interrupted" || dead.StopReason != aap.StopError {
		t.Errorf("killed turn = %+v", dead)
	}
	var texts []string
	for _, m := range cb.history(sid, aap.HistoryFull) {
		texts = append(texts, m.Content.PlainText())
	}
	want := []string{"before", "Echo: before", slowWords(500, 20), "after", "Echo: after"}
	if !reflect.DeepEqual(texts, want) {
		t.Errorf("history after the kill = %q\nwant %q", texts, want)
	}
	// The dead turn's event log is closed, so a follower is not left waiting.
	r := cb.do("GET", "/sessions/"+sid+"/turns/"+turnID+"/events", nil).expect(t, http.StatusOK)
	if ev := readEventsFrom(t, r.body); ev[len(ev)-1].Event != "turn_stop" || ev[len(ev)-1].parse(t).StopReason != aap.StopError {
		t.Errorf("dead turn's events end with %v", ev[len(ev)-1])
	}
}

func TestGracefulShutdownDrainsThenInterrupts(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	dbURL, key := processTenant(t)
	a := startProc(t, dbURL, "--drain-timeout", "1500ms", "--shutdown-delay", "0")
	c := &client{t: t, base: a.base, key: key}
	short, long := c.echoSession(nil), c.echoSession(nil)
	resShort := c.openStream(short, streamUser("delta", slowWords(5, 100)))
	resLong := c.openStream(long, streamUser("message", slowWords(200, 50)))
	defer resShort.Body.Close()
	defer resLong.Body.Close()
	longTurn := resLong.Header.Get(httpapi.TurnIDHeader)
	brShort, brLong := bufio.NewReader(resShort.Body), bufio.NewReader(resLong.Body)
	readEvents(t, brShort, 1)
	readEvents(t, brLong, 1)

	a.signal(syscall.SIGTERM)
	time.Sleep(200 * time.Millisecond)
	if _, err := http.Get(a.base + "/healthz"); err == nil {
		t.Error("a draining server still accepts connections")
	}
	evShort := readEvents(t, brShort, -1)
	if last := evShort[len(evShort)-1]; last.Event != "turn_stop" || last.parse(t).StopReason != aap.StopEndTurn {
		t.Errorf("a turn that fits in the drain ended with %v", eventTypes(evShort))
	}
	evLong := readEvents(t, brLong, -1)
	if last := evLong[len(evLong)-1]; last.Event != "turn_stop" || last.parse(t).StopReason != aap.StopError {
		t.Errorf("a turn cut by shutdown ended with %v", eventTypes(evLong))
	}
	if code := a.exitCode(10 * time.Second); code != 0 {
		t.Errorf("exit code %d", code)
	}
	var status string
	storetest.Scan(t, dbURL, `SELECT status FROM turns WHERE id = $1`, []any{longTurn}, &status)
	if status != "interrupted" {
		t.Errorf("cut turn recorded as %q", status)
	}
	// What the cut turn produced before the drain ended is kept.
	b := startProc(t, dbURL)
	h := (&client{t: t, base: b.base, key: key}).history(long, aap.HistoryFull)
	if len(h) != 2 || h[1].Role != aap.RoleAssistant {
		t.Errorf("history of the cut turn = %+v", h)
	}
}

func TestTwoReplicasRunOneTurnPerSession(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	dbURL, key := processTenant(t)
	replicas := []*client{
		{t: t, base: startProc(t, dbURL).base, key: key},
		{t: t, base: startProc(t, dbURL).base, key: key},
	}
	sid := replicas[0].echoSession(nil)

	// Concurrent turns on one session through both replicas: one runs. The
	// turn lasts 2 s, so the others are claimed while it runs even on a slow
	// database (make test-citus on a loaded machine).
	var wg sync.WaitGroup
	codes := make([]int, 6)
	for i := range codes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i] = replicas[i%2].do("POST", "/sessions/"+sid+"/turns", user(slowWords(50, 40))).StatusCode
		}()
	}
	wg.Wait()
	ok, conflict := 0, 0
	for _, code := range codes {
		switch code {
		case http.StatusOK:
			ok++
		case http.StatusConflict:
			conflict++
		}
	}
	if ok != 1 || conflict != len(codes)-1 {
		t.Errorf("codes = %v: want exactly one 200 and the rest 409", codes)
	}
}

func TestTwoReplicasLoseAndDoubleNothingUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	dbURL, key := processTenant(t)
	replicas := []*client{
		{t: t, base: startProc(t, dbURL).base, key: key},
		{t: t, base: startProc(t, dbURL).base, key: key},
	}
	const sessions, turns = 12, 6
	ids := make([]string, sessions)
	for i := range ids {
		ids[i] = replicas[i%2].echoSession(nil)
	}
	var wg sync.WaitGroup
	errs := make(chan error, sessions*turns*2)
	for s, sid := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(s), 7))
			for i := range turns {
				// Each turn goes to both replicas at once, as a client
				// retrying on another replica would: one key, one run.
				text := fmt.Sprintf("s%d m%d", s, i)
				first := rng.IntN(2)
				var inner sync.WaitGroup
				bodies := make([]string, 2)
				for k := range 2 {
					inner.Add(1)
					go func() {
						defer inner.Done()
						r := replicas[(first+k)%2].do("POST", "/sessions/"+sid+"/turns", user(text), "Idempotency-Key", text)
						if r.StatusCode != http.StatusOK {
							errs <- fmt.Errorf("%s via replica %d: %d %s", text, (first+k)%2, r.StatusCode, r.body)
						}
						bodies[k] = string(r.body)
					}()
				}
				inner.Wait()
				if bodies[0] != bodies[1] {
					errs <- fmt.Errorf("%s: the two replicas answered differently:\n%s\n%s", text, bodies[0], bodies[1])
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for s, sid := range ids {
		var got []string
		for _, m := range replicas[s%2].history(sid, aap.HistoryFull) {
			got = append(got, string(m.Role)+":"+m.Content.PlainText())
		}
		var want []string
		for i := range turns {
			text := fmt.Sprintf("s%d m%d", s, i)
			want = append(want, "user:"+text, "assistant:Echo: "+text)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("session %d history:\n got %q\nwant %q", s, got, want)
		}
	}
}

// readEventsFrom parses a whole SSE body.
func readEventsFrom(t *testing.T, body []byte) []sseEvent {
	t.Helper()
	return readEvents(t, bufio.NewReader(bytesReader(body)), -1)
}
