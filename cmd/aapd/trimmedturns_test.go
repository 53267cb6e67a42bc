package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/aapclient"
	"github.com/aapd/aapd/store"
	"github.com/aapd/aapd/store/storetest"
)

// A session whose full history retention trimmed reads, in every door and
// in every read by turn, only what follows the trimmed prefix — also where
// the session still holds rows of the prefix that a fork reads — and runs
// turns on from there: the full history is the rest of the old one and
// the new turns, message for message; the replay of a turn inside the
// prefix answers without its trimmed messages; the sandbox-agent log shows
// none of the trimmed seed or inputs; a fork at the prefix's end works, one
// inside it is 409 history-trimmed, and an export is version 3.
func TestTurnsOnATrimmedSessionReadOnlyWhatFollowsThePrefix(t *testing.T) {
	t.Parallel()
	s := startParallelServer(t)
	ctx := context.Background()
	tn := storetest.NewTenant(t, s.Store)
	c := &client{t: t, base: s.base, key: tn.Key}
	sid := c.createSession(map[string]any{"agent": map[string]any{"name": "echo"}, "messages": []any{
		map[string]any{"role": "user", "content": "seed-question"},
		map[string]any{"role": "assistant", "content": "seed-answer"},
	}})
	// Seqs: the seed 1-2, then a user message and the echo of it per turn.
	first := c.sendTurn(sid, map[string]any{"messages": []any{map[string]any{"role": "user", "content": "q0"}}},
		aapclient.WithIdempotencyKey("trim-k0"))
	if got := plainTexts(first.Messages); len(got) != 1 || got[0] != "Echo: q0" {
		t.Fatalf("first turn: %q", got)
	}
	c.say(sid, "q1")
	c.say(sid, "q2")
	// A fork of the first 4 messages reads the source's rows 1-4 in
	// place: the trim keeps them in the source, which must not read them.
	var early struct {
		SessionID string `json:"sessionId"`
	}
	c.do("POST", "/sessions/"+sid+"/fork", `{"at":{"message":4}}`).expect(t, http.StatusCreated).json(t, &early)
	before := c.history(sid, aap.HistoryFull)
	if len(before) != 8 {
		t.Fatalf("full history before the trim: %d messages, want 8", len(before))
	}
	storetest.Continue(t, s.Store, tn.ID, sid, 8).Compact(6)
	storetest.Exec(t, storetest.URL(t), `UPDATE messages SET created_at = now() - interval '40 days'
		WHERE tenant_id = $1 AND session_id = $2`, tn.ID, sid)
	if tr, err := s.Store.SessionTrimHistory(ctx, tn.ID, sid, time.Now().Add(-30*retentionDay), 100); err != nil || tr.Through != 6 || tr.More {
		t.Fatalf("trim: %+v, %v; want through 6", tr, err)
	}
	if n := sessionRows(t, storetest.URL(t), tn.ID, sid)["messages"]; n != 6 {
		t.Fatalf("the source holds %d rows; want 6 (1-4 for the fork, 7-8)", n)
	}

	// The event logs of the turns the prefix covers (q0, q1) are gone from
	// the database; reading one is 409 history-trimmed; q2's is whole.
	url := storetest.URL(t)
	for _, text := range []string{"Echo: q0", "Echo: q1", "Echo: q2"} {
		var n int
		storetest.Scan(t, url, `SELECT (SELECT count(*) FROM turns WHERE tenant_id = $1 AND session_id = $2 AND events::text LIKE $3)
			+ (SELECT count(*) FROM turn_event_batches WHERE tenant_id = $1 AND session_id = $2 AND events::text LIKE $3)`,
			[]any{tn.ID, sid, "%" + text + "%"}, &n)
		if want := map[bool]int{true: 1, false: 0}[text == "Echo: q2"]; n != want {
			t.Errorf("%q is in %d rows of the event log, want %d", text, n, want)
		}
	}
	var kept string
	storetest.Scan(t, url, `SELECT id FROM turns WHERE tenant_id = $1 AND session_id = $2 ORDER BY created_at, id OFFSET 2 LIMIT 1`,
		[]any{tn.ID, sid}, &kept)
	r := c.do("GET", "/sessions/"+sid+"/turns/"+first.TurnID+"/events", nil)
	if r.StatusCode != http.StatusConflict || r.problem(t)["type"] != aapclient.ProblemHistoryTrimmed {
		t.Errorf("events of a trimmed turn: %d %s; want 409 history-trimmed", r.StatusCode, r.body)
	}
	r = c.do("GET", "/sessions/"+sid+"/turns/"+kept+"/events?after=0", nil).expect(t, http.StatusOK)
	if !strings.Contains(string(r.body), "Echo: q2") || !strings.Contains(string(r.body), "turn_stop") {
		t.Errorf("events of the turn after the prefix: %s; want its whole log", r.body)
	}
	var slog struct {
		Events []struct {
			TurnID string `json:"turnId"`
		} `json:"events"`
	}
	c.do("GET", "/sessions/"+sid+"/events?limit=1000", nil).expect(t, http.StatusOK).json(t, &slog)
	if len(slog.Events) == 0 || slog.Events[0].TurnID != kept || strings.Contains(fmt.Sprint(slog.Events), first.TurnID) {
		t.Errorf("session event log %+v; want it to start with turn %s, the first after the prefix", slog.Events, kept)
	}

	// Turns run on through the pipeline.
	for _, q := range []string{"q3", "q4"} {
		if got := plainTexts(c.say(sid, q).Messages); len(got) != 1 || got[0] != "Echo: "+q {
			t.Fatalf("turn %s on the trimmed session: %q", q, got)
		}
	}
	want := append(append([]aap.Message{}, before[6:]...),
		aap.UserMessage("q3"), aap.AssistantMessage(aap.TextBlock("Echo: q3")), aap.UserMessage("q4"), aap.AssistantMessage(aap.TextBlock("Echo: q4")))
	var full struct {
		History        map[string][]aap.Message `json:"history"`
		TrimmedThrough int64                    `json:"trimmedThrough"`
	}
	c.do("GET", "/sessions/"+sid+"/history?type=full", nil).expect(t, http.StatusOK).json(t, &full)
	if full.TrimmedThrough != 6 {
		t.Errorf("trimmedThrough %d, want 6", full.TrimmedThrough)
	}
	sameMessages(t, "full history after the trim and two turns", full.History["full"], want)

	// The replay of a turn of the prefix answers without what was trimmed
	// (the source's rows the fork reads are not the source's to show).
	replay := c.sendTurn(sid, map[string]any{"messages": []any{map[string]any{"role": "user", "content": "q0"}}},
		aapclient.WithIdempotencyKey("trim-k0"))
	if !replay.Replayed || len(replay.Messages) != 0 {
		t.Errorf("replay of a trimmed turn: replayed %v, messages %q; want its messages left out", replay.Replayed, plainTexts(replay.Messages))
	}

	// The sandbox-agent log: no trimmed seed message nor trimmed input,
	// and session.started says where the history was trimmed.
	events := c.saAll(sid, 1000)
	if len(events) == 0 || events[0].Type != "session.started" ||
		!strings.Contains(string(events[0].Data), `"historyTrimmedThrough":6`) {
		t.Fatalf("sandbox-agent log's start: %+v", events[:min(1, len(events))])
	}
	var users []string
	for _, e := range events {
		if d := e.data(t); e.Type == "item.completed" && d.Item != nil && d.Item.Role == "user" {
			for _, p := range d.Item.Content {
				users = append(users, p.Text)
			}
		}
	}
	if all, err := json.Marshal(events); err != nil || bytes.Contains(all, []byte("Echo: q0")) || bytes.Contains(all, []byte("Echo: q1")) {
		t.Errorf("sandbox-agent log shows a trimmed turn's output (%v): %s", err, all)
	}
	if fmt.Sprint(users) != "[q2 q3 q4]" {
		t.Errorf("sandbox-agent user messages %q; want [q2 q3 q4]: none of the trimmed prefix", users)
	}

	// Forks: inside the prefix refused, at its end the rest.
	r = c.do("POST", "/sessions/"+sid+"/fork", `{"at":{"message":5}}`)
	if r.StatusCode != http.StatusConflict || r.problem(t)["type"] != aapclient.ProblemHistoryTrimmed {
		t.Errorf("fork inside the trimmed prefix: %d %s; want 409 history-trimmed", r.StatusCode, r.body)
	}
	var fork struct {
		SessionID string `json:"sessionId"`
	}
	c.do("POST", "/sessions/"+sid+"/fork", `{}`).expect(t, http.StatusCreated).json(t, &fork)
	c.do("GET", "/sessions/"+fork.SessionID+"/history?type=full", nil).expect(t, http.StatusOK).json(t, &full)
	if full.TrimmedThrough != 6 {
		t.Errorf("fork's trimmedThrough %d, want 6", full.TrimmedThrough)
	}
	sameMessages(t, "fork of the trimmed session", full.History["full"], want)
	sameMessages(t, "the fork made before the trim", c.history(early.SessionID, aap.HistoryFull), before[:4])

	// Export: version 3, the messages after the prefix.
	r = c.do("GET", "/sessions/"+sid+"/export", nil).expect(t, http.StatusOK)
	sc := bufio.NewScanner(bytes.NewReader(r.body))
	sc.Buffer(nil, 1<<20)
	var header struct {
		Version int `json:"version"`
		Session struct {
			TrimmedThrough int64 `json:"trimmedThrough"`
			Messages       int64 `json:"messages"`
		} `json:"session"`
	}
	if !sc.Scan() || json.Unmarshal(sc.Bytes(), &header) != nil || header.Version != 3 ||
		header.Session.TrimmedThrough != 6 || header.Session.Messages != 12 {
		t.Errorf("export header %s: want version 3, trimmedThrough 6, messages 12", sc.Bytes())
	}
}

// texts are the plain texts of messages.
func plainTexts(msgs []aap.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.Content.PlainText()
	}
	return out
}

// sameMessages fails the test unless got and want are the same messages
// (role and text), one for one.
func sameMessages(t *testing.T, what string, got, want []aap.Message) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d messages %q, want %d %q", what, len(got), plainTexts(got), len(want), plainTexts(want))
		return
	}
	for i := range want {
		if got[i].Role != want[i].Role || got[i].Content.PlainText() != want[i].Content.PlainText() {
			t.Errorf("%s: message %d is %s %q, want %s %q", what, i, got[i].Role, got[i].Content.PlainText(),
				want[i].Role, want[i].Content.PlainText())
		}
	}
}

// Every door's read of a full history says where retention trimmed it, as
// AAP v3's history read does (trimmedThrough): AAP v1's session read
// (trimmedThrough beside history), the OpenAI door's conversation items
// (trimmed_through on the list page) and the sandbox-agent log
// (historyTrimmedThrough in session.started's metadata); an untrimmed
// session's reads have no such member.
func TestEveryDoorsHistoryReadSaysWhereTheFullHistoryWasTrimmed(t *testing.T) {
	t.Parallel()
	s := startParallelServer(t)
	tn := storetest.NewTenant(t, s.Store)
	c := &client{t: t, base: s.base, key: tn.Key}
	conv := trimmedConversation(t, s, tn.ID)
	whole := storetest.NewConversation(t, s.Store, tn.ID, store.SessionCreateParams{})
	whole.Say("q0", "a0")

	var v1 struct {
		History struct {
			Full []aap.Message `json:"full"`
		} `json:"history"`
		TrimmedThrough *int64 `json:"trimmedThrough"`
	}
	c.do("GET", "/v1/session/"+conv.ID, nil).expect(t, http.StatusOK).json(t, &v1)
	if v1.TrimmedThrough == nil || *v1.TrimmedThrough != 6 || len(v1.History.Full) != 2 || v1.History.Full[0].Content.PlainText() != "q3" {
		t.Errorf("AAP v1 session: trimmedThrough %v, full %q; want 6 and the 2 messages after it", v1.TrimmedThrough, plainTexts(v1.History.Full))
	}

	type itemPage struct {
		Data []struct {
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"data"`
		TrimmedThrough *int64 `json:"trimmed_through"`
	}
	var items itemPage
	c.do("GET", "/openai/v1/conversations/"+conv.ID+"/items?order=asc", nil).expect(t, http.StatusOK).json(t, &items)
	if items.TrimmedThrough == nil || *items.TrimmedThrough != 6 || len(items.Data) != 2 ||
		len(items.Data[0].Content) == 0 || items.Data[0].Content[0].Text != "q3" {
		t.Errorf("OpenAI conversation items: trimmed_through %v, items %+v; want 6 and the items of q3 and a3", items.TrimmedThrough, items.Data)
	}
	// Every page says it, not only the one that would have held the first.
	c.do("GET", "/openai/v1/conversations/"+conv.ID+"/items?limit=1", nil).expect(t, http.StatusOK).json(t, &items)
	if items.TrimmedThrough == nil || *items.TrimmedThrough != 6 {
		t.Errorf("OpenAI conversation items, newest first: trimmed_through %v; want 6", items.TrimmedThrough)
	}

	events := c.saAll(conv.ID, 1000)
	if len(events) == 0 || events[0].Type != "session.started" || !strings.Contains(string(events[0].Data), `"historyTrimmedThrough":6`) {
		t.Errorf("sandbox-agent session.started: %+v; want historyTrimmedThrough 6 in its metadata", events[:min(1, len(events))])
	}

	// An untrimmed session's reads have none of it.
	for _, path := range []string{"/v1/session/" + whole.ID, "/openai/v1/conversations/" + whole.ID + "/items",
		"/sessions/" + whole.ID + "/history?type=full", saPath("/sessions/" + whole.ID + "/events")} {
		r := c.do("GET", path, nil).expect(t, http.StatusOK)
		if b := strings.ToLower(string(r.body)); strings.Contains(b, "trimmedthrough") || strings.Contains(b, "trimmed_through") {
			t.Errorf("GET %s of an untrimmed session: %s; want no trimmed member", path, r.body)
		}
	}
}

// The OpenAI door's items of a trimmed conversation start with the first
// whole item after trimmed_through: a tool's output whose call the trim
// took (the prefix may end between them) is not listed alone — neither a
// server tool's, which shows only as its call's mcp_call, nor a client
// function's function_call_output — and its item's id is a 404 as the
// trimmed items' are; the items after it read as before.
func TestOpenAIItemsOfATrimmedConversationListNoOutputWithoutItsCall(t *testing.T) {
	t.Parallel()
	s := startParallelServer(t)
	tn := storetest.NewTenant(t, s.Store)
	c := &client{t: t, base: s.base, key: tn.Key}
	clock := aap.ToolCall{ToolCallID: "call_clock", Name: "clock", Input: json.RawMessage(`{}`)}
	server := storetest.NewConversation(t, s.Store, tn.ID, store.SessionCreateParams{AgentTools: []aap.ServerToolRef{{Name: "clock", Trust: true}}})
	server.Turn([]aap.Message{aap.UserMessage("q0")}, // seqs 1-4: the call at 2, its output at 3
		[]aap.Message{aap.AssistantMessage(aap.ToolUseBlock(clock)), aap.ToolMessage("call_clock", "noon"), aap.AssistantMessage(aap.TextBlock("a0"))}, nil)
	server.Say("q1", "a1")
	lookup := storetest.ToolCall("call_lookup")
	function := storetest.NewConversation(t, s.Store, tn.ID, store.SessionCreateParams{
		ClientTools: []aap.ToolSpec{{Name: "lookup", Description: "looks up", Parameters: json.RawMessage(`{"type":"object"}`)}}})
	function.Turn([]aap.Message{aap.UserMessage("q0")}, []aap.Message{aap.AssistantMessage(aap.ToolUseBlock(lookup))}, // seqs 1-2
		[]aap.PendingToolCall{{ToolCall: lookup}})
	function.Turn([]aap.Message{aap.ToolMessage("call_lookup", "found")}, []aap.Message{aap.AssistantMessage(aap.TextBlock("a0"))}, nil) // 3-4
	function.Say("q1", "a1")
	for _, conv := range []*storetest.Conversation{server, function} {
		conv.Trim(storetest.URL(t), 2) // the call gone, its output at 3 kept
		var page struct {
			Data []struct {
				ID      string `json:"id"`
				Type    string `json:"type"`
				Content []struct {
					Text string `json:"text"`
				} `json:"content"`
			} `json:"data"`
			TrimmedThrough int64 `json:"trimmed_through"`
		}
		r := c.do("GET", "/openai/v1/conversations/"+conv.ID+"/items?order=asc", nil).expect(t, http.StatusOK)
		r.json(t, &page)
		var got []string
		for _, it := range page.Data {
			text := ""
			if len(it.Content) > 0 {
				text = it.Content[0].Text
			}
			got = append(got, it.Type+":"+text)
		}
		if page.TrimmedThrough != 2 || fmt.Sprint(got) != "[message:a0 message:q1 message:a1]" {
			t.Errorf("items of %s, trimmed between a call and its output: trimmed_through %d, %q; want 2 and a0, q1, a1 (%s)",
				conv.ID, page.TrimmedThrough, got, r.body)
		}
		output := "fco_" + strings.TrimPrefix(conv.ID, "sess_") + "_3"
		if r := c.do("GET", "/openai/v1/conversations/"+conv.ID+"/items/"+output, nil); r.StatusCode != http.StatusNotFound {
			t.Errorf("GET the item of the output whose call was trimmed: %d %s; want 404", r.StatusCode, r.body)
		}
	}
}
