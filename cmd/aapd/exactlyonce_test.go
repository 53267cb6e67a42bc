package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/httpapi"
	"github.com/aapd/aapd/store/storetest"
)

// The faults of issue 9, each inflicted for real: Postgres crashing and
// restarting under load, clients dropping connections while turns are
// claimed, replicas killed mid-stream. After each, every history is checked
// message by message.

// postTurn sends a stream "none" turn with an idempotency key; it returns
// the status (0 if the request failed) and the body.
func postTurn(ctx context.Context, base, apiKey, sid, text, idemKey string) (int, []byte, error) {
	b, _ := json.Marshal(user(text))
	req, err := http.NewRequestWithContext(ctx, "POST", base+"/sessions/"+sid+"/turns", bytes.NewReader(b))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+apiKey)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", idemKey)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	return res.StatusCode, body, err
}

// turnLoad is a conversation per session, driven concurrently: each turn
// is sent with an idempotency key and sent again, as a careful client
// would, after a 5xx, a 409 or a broken connection, until it answers 200.
// With dropFirst, the first attempt of every turn is abandoned by its
// client after a few milliseconds. It reports each turn's final answer.
type turnLoad struct {
	bases     []string
	key       string
	sessions  []string
	turns     int
	dropFirst bool
}

func (l turnLoad) text(s, i int) string { return fmt.Sprintf("s%d m%d", s, i) }

func (l turnLoad) run(t *testing.T, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	var wg sync.WaitGroup
	errs := make(chan error, len(l.sessions))
	for s, sid := range l.sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(s), 9))
			for i := range l.turns {
				text, idem := l.text(s, i), fmt.Sprintf("%s-%d-%d", sid, s, i)
				for attempt := 0; ; attempt++ {
					if time.Now().After(deadline) {
						errs <- fmt.Errorf("%s: no answer before the deadline", text)
						return
					}
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					if attempt == 0 && l.dropFirst {
						ctx, cancel = context.WithTimeout(context.Background(), time.Duration(rng.IntN(12000))*time.Microsecond)
					}
					status, body, err := postTurn(ctx, l.bases[(s+attempt)%len(l.bases)], l.key, sid, text, idem)
					cancel()
					if err == nil && status == http.StatusOK {
						var resp aap.TurnResponse
						if json.Unmarshal(body, &resp) != nil || len(resp.Messages) != 1 || resp.Messages[0].Content.PlainText() != "Echo: "+text {
							errs <- fmt.Errorf("%s: answered %s", text, body)
						}
						break
					}
					if err == nil && status != http.StatusServiceUnavailable && status != http.StatusConflict {
						errs <- fmt.Errorf("%s: status %d: %s", text, status, body)
						return
					}
					time.Sleep(50 * time.Millisecond)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// check verifies every history message by message: each turn's user
// message once, followed by its one reply, and no turn left running.
func (l turnLoad) check(t *testing.T, c *client, dbURL string) {
	t.Helper()
	// After a fault, a read may meet a connection the database dropped:
	// that is a 503 to retry.
	waitFor(t, "the server to read again", 30*time.Second, func() bool {
		return c.do("GET", "/sessions?limit=1", nil).StatusCode == http.StatusOK
	})
	for s, sid := range l.sessions {
		var got, want []string
		for _, m := range c.history(sid, aap.HistoryFull) {
			got = append(got, string(m.Role)+":"+m.Content.PlainText())
		}
		for i := range l.turns {
			want = append(want, "user:"+l.text(s, i), "assistant:Echo: "+l.text(s, i))
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("session %d history:\n got %q\nwant %q", s, got, want)
			var failed string
			storetest.Scan(t, dbURL, `SELECT coalesce(string_agg(id || ' ' || status || ': ' || coalesce(error, ''), '; '), '')
				FROM turns WHERE session_id = $1 AND stop_reason = 'error'`, []any{sid}, &failed)
			t.Logf("session %d: turns that ended in error: %s", s, failed)
		}
	}
	var running int
	storetest.Scan(t, dbURL, `SELECT count(*) FROM turns WHERE status = 'running'`, nil, &running)
	if running != 0 {
		t.Errorf("%d turns are still recorded running", running)
	}
}

// Defect 1: after a Postgres crash during a commit, a reply was stored
// twice: the commit was retried although it had landed.
func TestPostgresCrashNeverDuplicatesAReply(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL and aapd processes")
	}
	pg, dbURL, key := crashablePostgres(t)
	p := startProc(t, dbURL)
	c := &client{t: t, base: p.base, key: key}
	load := turnLoad{bases: []string{p.base}, key: key, turns: 12}
	for range 12 {
		load.sessions = append(load.sessions, c.echoSession(nil))
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 3 {
			time.Sleep(400 * time.Millisecond)
			pg.run("pg_ctl", "-D", pg.data(), "stop", "-m", "immediate")
			time.Sleep(100 * time.Millisecond)
			pg.start()
		}
	}()
	load.run(t, 90*time.Second)
	<-done
	load.check(t, c, dbURL)
}

// Defect 5: a turn failed with no reply when its client disconnected or
// Postgres blinked as it started; everything after the claim now runs on
// the worker, with the retries of every other write.
func TestClientDisconnectsAndPostgresBlinksNeverLoseAReply(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL and aapd processes")
	}
	pg, dbURL, key := crashablePostgres(t)
	a, b := startProc(t, dbURL), startProc(t, dbURL)
	c := &client{t: t, base: a.base, key: key}
	load := turnLoad{bases: []string{a.base, b.base}, key: key, turns: 12, dropFirst: true}
	for range 16 {
		load.sessions = append(load.sessions, c.echoSession(nil))
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 3 {
			time.Sleep(500 * time.Millisecond)
			// Stop and start, not pg_ctl restart: a restarted server would
			// keep pg_ctl's output open, and the test waiting on it.
			pg.stop()
			pg.start()
		}
	}()
	load.run(t, 90*time.Second)
	<-done
	load.check(t, c, dbURL)
}

// Defect 2: a client dropping its connection while the claim committed
// left a turn recorded running: 409 for the lease's 30 s, and a retry with
// the same key waiting forever. A claim is now made and run by a worker,
// whatever the request does.
func TestDisconnectDuringClaimNeverLeavesAZombieTurn(t *testing.T) {
	s := startServer(t, func(c *Config) { c.Workers = 64 })
	c := s.newTenant(t)
	load := turnLoad{bases: []string{s.base}, key: c.key, turns: 6, dropFirst: true}
	for range 16 {
		load.sessions = append(load.sessions, c.echoSession(nil))
	}
	// Each turn's retry must come back within its 30 s timeout: none may
	// wait on a turn nobody runs.
	load.run(t, 60*time.Second)
	load.check(t, c, storetest.URL(t))
	// And the sessions are free at once: no 409.
	for s, sid := range load.sessions {
		if got := c.say(sid, "after").Messages[0].Content.PlainText(); got != "Echo: after" {
			t.Errorf("session %d: %q", s, got)
		}
	}
}

// Defect 3: a stream resumed on another replica after the one running the
// turn was killed must end with turn_stop, with ids after every id the
// client saw, and the turn's log must be gapless from turn_start to one
// turn_stop.
func TestResumeAfterReplicaKilledEndsWithTurnStopAndNoReusedID(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	dbURL, key := processTenant(t)
	b := startProc(t, dbURL)
	cb := &client{t: t, base: b.base, key: key}
	for trial := range 4 {
		a := startProc(t, dbURL)
		ca := &client{t: t, base: a.base, key: key}
		sid := ca.echoSession(nil)
		res := ca.openStream(sid, streamUser("delta", slowWords(400, 10)))
		turnID := res.Header.Get(httpapi.TurnIDHeader)
		seen := readEvents(t, bufio.NewReader(res.Body), 3+trial*7)
		a.kill()
		res.Body.Close()
		last := seen[len(seen)-1].ID

		resumed := make(chan []sseEvent, 1)
		go func() {
			r := cb.do("GET", "/sessions/"+sid+"/turns/"+turnID+"/events", nil, "Last-Event-ID", last)
			resumed <- readEventsFrom(t, r.body)
		}()
		var rest []sseEvent
		select {
		case rest = <-resumed:
		case <-time.After(20 * time.Second):
			t.Fatalf("trial %d: the resumed stream did not end", trial)
		}
		lastID, _ := strconv.Atoi(last)
		for i, e := range rest {
			if e.ID != strconv.Itoa(lastID+1+i) {
				t.Errorf("trial %d: resumed event %d has id %s, want %d", trial, i, e.ID, lastID+1+i)
			}
		}
		if len(rest) == 0 || rest[len(rest)-1].Event != "turn_stop" {
			t.Fatalf("trial %d: resumed after %s: %v", trial, last, eventTypes(rest))
		}
		// The whole log: turn_start first, one turn_stop last, no gap, and
		// what the client saw is what it says.
		all := readEventsFrom(t, cb.do("GET", "/sessions/"+sid+"/turns/"+turnID+"/events", nil).expect(t, http.StatusOK).body)
		for i, e := range all {
			if e.ID != strconv.Itoa(i+1) {
				t.Fatalf("trial %d: event %d has id %s", trial, i+1, e.ID)
			}
			if (e.Event == "turn_stop") != (i == len(all)-1) || (e.Event == "turn_start") != (i == 0) {
				t.Errorf("trial %d: log %v", trial, eventTypes(all))
				break
			}
		}
		for i, e := range append(seen, rest...) {
			if i < len(all) && (e.Event != all[i].Event || e.Data != all[i].Data) {
				t.Errorf("trial %d: id %s was sent as %s %s, the log has %s %s", trial, e.ID, e.Event, e.Data, all[i].Event, all[i].Data)
			}
		}
	}
}

// Defect 3, the finished turn: a resume at its last event ends at once
// (204: nothing more, and an EventSource stops reconnecting); one beyond it
// is a 400, never keep-alives forever.
func TestResumeAtOrBeyondTheEndOfAFinishedTurn(t *testing.T) {
	s := startServer(t)
	c := s.newTenant(t)
	sid := c.echoSession(nil)
	res, events := c.stream(sid, streamUser("delta", "/words 5"))
	turnID := res.Header.Get(httpapi.TurnIDHeader)
	n := len(events)
	path := "/sessions/" + sid + "/turns/" + turnID + "/events"
	for _, tc := range []struct {
		name    string
		headers []string
		query   string
		status  int
	}{
		{"at the last event", []string{"Last-Event-ID", strconv.Itoa(n)}, "", http.StatusNoContent},
		{"beyond the last event", []string{"Last-Event-ID", strconv.Itoa(n + 1)}, "", http.StatusBadRequest},
		{"far beyond, as a query", nil, "?after=2147483648", http.StatusBadRequest},
		{"beyond int64", nil, "?after=99999999999999999999", http.StatusBadRequest},
		{"one before the end", []string{"Last-Event-ID", strconv.Itoa(n - 1)}, "", http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := c.do("GET", path+tc.query, nil, tc.headers...).expect(t, tc.status)
			if tc.status == http.StatusOK {
				if ev := readEventsFrom(t, r.body); len(ev) != 1 || ev[0].Event != "turn_stop" || ev[0].ID != strconv.Itoa(n) {
					t.Errorf("events %v", ev)
				}
			}
			if tc.status == http.StatusBadRequest {
				checkProblem(t, r, http.StatusBadRequest, "invalid-request")
			}
		})
	}
}

// Defect 4: a follower must end promptly, without spinning, when the turn
// goes away with its session.
func TestFollowerOfADeletedSessionEndsPromptly(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	dbURL, key := processTenant(t)
	a, b := startProc(t, dbURL), startProc(t, dbURL)
	ca, cb := &client{t: t, base: a.base, key: key}, &client{t: t, base: b.base, key: key}
	sid := ca.echoSession(nil)
	res := ca.openStream(sid, streamUser("delta", slowWords(300, 20)))
	defer res.Body.Close()
	turnID := res.Header.Get(httpapi.TurnIDHeader)
	readEvents(t, bufio.NewReader(res.Body), 3)

	got := make(chan int, 1)
	go func() {
		req, _ := http.NewRequest("GET", b.base+"/sessions/"+sid+"/turns/"+turnID+"/events", nil)
		req.Header.Set("Authorization", "Bearer "+key)
		r, err := http.DefaultClient.Do(req)
		if err != nil {
			got <- -1
			return
		}
		defer r.Body.Close()
		n, _ := io.Copy(io.Discard, r.Body)
		got <- int(n)
	}()
	time.Sleep(300 * time.Millisecond)
	cb.do("DELETE", "/sessions/"+sid, nil).expect(t, http.StatusNoContent)
	select {
	case n := <-got:
		if n < 0 || n > 64<<10 {
			t.Errorf("the follower wrote %d bytes", n)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the follower of a deleted session did not end")
	}
}

// Defect 6: a NUL character in text that ends up in an error message left
// the turn recorded running.
func TestNULInAnErrorNeverWedgesATurn(t *testing.T) {
	s := startServer(t)
	c := s.newTenant(t)
	sid := c.echoSession([]aap.ServerToolRef{{Name: "calculator", Trust: true}})
	for _, text := range []string{
		"/error bad\u0000byte",
		"/tool calculator {\"expression\":\"1+\u0000\"}",
		"a client's \u0000 text",
	} {
		resp := c.say(sid, text)
		turns := c.do("GET", "/sessions/"+sid+"/turns?limit=1", nil).expect(t, http.StatusOK)
		var list httpapi.TurnList
		turns.json(t, &list)
		if len(list.Turns) != 1 || list.Turns[0].Status == "running" {
			t.Errorf("%q: turn %+v (answer %+v)", text, list.Turns, resp)
		}
	}
	if got := c.say(sid, "after").Messages[0].Content.PlainText(); got != "Echo: after" {
		t.Errorf("next turn: %q", got)
	}
	if h := c.history(sid, aap.HistoryFull); !strings.Contains(fmt.Sprint(h), "\u0000") {
		t.Errorf("the client's NUL was not kept in the history")
	}
}

// A worker's slot is free once its turn's answer is out: as many clients
// as workers, each sending its next turn the moment it has the answer,
// never find the server busy.
func TestAsManyClientsAsWorkersNeverFindTheServerBusy(t *testing.T) {
	const workers = 4
	s := startServer(t, func(c *Config) { c.Workers = workers })
	c := s.newTenant(t)
	var wg sync.WaitGroup
	for w := range workers {
		sid := c.echoSession(nil)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 40 {
				status, body, err := postTurn(context.Background(), s.base, c.key, sid, fmt.Sprintf("w%d t%d", w, i), fmt.Sprintf("%s-%d", sid, i))
				if err != nil || status != http.StatusOK {
					t.Errorf("client %d turn %d: %d %s %v", w, i, status, body, err)
					return
				}
			}
		}()
	}
	wg.Wait()
}
