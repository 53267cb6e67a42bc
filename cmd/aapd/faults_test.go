package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"reflect"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/aapclient"
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
	st := c.openTurn(sid, streamUser("delta", slowWords(500, 20)))
	turnID := st.TurnID()
	st.read(5)
	a.kill()
	st.close()

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
	if ev := cb.followTurn(sid, turnID, 0).read(-1); ev[len(ev)-1].Type != aap.EventTurnStop || ev[len(ev)-1].StopReason != aap.StopError {
		t.Errorf("dead turn's events end with %+v", ev[len(ev)-1])
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
	stShort := c.openTurn(short, streamUser("delta", slowWords(5, 100)))
	stLong := c.openTurn(long, streamUser("message", slowWords(200, 50)))
	longTurn := stLong.TurnID()
	stShort.read(1)
	stLong.read(1)

	a.signal(syscall.SIGTERM)
	time.Sleep(200 * time.Millisecond)
	if _, err := http.Get(a.base + "/healthz"); err == nil {
		t.Error("a draining server still accepts connections")
	}
	evShort := stShort.read(-1)
	if last := evShort[len(evShort)-1]; last.Type != aap.EventTurnStop || last.StopReason != aap.StopEndTurn {
		t.Errorf("a turn that fits in the drain ended with %v", types(evShort))
	}
	evLong := stLong.read(-1)
	if last := evLong[len(evLong)-1]; last.Type != aap.EventTurnStop || last.StopReason != aap.StopError {
		t.Errorf("a turn cut by shutdown ended with %v", types(evLong))
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
	apis := []*aapclient.Client{replicas[0].api(), replicas[1].api()}
	req := turnRequest(t, user(slowWords(50, 40)))
	errs := make([]error, 6)
	for i := range errs {
		wg.Go(func() { _, errs[i] = apis[i%2].SendTurn(context.Background(), sid, req) })
	}
	wg.Wait()
	ok, conflict := 0, 0
	for _, err := range errs {
		var e *aapclient.Error
		switch {
		case err == nil:
			ok++
		case errors.As(err, &e) && e.Status == http.StatusConflict:
			conflict++
		}
	}
	if ok != 1 || conflict != len(errs)-1 {
		t.Errorf("answers = %v: want exactly one 200 and the rest 409", errs)
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
	apis := []*aapclient.Client{replicas[0].api(), replicas[1].api()}
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
				answers := make([]*aapclient.TurnResult, 2)
				req := aap.TurnRequest{Messages: []aap.Message{aap.UserMessage(text)}}
				for k := range 2 {
					inner.Go(func() {
						res, err := apis[(first+k)%2].SendTurn(context.Background(), sid, req, aapclient.WithIdempotencyKey(text))
						if err != nil {
							errs <- fmt.Errorf("%s via replica %d: %w", text, (first+k)%2, err)
							res = &aapclient.TurnResult{}
						}
						answers[k] = res
					})
				}
				inner.Wait()
				if !reflect.DeepEqual(answers[0].TurnResponse, answers[1].TurnResponse) || answers[0].TurnID != answers[1].TurnID {
					errs <- fmt.Errorf("%s: the two replicas answered differently:\n%+v\n%+v", text, answers[0], answers[1])
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
