package main

import (
	"bufio"
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

// Faults met inside one process: disconnects, concurrent turns, cancel,
// delete, retries, resumption. Process-level faults are in faults_test.go.

// slowWords is a user message for a slow answer of n words, one every ms
// milliseconds.
func slowWords(n, ms int) string { return "/slow " + strconv.Itoa(ms) + "\n/words " + strconv.Itoa(n) }

func wordsText(n int) string {
	w := make([]string, n)
	for i := range w {
		w[i] = "word" + strconv.Itoa(i+1)
	}
	return "Echo: " + strings.Join(w, " ")
}

// turnInfo fetches a turn record through the extension endpoint.
func (c *client) turnInfo(sid, turnID string) httpapi.TurnInfo {
	c.t.Helper()
	var info httpapi.TurnInfo
	c.do("GET", "/sessions/"+sid+"/turns/"+turnID, nil).expect(c.t, http.StatusOK).json(c.t, &info)
	return info
}

// waitTurn waits until a turn has ended and returns its record.
func (c *client) waitTurn(sid, turnID string) httpapi.TurnInfo {
	c.t.Helper()
	var info httpapi.TurnInfo
	waitFor(c.t, "turn "+turnID+" to end", 20*time.Second, func() bool {
		info = c.turnInfo(sid, turnID)
		return info.Status != "running"
	})
	return info
}

func TestClientDisconnectMidStreamStillCommits(t *testing.T) {
	for _, mode := range []string{"delta", "message"} {
		t.Run(mode, func(t *testing.T) {
			s := startServer(t)
			c := s.newTenant(t)
			sid := c.echoSession(nil)
			res := c.openStream(sid, streamUser(mode, "/think planning\n"+slowWords(30, 20)))
			turnID := res.Header.Get(httpapi.TurnIDHeader)
			readEvents(t, bufio.NewReader(res.Body), 2)
			res.Body.Close() // the client goes away mid-answer

			info := c.waitTurn(sid, turnID)
			if info.Status != "completed" || info.StopReason != aap.StopEndTurn {
				t.Fatalf("turn = %+v", info)
			}
			h := c.history(sid, aap.HistoryFull)
			if len(h) != 2 || h[1].Role != aap.RoleAssistant || !strings.Contains(h[1].Content.PlainText(), wordsText(30)) {
				t.Fatalf("history = %+v", h)
			}
		})
	}
}

func TestConcurrentTurnGets409WithRunningTurnID(t *testing.T) {
	s := startServer(t)
	c := s.newTenant(t)
	sid := c.echoSession(nil)
	res := c.openStream(sid, streamUser("delta", slowWords(10, 50)))
	defer res.Body.Close()
	running := res.Header.Get(httpapi.TurnIDHeader)
	r := c.do("POST", "/sessions/"+sid+"/turns", user("me too")).expect(t, http.StatusConflict)
	if r.Header.Get("Retry-After") == "" {
		t.Error("409 without Retry-After")
	}
	p := r.problem(t)
	if p["type"] != "https://aapd.dev/problems/turn-running" || p["turnId"] != running {
		t.Errorf("problem = %v, want turnId %s", p, running)
	}
	readEvents(t, bufio.NewReader(res.Body), -1)
	c.say(sid, "now") // free again once the stream has ended
}

func TestResumeStreamAfterDisconnect(t *testing.T) {
	s := startServer(t)
	other := startServer(t) // a second replica on the same database
	c := s.newTenant(t)
	sid := c.echoSession(nil)
	res := c.openStream(sid, streamUser("delta", slowWords(20, 25)))
	turnID := res.Header.Get(httpapi.TurnIDHeader)
	first := readEvents(t, bufio.NewReader(res.Body), 4)
	res.Body.Close()

	for name, base := range map[string]string{"same replica": s.base, "other replica": other.base} {
		t.Run(name, func(t *testing.T) {
			rc := &client{t: t, base: base, key: c.key}
			req, _ := http.NewRequest("GET", base+"/sessions/"+sid+"/turns/"+turnID+"/events", nil)
			req.Header.Set("Authorization", "Bearer "+rc.key)
			req.Header.Set("Last-Event-ID", first[len(first)-1].ID)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			checkOpenAPIStream(t, req, nil, resp) // openapi_test.go
			defer resp.Body.Close()
			rest := readEvents(t, bufio.NewReader(resp.Body), -1)
			all := append(append([]sseEvent{}, first...), rest...)
			text := ""
			for i, e := range all {
				if e.ID != strconv.Itoa(i+1) {
					t.Fatalf("event %d has id %s: a gap or a duplicate (%v)", i+1, e.ID, eventTypes(all))
				}
				if e.Event == "text_delta" {
					text += e.parse(t).Delta
				}
			}
			if all[len(all)-1].Event != "turn_stop" || text != wordsText(20) {
				t.Errorf("resumed stream: %v, text %q", eventTypes(all), text)
			}
		})
	}
	// ?after= works too, and from 0 replays the whole turn.
	var whole []sseEvent
	r := c.do("GET", "/sessions/"+sid+"/turns/"+turnID+"/events?after=0", nil).expect(t, http.StatusOK)
	whole = readEvents(t, bufio.NewReader(strings.NewReader(string(r.body))), -1)
	if whole[0].Event != "turn_start" || whole[len(whole)-1].Event != "turn_stop" {
		t.Errorf("replay from 0: %v", eventTypes(whole))
	}
	c.do("GET", "/sessions/"+sid+"/turns/"+turnID+"/events?after=x", nil).expect(t, http.StatusBadRequest)
	c.do("GET", "/sessions/"+sid+"/turns/turn_nope/events", nil).expect(t, http.StatusNotFound)
}

func TestCancelStopsTheTurnAndKeepsWhatWasProduced(t *testing.T) {
	s := startServer(t)
	c := s.newTenant(t)
	sid := c.echoSession(nil)
	res := c.openStream(sid, streamUser("delta", slowWords(200, 20)))
	defer res.Body.Close()
	turnID := res.Header.Get(httpapi.TurnIDHeader)
	br := bufio.NewReader(res.Body)
	readEvents(t, br, 5)

	var info httpapi.TurnInfo
	c.do("POST", "/sessions/"+sid+"/turns/"+turnID+"/cancel", nil).expect(t, http.StatusOK).json(t, &info)
	if info.Status != "cancelled" {
		t.Fatalf("after cancel: %+v", info)
	}
	rest := readEvents(t, br, -1)
	if len(rest) == 0 || rest[len(rest)-1].Event != "turn_stop" {
		t.Fatalf("stream did not end with turn_stop: %v", eventTypes(rest))
	}
	h := c.history(sid, aap.HistoryFull)
	if len(h) != 2 || !strings.HasPrefix(h[1].Content.PlainText(), "Echo: word1 word2") || strings.Contains(h[1].Content.PlainText(), "word200") {
		t.Fatalf("history after cancel = %+v", h)
	}
	// The session is free at once.
	if got := c.say(sid, "next").Messages[0].Content.PlainText(); got != "Echo: next" {
		t.Errorf("next turn: %q", got)
	}
	// Cancelling a finished turn changes nothing.
	c.do("POST", "/sessions/"+sid+"/turns/"+turnID+"/cancel", nil).expect(t, http.StatusOK).json(t, &info)
	if info.Status != "cancelled" {
		t.Errorf("second cancel: %+v", info)
	}
}

func TestCancelFromAnotherReplica(t *testing.T) {
	s := startServer(t)
	other := startServer(t)
	c := s.newTenant(t)
	sid := c.echoSession(nil)
	res := c.openStream(sid, streamUser("message", slowWords(300, 20)))
	defer res.Body.Close()
	turnID := res.Header.Get(httpapi.TurnIDHeader)
	oc := &client{t: t, base: other.base, key: c.key}
	var info httpapi.TurnInfo
	oc.do("POST", "/sessions/"+sid+"/turns/"+turnID+"/cancel", nil).expect(t, http.StatusOK).json(t, &info)
	if info.Status != "cancelled" {
		t.Fatalf("cancel via other replica: %+v", info)
	}
	events := readEvents(t, bufio.NewReader(res.Body), -1)
	if events[len(events)-1].Event != "turn_stop" {
		t.Errorf("events = %v", eventTypes(events))
	}
}

func TestDeleteSessionWithRunningTurnLeavesNothing(t *testing.T) {
	s := startServer(t)
	c := s.newTenant(t)
	sid := c.echoSession(nil)
	c.say(sid, "before")
	res := c.openStream(sid, streamUser("delta", slowWords(200, 20)))
	defer res.Body.Close()
	br := bufio.NewReader(res.Body)
	readEvents(t, br, 3)
	c.do("DELETE", "/sessions/"+sid, nil).expect(t, http.StatusNoContent)
	events := readEvents(t, br, -1)
	if len(events) == 0 || events[len(events)-1].Event != "turn_stop" {
		t.Errorf("stream after delete: %v", eventTypes(events))
	}
	waitFor(t, "the turn to stop", 5*time.Second, func() bool { return s.Runner.Running() == 0 })
	for _, table := range []string{"sessions", "messages", "compacted_messages", "turns", "turn_event_batches"} {
		col := "session_id"
		if table == "sessions" {
			col = "id"
		}
		var n int
		storetest.Scan(t, storetest.URL(t), `SELECT count(*) FROM `+table+` WHERE `+col+` = $1`, []any{sid}, &n)
		if n != 0 {
			t.Errorf("%s still has %d rows of the deleted session", table, n)
		}
	}
}

func TestIdempotentSessionCreate(t *testing.T) {
	s := startServer(t)
	c := s.newTenant(t)
	body := `{"agent":{"name":"echo"}}`
	first := c.do("POST", "/sessions", body, "Idempotency-Key", "create-1").expect(t, http.StatusCreated)
	again := c.do("POST", "/sessions", " { \"agent\" : {\"name\":\"echo\"} } ", "Idempotency-Key", "create-1").expect(t, http.StatusCreated)
	if string(first.body) != string(again.body) || again.Header.Get(httpapi.ReplayedHeader) != "true" {
		t.Errorf("retry: %s (replayed %q), first %s", again.body, again.Header.Get(httpapi.ReplayedHeader), first.body)
	}
	var list aap.SessionList
	c.do("GET", "/sessions", nil).expect(t, http.StatusOK).json(t, &list)
	if len(list.Sessions) != 1 {
		t.Errorf("%d sessions after a retried create", len(list.Sessions))
	}
	p := c.do("POST", "/sessions", `{"agent":{"name":"echo","options":{"style":"shout"}}}`, "Idempotency-Key", "create-1").
		expect(t, http.StatusUnprocessableEntity).problem(t)
	if p["type"] != "https://aapd.dev/problems/idempotency-key-reused" {
		t.Errorf("problem = %v", p)
	}
	// Keys are per tenant.
	s.newTenant(t).do("POST", "/sessions", body, "Idempotency-Key", "create-1").expect(t, http.StatusCreated)
}

func TestIdempotentTurnReplaysWithoutRunningTheAgentAgain(t *testing.T) {
	s := startServer(t)
	c := s.newTenant(t)
	sid := c.echoSession(nil)

	first := c.do("POST", "/sessions/"+sid+"/turns", user("once"), "Idempotency-Key", "t-1").expect(t, http.StatusOK)
	again := c.do("POST", "/sessions/"+sid+"/turns", user("once"), "Idempotency-Key", "t-1").expect(t, http.StatusOK)
	if string(first.body) != string(again.body) || first.Header.Get(httpapi.TurnIDHeader) != again.Header.Get(httpapi.TurnIDHeader) {
		t.Errorf("replay differs:\n%s\n%s", first.body, again.body)
	}
	if again.Header.Get(httpapi.ReplayedHeader) != "true" {
		t.Error("replay not marked")
	}
	c.do("POST", "/sessions/"+sid+"/turns", user("twice"), "Idempotency-Key", "t-1").expect(t, http.StatusUnprocessableEntity)

	// A stream replays its recorded events.
	res, events := c.stream(sid, streamUser("message", "/think a\nstreamed"))
	_ = res
	res2 := c.openStream(sid, streamUser("message", "/think a\nstreamed"), "Idempotency-Key", "t-2")
	evA := readEvents(t, bufio.NewReader(res2.Body), -1)
	res2.Body.Close()
	res3 := c.openStream(sid, streamUser("message", "/think a\nstreamed"), "Idempotency-Key", "t-2")
	evB := readEvents(t, bufio.NewReader(res3.Body), -1)
	res3.Body.Close()
	if !reflect.DeepEqual(evA, evB) || len(evA) != len(events) {
		t.Errorf("stream replay differs:\n%v\n%v", evA, evB)
	}
	// Concurrent retries of one request run it once.
	var wg sync.WaitGroup
	codes := make([]int, 4)
	for i := range codes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i] = c.do("POST", "/sessions/"+sid+"/turns", user("raced"), "Idempotency-Key", "t-3").StatusCode
		}()
	}
	wg.Wait()
	n := 0
	for _, m := range c.history(sid, aap.HistoryFull) {
		if m.Role == aap.RoleUser && m.Content.Text == "raced" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("the raced request ran %d times (codes %v)", n, codes)
	}
	for _, code := range codes {
		if code != http.StatusOK {
			t.Errorf("raced retry got %d", code)
		}
	}
	// Only the first of each keyed request reached the history.
	var users []string
	for _, m := range c.history(sid, aap.HistoryFull) {
		if m.Role == aap.RoleUser {
			users = append(users, m.Content.PlainText())
		}
	}
	want := []string{"once", "/think a\nstreamed", "/think a\nstreamed", "raced"}
	if !reflect.DeepEqual(users, want) {
		t.Errorf("user messages = %q, want %q", users, want)
	}
}

func TestTurnsAreListedWithTheirRecords(t *testing.T) {
	s := startServer(t)
	c := s.newTenant(t)
	sid := c.echoSession(nil, "lookup")
	c.say(sid, "one")
	c.say(sid, "/tool lookup {}")
	c.do("POST", "/sessions/"+sid+"/turns", streamUser("delta", "/error boom")).expect(t, http.StatusOK)
	var page httpapi.TurnList
	c.do("GET", "/sessions/"+sid+"/turns?limit=2", nil).expect(t, http.StatusOK).json(t, &page)
	if len(page.Turns) != 2 || page.Next == "" {
		t.Fatalf("page 1 = %+v", page)
	}
	if page.Turns[0].Status != "failed" || page.Turns[0].StopReason != aap.StopError || page.Turns[0].Error == nil || page.Turns[0].Error.Type != aap.TurnErrorModel {
		t.Errorf("failed turn = %+v", page.Turns[0])
	}
	if page.Turns[1].StopReason != aap.StopToolUse || page.Turns[1].Status != "completed" || page.Turns[1].DurationMs == nil {
		t.Errorf("tool_use turn = %+v", page.Turns[1])
	}
	var page2 httpapi.TurnList
	c.do("GET", "/sessions/"+sid+"/turns?limit=2&after="+page.Next, nil).expect(t, http.StatusOK).json(t, &page2)
	if len(page2.Turns) != 1 || page2.Next != "" || page2.Turns[0].Stream != aap.StreamNone {
		t.Errorf("page 2 = %+v", page2)
	}
	s.newTenant(t).do("GET", "/sessions/"+sid+"/turns", nil).expect(t, http.StatusNotFound)
}
