package main

import (
	"bufio"
	"context"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/aapclient"
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
func (c *client) turnInfo(sid, turnID string) aapclient.TurnInfo {
	c.t.Helper()
	info, err := c.api().GetTurn(context.Background(), sid, turnID)
	if err != nil {
		c.t.Fatalf("GET turn %s: %v", turnID, err)
	}
	return info
}

// waitTurn waits until a turn has ended and returns its record.
func (c *client) waitTurn(sid, turnID string) aapclient.TurnInfo {
	c.t.Helper()
	var info aapclient.TurnInfo
	waitFor(c.t, "turn "+turnID+" to end", 20*time.Second, func() bool {
		info = c.turnInfo(sid, turnID)
		return info.Ended()
	})
	return info
}

func TestClientDisconnectMidStreamStillCommits(t *testing.T) {
	for _, mode := range []string{"delta", "message"} {
		t.Run(mode, func(t *testing.T) {
			s := startServer(t)
			c := s.newTenant(t)
			sid := c.echoSession(nil)
			st := c.openTurn(sid, streamUser(mode, "/think planning\n"+slowWords(30, 20)))
			turnID := st.TurnID()
			st.read(2)
			st.close() // the client goes away mid-answer

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
	st := c.openTurn(sid, streamUser("delta", slowWords(10, 50)))
	running := st.TurnID()
	_, err := c.api().SendTurn(t.Context(), sid, turnRequest(t, user("me too")))
	e := refusal(t, err, http.StatusConflict, "turn-running")
	if e.RetryAfter <= 0 {
		t.Error("409 without Retry-After")
	}
	if e.TurnID != running {
		t.Errorf("problem = %+v, want turnId %s", e, running)
	}
	st.read(-1)
	c.say(sid, "now") // free again once the stream has ended
}

func TestResumeStreamAfterDisconnect(t *testing.T) {
	s := startServer(t)
	other := startServer(t) // a second replica on the same database
	c := s.newTenant(t)
	sid := c.echoSession(nil)
	st := c.openTurn(sid, streamUser("delta", slowWords(20, 25)))
	turnID := st.TurnID()
	first := st.read(4)
	st.close()

	// aapclient asks with Last-Event-ID.
	for name, base := range map[string]string{"same replica": s.base, "other replica": other.base} {
		t.Run(name, func(t *testing.T) {
			rc := &client{t: t, base: base, key: c.key}
			rest := rc.followTurn(sid, turnID, first[len(first)-1].ID).read(-1)
			all := append(append([]turnEvent{}, first...), rest...)
			text := ""
			for i, e := range all {
				if e.ID != i+1 {
					t.Fatalf("event %d has id %d: a gap or a duplicate (%v)", i+1, e.ID, types(all))
				}
				if e.Type == aap.EventTextDelta {
					text += e.Delta
				}
			}
			if all[len(all)-1].Type != aap.EventTurnStop || text != wordsText(20) {
				t.Errorf("resumed stream: %v, text %q", types(all), text)
			}
		})
	}
	// From 0, the whole turn is replayed.
	whole := c.followTurn(sid, turnID, 0).read(-1)
	if whole[0].Type != aap.EventTurnStart || whole[len(whole)-1].Type != aap.EventTurnStop || whole[0].ID != 1 {
		t.Errorf("replay from 0: %v", types(whole))
	}
	// Raw: ?after= (what aapclient does not send) and a malformed one.
	r := c.do("GET", "/sessions/"+sid+"/turns/"+turnID+"/events?after=0", nil).expect(t, http.StatusOK)
	if raw := readEvents(t, bufio.NewReader(strings.NewReader(string(r.body))), -1); len(raw) != len(whole) {
		t.Errorf("?after=0 replays %d events, Last-Event-ID 0 %d", len(raw), len(whole))
	}
	c.do("GET", "/sessions/"+sid+"/turns/"+turnID+"/events?after=x", nil).expect(t, http.StatusBadRequest)
	_, err := c.api().TurnEvents(t.Context(), sid, "turn_nope", 0)
	refusal(t, err, http.StatusNotFound, "not-found")
}

// The client's own resume: a connection cut in the middle of a turn's
// stream is resumed by aapclient from the last whole event, and the caller
// reads every event once, in order.
func TestAapclientResumesACutStream(t *testing.T) {
	s := startServer(t)
	c := s.newTenant(t)
	sid := c.echoSession(nil)
	cut := &cuttingTransport{next: checkedTransport{t: t}, after: 300}
	api, err := aapclient.New(s.base, aapclient.WithAPIKey(c.key), aapclient.WithHTTPClient(&http.Client{Transport: cut}))
	if err != nil {
		t.Fatal(err)
	}
	stream, err := api.StreamTurn(t.Context(), sid, aap.TurnRequest{Stream: aap.StreamDelta,
		Messages: []aap.Message{aap.UserMessage(slowWords(30, 10))}})
	if err != nil {
		t.Fatal(err)
	}
	text, n := "", 0
	for e, err := range stream.Events() {
		if err != nil {
			t.Fatalf("after event %d: %v", stream.LastEventID(), err)
		}
		if n++; stream.LastEventID() != n {
			t.Fatalf("event %d has id %d: a gap or a duplicate", n, stream.LastEventID())
		}
		if e.Type == aap.EventTextDelta {
			text += e.Delta
		}
	}
	if text != wordsText(30) {
		t.Errorf("text %q", text)
	}
	if stream.Resumes() == 0 || cut.cuts.Load() == 0 {
		t.Errorf("the stream was resumed %d times after %d cuts: the test cut nothing", stream.Resumes(), cut.cuts.Load())
	}
}

func TestCancelStopsTheTurnAndKeepsWhatWasProduced(t *testing.T) {
	s := startServer(t)
	c := s.newTenant(t)
	sid := c.echoSession(nil)
	st := c.openTurn(sid, streamUser("delta", slowWords(200, 20)))
	turnID := st.TurnID()
	st.read(5)

	info := c.cancelTurn(sid, turnID)
	if info.Status != "cancelled" {
		t.Fatalf("after cancel: %+v", info)
	}
	rest := st.read(-1)
	if len(rest) == 0 || rest[len(rest)-1].Type != aap.EventTurnStop {
		t.Fatalf("stream did not end with turn_stop: %v", types(rest))
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
	if info = c.cancelTurn(sid, turnID); info.Status != "cancelled" {
		t.Errorf("second cancel: %+v", info)
	}
}

func TestCancelFromAnotherReplica(t *testing.T) {
	s := startServer(t)
	other := startServer(t)
	c := s.newTenant(t)
	sid := c.echoSession(nil)
	st := c.openTurn(sid, streamUser("message", slowWords(300, 20)))
	oc := &client{t: t, base: other.base, key: c.key}
	if info := oc.cancelTurn(sid, st.TurnID()); info.Status != "cancelled" {
		t.Fatalf("cancel via other replica: %+v", info)
	}
	events := st.read(-1)
	if events[len(events)-1].Type != aap.EventTurnStop {
		t.Errorf("events = %v", types(events))
	}
}

func TestDeleteSessionWithRunningTurnLeavesNothing(t *testing.T) {
	s := startServer(t)
	c := s.newTenant(t)
	sid := c.echoSession(nil)
	c.say(sid, "before")
	st := c.openTurn(sid, streamUser("delta", slowWords(200, 20)))
	st.read(3)
	c.deleteSession(sid)
	events := st.read(-1)
	if len(events) == 0 || events[len(events)-1].Type != aap.EventTurnStop {
		t.Errorf("stream after delete: %v", types(events))
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

// Raw requests: the replay of a create is judged on the bytes of its body
// and headers, for request bodies that differ only in their spacing.
func TestIdempotentSessionCreate(t *testing.T) {
	s := startServer(t)
	c := s.newTenant(t)
	body := `{"agent":{"name":"echo"}}`
	first := c.do("POST", "/sessions", body, "Idempotency-Key", "create-1").expect(t, http.StatusCreated)
	again := c.do("POST", "/sessions", " { \"agent\" : {\"name\":\"echo\"} } ", "Idempotency-Key", "create-1").expect(t, http.StatusCreated)
	if string(first.body) != string(again.body) || again.Header.Get(httpapi.ReplayedHeader) != "true" {
		t.Errorf("retry: %s (replayed %q), first %s", again.body, again.Header.Get(httpapi.ReplayedHeader), first.body)
	}
	if list := c.listSessions(aapclient.ListOptions{}); len(list.Sessions) != 1 {
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

	first := c.sendTurn(sid, user("once"), aapclient.WithIdempotencyKey("t-1"))
	again := c.sendTurn(sid, user("once"), aapclient.WithIdempotencyKey("t-1"))
	if !reflect.DeepEqual(first.TurnResponse, again.TurnResponse) || first.TurnID == "" || first.TurnID != again.TurnID {
		t.Errorf("replay differs:\n%+v\n%+v", first, again)
	}
	if first.Replayed || !again.Replayed {
		t.Errorf("replay marked %v, first %v", again.Replayed, first.Replayed)
	}
	_, err := c.api().SendTurn(t.Context(), sid, turnRequest(t, user("twice")), aapclient.WithIdempotencyKey("t-1"))
	refusal(t, err, http.StatusUnprocessableEntity, "idempotency-key-reused")

	// A stream replays its recorded events.
	_, events := c.streamTurn(sid, streamUser("message", "/think a\nstreamed"))
	streamA, evA := c.streamTurn(sid, streamUser("message", "/think a\nstreamed"), aapclient.WithIdempotencyKey("t-2"))
	streamB, evB := c.streamTurn(sid, streamUser("message", "/think a\nstreamed"), aapclient.WithIdempotencyKey("t-2"))
	if !reflect.DeepEqual(evA, evB) || len(evA) != len(events) {
		t.Errorf("stream replay differs:\n%v\n%v", evA, evB)
	}
	if streamA.Replayed() || !streamB.Replayed() || streamA.TurnID() != streamB.TurnID() {
		t.Errorf("stream replay: turn %s replayed %v, then turn %s replayed %v",
			streamA.TurnID(), streamA.Replayed(), streamB.TurnID(), streamB.Replayed())
	}
	// Concurrent retries of one request run it once.
	var wg sync.WaitGroup
	errs := make([]error, 4)
	api, raced := c.api(), turnRequest(t, user("raced"))
	for i := range errs {
		wg.Go(func() {
			_, errs[i] = api.SendTurn(t.Context(), sid, raced, aapclient.WithIdempotencyKey("t-3"))
		})
	}
	wg.Wait()
	n := 0
	for _, m := range c.history(sid, aap.HistoryFull) {
		if m.Role == aap.RoleUser && m.Content.Text == "raced" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("the raced request ran %d times (errors %v)", n, errs)
	}
	for _, err := range errs {
		if err != nil {
			t.Errorf("raced retry: %v", err)
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
	c.streamTurn(sid, streamUser("delta", "/error boom"))
	api := c.api()
	page, err := api.ListTurns(t.Context(), sid, aapclient.ListOptions{Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Turns) != 2 || page.Next == "" {
		t.Fatalf("page 1 = %+v", page)
	}
	if page.Turns[0].Status != "failed" || page.Turns[0].StopReason != aap.StopError || page.Turns[0].Error == nil || page.Turns[0].Error.Type != aap.TurnErrorModel {
		t.Errorf("failed turn = %+v", page.Turns[0])
	}
	if page.Turns[1].StopReason != aap.StopToolUse || page.Turns[1].Status != "completed" || page.Turns[1].DurationMs == nil {
		t.Errorf("tool_use turn = %+v", page.Turns[1])
	}
	page2, err := api.ListTurns(t.Context(), sid, aapclient.ListOptions{Limit: 2, After: page.Next})
	if err != nil {
		t.Fatal(err)
	}
	if len(page2.Turns) != 1 || page2.Next != "" || page2.Turns[0].Stream != aap.StreamNone {
		t.Errorf("page 2 = %+v", page2)
	}
	_, err = s.newTenant(t).api().ListTurns(t.Context(), sid, aapclient.ListOptions{})
	refusal(t, err, http.StatusNotFound, "not-found")
}
