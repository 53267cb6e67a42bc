package main

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/aapd/aapd/aap"
	v3 "github.com/aapd/aapd/httpapi/v3"
)

// The session event log (docs/protocols.md): every event of every turn of
// a session, in order, as JSON pages or followed live.

// eventPages reads the whole log as JSON pages of limit events.
func (c *client) eventPages(sid string, limit int) []v3.SessionEventItem {
	c.t.Helper()
	var all []v3.SessionEventItem
	after := ""
	for range 1000 {
		var page v3.SessionEventList
		c.do("GET", fmt.Sprintf("/sessions/%s/events?limit=%d&after=%s", sid, limit, after), nil).expect(c.t, http.StatusOK).json(c.t, &page)
		all = append(all, page.Events...)
		if len(page.Events) > limit {
			c.t.Fatalf("a page of %d events for limit %d", len(page.Events), limit)
		}
		if !page.HasMore {
			if page.Next != "" {
				after = page.Next
			}
			// Past the end: an empty page that keeps the cursor.
			var end v3.SessionEventList
			c.do("GET", "/sessions/"+sid+"/events?after="+after, nil).expect(c.t, http.StatusOK).json(c.t, &end)
			if len(end.Events) != 0 || end.HasMore || end.Next != after {
				c.t.Errorf("the page after the end = %+v, want empty with next %q", end, after)
			}
			return all
		}
		after = page.Next
	}
	c.t.Fatal("the log never ended")
	return nil
}

// turnLogs reads each turn's own stream, oldest turn first: what the
// session log must be, concatenated.
func (c *client) turnLogs(sid string) (turnIDs []string, events []sseEvent) {
	c.t.Helper()
	var turns v3.TurnList
	c.do("GET", "/sessions/"+sid+"/turns?limit=100", nil).expect(c.t, http.StatusOK).json(c.t, &turns)
	for i := len(turns.Turns) - 1; i >= 0; i-- {
		id := turns.Turns[i].TurnID
		res := c.openGet("/sessions/" + sid + "/turns/" + id + "/events")
		evs := readEvents(c.t, bufio.NewReader(res.Body), -1)
		res.Body.Close()
		for range evs {
			turnIDs = append(turnIDs, id)
		}
		events = append(events, evs...)
	}
	return turnIDs, events
}

// openGet opens a GET whose answer is a stream.
func (c *client) openGet(path string, headers ...string) *http.Response {
	c.t.Helper()
	req, _ := http.NewRequest("GET", c.base+path, nil)
	req.Header.Set("Authorization", "Bearer "+c.key)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	checkOpenAPIStream(c.t, req, nil, res) // openapi_test.go
	if res.StatusCode != http.StatusOK {
		c.t.Fatalf("GET %s: status %d", path, res.StatusCode)
	}
	return res
}

func TestSessionEventLogPagesEveryEventOfEveryTurnInOrder(t *testing.T) {
	s := startServer(t)
	c := s.newTenant(t)
	sid := c.echoSession([]aap.ServerToolRef{{Name: "clock", Trust: true}}, "lookup")
	c.say(sid, "one")
	c.stream(sid, streamUser("delta", "/think hm\n/words 7"))
	c.stream(sid, streamUser("message", "/tool clock {}\n/tool lookup {}"))
	c.do("POST", "/sessions/"+sid+"/turns", map[string]any{"stream": "delta", "messages": []any{
		msg("tool", "toolCallId", toolCalls(c.history(sid, aap.HistoryFull)[5:])[1].ToolCallID, "content", "found")}}).expect(t, http.StatusOK)
	c.stream(sid, streamUser("delta", "/error boom"))

	wantTurns, want := c.turnLogs(sid)
	if len(wantTurns) < 20 {
		t.Fatalf("the turns have only %d events", len(wantTurns))
	}
	for _, limit := range []int{1, 3, 1000} {
		got := c.eventPages(sid, limit)
		if len(got) != len(want) {
			t.Fatalf("limit %d: %d events, want the turns' %d", limit, len(got), len(want))
		}
		seen := map[string]bool{}
		for i, e := range got {
			w := want[i]
			data, _ := json.Marshal(e.Data)
			if e.TurnID != wantTurns[i] || string(e.Event) != w.Event || fmt.Sprint(e.Seq) != w.ID {
				t.Fatalf("limit %d, event %d = %s %s #%d, want %s %s #%s", limit, i, e.TurnID, e.Event, e.Seq, wantTurns[i], w.Event, w.ID)
			}
			if e.Event == aap.EventTurnStart {
				if e.Data.TurnID != e.TurnID {
					t.Errorf("turn_start data = %s, want its turn's id", data)
				}
			} else if string(data) != w.Data {
				t.Errorf("event %d data = %s, want %s", i, data, w.Data)
			}
			if seen[e.ID] {
				t.Errorf("id %s given twice", e.ID)
			}
			seen[e.ID] = true
		}
		if last := got[len(got)-1]; last.Event != aap.EventTurnStop || last.Data.Error == nil || last.Data.Error.Type != aap.TurnErrorModel {
			t.Errorf("the log ends with %+v, want the failed turn's turn_stop and its error", last)
		}
	}

	// Cursors: resuming in the middle gives the rest; bad ones are 400s.
	all := c.eventPages(sid, 1000)
	var rest v3.SessionEventList
	c.do("GET", "/sessions/"+sid+"/events?after="+all[4].ID, nil).expect(t, http.StatusOK).json(t, &rest)
	if len(rest.Events) != len(all)-5 || rest.Events[0].ID != all[5].ID {
		t.Errorf("after event 5: %d events starting %+v", len(rest.Events), rest.Events[0])
	}
	beyond := base64.RawURLEncoding.EncodeToString([]byte(all[0].TurnID + ".99"))
	other := c.echoSession(nil)
	for _, tc := range []struct{ query, field string }{
		{"after=not-a-cursor", "after"},
		{"after=" + beyond, "after"},
		{"limit=0", "limit"},
		{"limit=1001", "limit"},
	} {
		r := c.do("GET", "/sessions/"+sid+"/events?"+tc.query, nil)
		if p := checkProblem(t, r, http.StatusBadRequest, "invalid-request"); p != nil && p["field"] != tc.field {
			t.Errorf("%s: field %v", tc.query, p["field"])
		}
	}
	// A cursor of another session's log is not one of this one's.
	checkProblem(t, c.do("GET", "/sessions/"+other+"/events?after="+all[0].ID, nil), http.StatusBadRequest, "invalid-request")
	checkProblem(t, c.do("GET", "/sessions/"+sid+"/events", nil, "Last-Event-ID", "garbage"), http.StatusBadRequest, "invalid-request")
	// Another tenant's session is a 404, as on every session route.
	checkProblem(t, s.newTenant(t).do("GET", "/sessions/"+sid+"/events", nil), http.StatusNotFound, "not-found")
	var empty v3.SessionEventList
	c.do("GET", "/sessions/"+other+"/events", nil).expect(t, http.StatusOK).json(t, &empty)
	if len(empty.Events) != 0 || empty.Next != "" || empty.HasMore {
		t.Errorf("a session without turns: %+v", empty)
	}
}

// The log followed live, from a replica other than the one running the
// turns, and resumed with Last-Event-ID.
func TestSessionEventLogFollowsLiveAcrossReplicasAndResumes(t *testing.T) {
	a := startServer(t)
	b := startServer(t)
	ca := a.newTenant(t)
	cb := &client{t: t, base: b.base, key: ca.key}
	sid := ca.echoSession(nil)
	ca.say(sid, "before")

	res := cb.openGet("/sessions/"+sid+"/events", "Accept", "text/event-stream")
	defer res.Body.Close()
	if ct := res.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	live := bufio.NewReader(res.Body)
	first := readEvents(t, live, 2) // the recorded turn: turn_start ... turn_stop
	if first[0].Event != "turn_start" {
		t.Fatalf("first events %v", eventTypes(first))
	}
	for first[len(first)-1].Event != "turn_stop" {
		first = append(first, readEvents(t, live, 1)...)
	}
	// A turn runs on replica a while b's stream follows it.
	_, streamed := ca.stream(sid, streamUser("delta", slowWords(20, 10)))
	followed := readEvents(t, live, len(streamed))
	for i := range streamed {
		if followed[i].Event != streamed[i].Event || (i > 0 && followed[i].Data != streamed[i].Data) {
			t.Fatalf("followed event %d = %s %s, the turn's own stream %s %s", i, followed[i].Event, followed[i].Data, streamed[i].Event, streamed[i].Data)
		}
	}
	if start := followed[0].parse(t); start.TurnID == "" {
		t.Errorf("turn_start of the log = %s, want the turn's id", followed[0].Data)
	}
	// A stream started on b too, while b follows.
	cb.say(sid, "from b")
	more := readEvents(t, live, 1)
	for more[len(more)-1].Event != "turn_stop" {
		more = append(more, readEvents(t, live, 1)...)
	}

	// Resumed with Last-Event-ID in the middle of the followed turn: the
	// same events after it, then the next turn.
	mid := followed[5]
	res2 := ca.openGet("/sessions/"+sid+"/events", "Accept", "text/event-stream", "Last-Event-ID", mid.ID)
	defer res2.Body.Close()
	resumed := readEvents(t, bufio.NewReader(res2.Body), len(followed)-6+len(more))
	want := append(append([]sseEvent{}, followed[6:]...), more...)
	for i := range want {
		if resumed[i].ID != want[i].ID || resumed[i].Data != want[i].Data {
			t.Fatalf("resumed event %d = %+v, want %+v", i, resumed[i], want[i])
		}
	}
}

// The log's stream ends when its session is deleted: mid-turn with that
// turn's turn_stop ("session_deleted"), between turns at once; and, for
// a follower, when the server drains.
func TestSessionEventLogEndsOnDeletionAndShutdown(t *testing.T) {
	s := startServer(t)
	c := s.newTenant(t)

	ended := func(res *http.Response) chan []sseEvent {
		done := make(chan []sseEvent, 1)
		go func() { done <- readEvents(t, bufio.NewReader(res.Body), -1) }()
		return done
	}
	wait := func(what string, done chan []sseEvent) []sseEvent {
		select {
		case evs := <-done:
			return evs
		case <-time.After(10 * time.Second):
			t.Fatalf("the log's stream did not end %s", what)
			return nil
		}
	}

	// Between turns.
	idle := c.echoSession(nil)
	c.say(idle, "hi")
	res := c.openGet("/sessions/"+idle+"/events", "Accept", "text/event-stream")
	defer res.Body.Close()
	done := ended(res)
	time.Sleep(100 * time.Millisecond)
	c.do("DELETE", "/sessions/"+idle, nil).expect(t, http.StatusNoContent)
	if evs := wait("after a deletion between turns", done); len(evs) == 0 || evs[len(evs)-1].Event != "turn_stop" {
		t.Errorf("events = %v", eventTypes(evs))
	}

	// Mid-turn.
	busy := c.echoSession(nil)
	turn := c.openStream(busy, streamUser("delta", slowWords(3000, 20)))
	defer turn.Body.Close()
	readEvents(t, bufio.NewReader(turn.Body), 2)
	res = c.openGet("/sessions/"+busy+"/events", "Accept", "text/event-stream")
	defer res.Body.Close()
	done = ended(res)
	time.Sleep(200 * time.Millisecond)
	c.do("DELETE", "/sessions/"+busy, nil).expect(t, http.StatusNoContent)
	evs := wait("after a deletion mid-turn", done)
	last := evs[len(evs)-1].parse(t)
	if last.Type != aap.EventTurnStop || last.Error == nil || last.Error.Type != aap.TurnErrorSessionDeleted {
		t.Errorf("the log ended with %+v (%v)", last, eventTypes(evs))
	}

	// A drain ends followers where they are.
	quiet := c.echoSession(nil)
	res = c.openGet("/sessions/"+quiet+"/events", "Accept", "text/event-stream")
	defer res.Body.Close()
	done = ended(res)
	s.API.StopStreams()
	wait("when the server drains", done)
}

// Pending tool calls and permission requests are on the session's record,
// so a client that lost its state can rebuild it.
func TestSessionRecordShowsPendingToolCallsAndPermissionRequests(t *testing.T) {
	s := startServer(t)
	c := s.newTenant(t)
	sid := c.echoSession([]aap.ServerToolRef{{Name: "clock"}}, "lookup")
	calls := toolCalls(c.say(sid, `/tool lookup {"q":"tokyo"}`+"\n/tool clock {}").Messages)
	var rec v3.SessionRecord
	c.do("GET", "/sessions/"+sid, nil).expect(t, http.StatusOK).json(t, &rec)
	if len(rec.Pending) != 2 || rec.Status != "requires_action" {
		t.Fatalf("record = %+v", rec)
	}
	want := map[string]string{calls[0].ToolCallID: v3.AwaitingResult, calls[1].ToolCallID: v3.AwaitingPermission}
	for _, p := range rec.Pending {
		if want[p.ToolCallID] != p.Awaiting {
			t.Errorf("pending %+v, want awaiting %q", p, want[p.ToolCallID])
		}
	}
	if string(rec.Pending[0].Input) != `{"q":"tokyo"}` || rec.Pending[0].Name != "lookup" {
		t.Errorf("pending[0] = %+v", rec.Pending[0])
	}
	// The record is enough to answer them.
	answers := []any{}
	for _, p := range rec.Pending {
		if p.Awaiting == v3.AwaitingResult {
			answers = append(answers, msg("tool", "toolCallId", p.ToolCallID, "content", "sunny"))
		} else {
			answers = append(answers, msg("tool_permission", "toolCallId", p.ToolCallID, "granted", true))
		}
	}
	c.turn(sid, map[string]any{"messages": answers})
	var after v3.SessionRecord
	c.do("GET", "/sessions/"+sid, nil).expect(t, http.StatusOK).json(t, &after)
	if len(after.Pending) != 0 || after.Status != "idle" {
		t.Errorf("after answering: %+v", after)
	}
}
