package main

import (
	"bufio"
	"context"
	"errors"
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
	"github.com/aapd/aapd/aapclient"
	v3 "github.com/aapd/aapd/httpapi/v3"
	"github.com/aapd/aapd/store/storetest"
)

// The faults of issue 9, each inflicted for real: Postgres crashing and
// restarting under load, clients dropping connections while turns are
// claimed, replicas killed mid-stream. After each, every history is checked
// message by message.

// postTurn sends a stream "none" turn with an idempotency key, once
// (api does not retry by itself).
func postTurn(ctx context.Context, api *aapclient.Client, sid, text, idemKey string) (*aapclient.TurnResult, error) {
	return api.SendTurn(ctx, sid, aap.TurnRequest{Messages: []aap.Message{aap.UserMessage(text)}},
		aapclient.WithIdempotencyKey(idemKey))
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
	apis := make([]*aapclient.Client, len(l.bases))
	for i, base := range l.bases {
		apis[i] = (&client{t: t, base: base, key: l.key}).api()
	}
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
					resp, err := postTurn(ctx, apis[(s+attempt)%len(apis)], sid, text, idem)
					cancel()
					if err == nil {
						if len(resp.Messages) != 1 || resp.Messages[0].Content.PlainText() != "Echo: "+text {
							errs <- fmt.Errorf("%s: answered %+v", text, resp.TurnResponse)
						}
						break
					}
					// A refusal other than 503, 429 (every worker busy) or
					// 409 is final; no answer at all is retried.
					var e *aapclient.Error
					if errors.As(err, &e) && e.Status != http.StatusServiceUnavailable && e.Status != http.StatusTooManyRequests && e.Status != http.StatusConflict {
						errs <- fmt.Errorf("%s: %w", text, err)
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
	api := c.api()
	waitFor(t, "the server to read again", 30*time.Second, func() bool {
		_, err := api.ListSessions(context.Background(), aapclient.ListOptions{Limit: 1})
		return err == nil
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

// A stream "none" turn's claim commits without waiting for the disk, so a
// Postgres crash just after turns are claimed may take claims with it
// (docs/durability.md, step 1). Whichever it takes: every turn answered is
// kept, its message and reply once each; every turn refused with 503 left
// nothing behind, and runs when it is sent again; no turn is left running.
func TestPostgresCrashJustAfterClaimsKeepsEveryAnsweredTurnAndNothingElse(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL and aapd processes")
	}
	pg, dbURL, key := crashablePostgres(t)
	p := startProc(t, dbURL)
	c := &client{t: t, base: p.base, key: key}
	api := c.api()
	sids := make([]string, 20)
	for i := range sids {
		sids[i] = c.echoSession(nil)
	}
	const text = "/slow 1500\n/words 2"
	type answer struct {
		res *aapclient.TurnResult
		err error
	}
	answers := make([]answer, len(sids))
	var wg sync.WaitGroup
	for i, sid := range sids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			res, err := api.SendTurn(ctx, sid, aap.TurnRequest{Messages: []aap.Message{aap.UserMessage(text)}})
			answers[i] = answer{res, err}
		}()
	}
	// The claims are committed, not all of them flushed yet.
	time.Sleep(50 * time.Millisecond)
	pg.run("pg_ctl", "-D", pg.data(), "stop", "-m", "immediate")
	time.Sleep(300 * time.Millisecond)
	pg.start()
	wg.Wait()

	waitFor(t, "the server to read again", 30*time.Second, func() bool {
		_, err := api.ListSessions(context.Background(), aapclient.ListOptions{Limit: 1})
		return err == nil
	})
	lost := 0
	for i, sid := range sids {
		var got []string
		for _, m := range c.history(sid, aap.HistoryFull) {
			got = append(got, string(m.Role)+":"+m.Content.PlainText())
		}
		var e *aapclient.Error
		switch a := answers[i]; {
		case a.err == nil:
			if len(a.res.Messages) != 1 {
				t.Fatalf("session %d: answered %+v", i, a.res.TurnResponse)
			}
			want := []string{"user:" + text, "assistant:" + a.res.Messages[0].Content.PlainText()}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("session %d, its turn answered: history %q, want %q", i, got, want)
			}
		case errors.As(a.err, &e) && e.Status == http.StatusServiceUnavailable:
			lost++
			if len(got) != 0 {
				t.Errorf("session %d, its turn refused with 503: history %q, want nothing", i, got)
			}
			if resp := c.say(sid, "again"); len(resp.Messages) != 1 || resp.Messages[0].Content.PlainText() != "Echo: again" {
				t.Errorf("session %d: the turn sent again answered %+v", i, resp)
			}
		default:
			t.Errorf("session %d: %v", i, a.err)
		}
	}
	t.Logf("%d of %d turns refused after the crash", lost, len(sids))
	var running int
	storetest.Scan(t, dbURL, `SELECT count(*) FROM turns WHERE status = 'running'`, nil, &running)
	if running != 0 {
		t.Errorf("%d turns are still recorded running", running)
	}
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
		st := ca.openTurn(sid, streamUser("delta", slowWords(400, 10)))
		turnID := st.TurnID()
		seen := st.read(3 + trial*7)
		a.kill()
		st.close()
		last := seen[len(seen)-1].ID

		type result struct {
			events []turnEvent
			err    error
		}
		resumed := make(chan result, 1)
		api := cb.api()
		go func() {
			s, err := api.TurnEvents(context.Background(), sid, turnID, last)
			if err != nil {
				resumed <- result{err: err}
				return
			}
			ev, err := newTurnStream(t, s).tryRead(-1)
			resumed <- result{ev, err}
		}()
		var rest []turnEvent
		select {
		case r := <-resumed:
			if r.err != nil {
				t.Fatalf("trial %d: resume after %d: %v", trial, last, r.err)
			}
			rest = r.events
		case <-time.After(20 * time.Second):
			t.Fatalf("trial %d: the resumed stream did not end", trial)
		}
		for i, e := range rest {
			if e.ID != last+1+i {
				t.Errorf("trial %d: resumed event %d has id %d, want %d", trial, i, e.ID, last+1+i)
			}
		}
		if len(rest) == 0 || rest[len(rest)-1].Type != aap.EventTurnStop {
			t.Fatalf("trial %d: resumed after %d: %v", trial, last, types(rest))
		}
		// The whole log: turn_start first, one turn_stop last, no gap, and
		// what the client saw is what it says.
		all := cb.followTurn(sid, turnID, 0).read(-1)
		for i, e := range all {
			if e.ID != i+1 {
				t.Fatalf("trial %d: event %d has id %d", trial, i+1, e.ID)
			}
			if (e.Type == aap.EventTurnStop) != (i == len(all)-1) || (e.Type == aap.EventTurnStart) != (i == 0) {
				t.Errorf("trial %d: log %v", trial, types(all))
				break
			}
		}
		for i, e := range append(seen, rest...) {
			if i < len(all) && !reflect.DeepEqual(e.Event, all[i].Event) {
				t.Errorf("trial %d: id %d was sent as %+v, the log has %+v", trial, e.ID, e.Event, all[i].Event)
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
	stream, events := c.streamTurn(sid, streamUser("delta", "/words 5"))
	turnID := stream.TurnID()
	n := len(events)
	// Through aapclient: at the last event, nothing more and no error.
	if rest := c.followTurn(sid, turnID, n).read(-1); len(rest) != 0 {
		t.Errorf("after the last event: %v", types(rest))
	}
	// Raw requests: the exact statuses, for both ways of naming the event.
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
	st := ca.openTurn(sid, streamUser("delta", slowWords(300, 20)))
	turnID := st.TurnID()
	st.read(3)

	// Raw: what is measured is the bytes the follower is sent.
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
	cb.deleteSession(sid)
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
		list, err := c.api().ListTurns(t.Context(), sid, aapclient.ListOptions{Limit: 1})
		if err != nil {
			t.Fatal(err)
		}
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
	api := c.api()
	for w := range workers {
		sid := c.echoSession(nil)
		wg.Go(func() {
			for i := range 40 {
				if _, err := postTurn(context.Background(), api, sid, fmt.Sprintf("w%d t%d", w, i), fmt.Sprintf("%s-%d", sid, i)); err != nil {
					t.Errorf("client %d turn %d: %v", w, i, err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// A database crash can take the claim of a stream "none" turn that has not
// ended (docs/durability.md, step 1). Its outcome is inflicted here as the
// crash leaves it (the turn's rows gone, the session free), while the turn
// runs and other clients follow it: its followers are told the turn was
// lost, not that the session was deleted, the turn's own client is told to
// send it again, and the session's event log goes on without the turn —
// live, and for a resume from any of its ids.
func TestFollowerOfATurnLostWithItsClaimIsToldItWasLost(t *testing.T) {
	s := startServer(t)
	c := s.newTenant(t)
	tenantID := tenantIDOf(t, s, c)
	sid := c.echoSession(nil)
	type answer struct {
		status int
		header http.Header
		body   []byte
	}
	raw := func(method, path, body string, out chan<- answer) {
		req, _ := http.NewRequest(method, s.base+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+c.key)
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			out <- answer{status: -1, body: []byte(err.Error())}
			return
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		out <- answer{res.StatusCode, res.Header, b}
	}
	answered, followed := make(chan answer, 1), make(chan answer, 1)
	go raw("POST", "/sessions/"+sid+"/turns", `{"stream":"none","messages":[{"role":"user","content":"/slow 1000\n/words 2"}]}`, answered)
	turnID := storetest.ClaimedTurn(t, storetest.URL(t), tenantID, sid)
	go raw("GET", "/sessions/"+sid+"/turns/"+turnID+"/events", "", followed)
	logStream := c.openGet("/sessions/"+sid+"/events", "Accept", "text/event-stream")
	defer logStream.Body.Close()
	time.AfterFunc(30*time.Second, func() { logStream.Body.Close() })
	time.Sleep(200 * time.Millisecond) // the followers read the turn's live stream
	storetest.LoseClaim(t, storetest.URL(t), tenantID, sid, turnID)

	wait := func(who string, ch chan answer) answer {
		select {
		case a := <-ch:
			return a
		case <-time.After(10 * time.Second):
			t.Fatalf("%s heard nothing", who)
			return answer{}
		}
	}
	a := wait("the turn's client", answered)
	if a.status != http.StatusServiceUnavailable || a.header.Get("Retry-After") == "" || !strings.Contains(string(a.body), "send it again") {
		t.Errorf("the turn's client was answered %d (Retry-After %q) %s", a.status, a.header.Get("Retry-After"), a.body)
	}
	f := wait("the follower", followed)
	ev := readEventsFrom(t, f.body)
	if f.status != http.StatusOK || len(ev) == 0 || ev[len(ev)-1].Event != "turn_stop" {
		t.Fatalf("the follower got %d %s", f.status, f.body)
	}
	if stop := ev[len(ev)-1].parse(t); stop.Error == nil || stop.Error.Type != aap.TurnErrorInterrupted || !strings.Contains(stop.Error.Message, "database crash") {
		t.Errorf("the follower was told %+v", stop.Error)
	}
	if h := c.history(sid, aap.HistoryFull); len(h) != 0 {
		t.Errorf("the lost turn left %+v", h)
	}
	if got := c.say(sid, "again").Messages[0].Content.PlainText(); got != "Echo: again" {
		t.Errorf("the turn sent again: %q", got)
	}

	// The session's log, followed live: the lost turn ends as for every
	// follower, then the turn sent again comes in the same stream.
	log := readEvents(t, bufio.NewReader(logStream.Body), 5)
	if len(log) != 5 {
		t.Fatalf("the session's log followed live: %+v", log)
	}
	if e := log[0].parse(t); log[0].Event != "turn_start" || e.TurnID != turnID {
		t.Errorf("the log starts with %+v, want the lost turn's turn_start", log[0])
	}
	if e := log[1].parse(t); log[1].Event != "turn_stop" || e.Error == nil || e.Error.Type != aap.TurnErrorInterrupted || !strings.Contains(e.Error.Message, "database crash") {
		t.Errorf("the lost turn ends in the log with %+v", log[1])
	}
	var again string
	for i, want := range []string{"turn_start", "text", "turn_stop"} {
		e := log[2+i]
		if e.Event != want {
			t.Errorf("log event %d is %s, want the turn sent again's %s", 2+i, e.Event, want)
		}
		if i == 0 {
			again = e.parse(t).TurnID
		}
	}
	if again == "" || again == turnID {
		t.Errorf("the turn sent again's turn_start names %q", again)
	}
	// A resume from any id of the lost turn goes on without it.
	for _, h := range [][]string{{"after", log[0].ID}, {"Last-Event-ID", log[1].ID}} {
		var page v3.SessionEventList
		if h[0] == "after" {
			c.do("GET", "/sessions/"+sid+"/events?after="+h[1], nil).expect(t, http.StatusOK).json(t, &page)
		} else {
			c.do("GET", "/sessions/"+sid+"/events", nil, h[0], h[1]).expect(t, http.StatusOK).json(t, &page)
		}
		if len(page.Events) != 3 || page.Events[0].ID != log[2].ID || page.Events[0].TurnID != again || page.Next != log[4].ID {
			t.Errorf("the log after the lost turn's %s %q: %+v", h[0], h[1], page)
		}
	}
}
