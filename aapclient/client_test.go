package aapclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/aapclient"
)

// echoSession creates a session of the echo agent with the given client
// tools.
func echoSession(t *testing.T, c *aapclient.Client, clientTools ...string) string {
	t.Helper()
	req := aap.CreateSessionRequest{Agent: aap.AgentConfig{Name: "echo"}}
	for _, name := range clientTools {
		req.Tools = append(req.Tools, aap.ToolSpec{Name: name, Description: "client tool " + name,
			Parameters: json.RawMessage(`{"type":"object"}`)})
	}
	out, err := c.CreateSession(context.Background(), req)
	if err != nil {
		t.Fatalf("create session: %v", err)
	}
	if !strings.HasPrefix(out.SessionID, "sess_") {
		t.Fatalf("sessionId %q", out.SessionID)
	}
	return out.SessionID
}

func userTurn(stream aap.StreamMode, text string) aap.TurnRequest {
	return aap.TurnRequest{Stream: stream, Messages: []aap.Message{aap.UserMessage(text)}}
}

// collect reads a stream to its end, failing the test on an error.
func collect(t *testing.T, s *aapclient.Stream) []aap.Event {
	t.Helper()
	var events []aap.Event
	for e, err := range s.Events() {
		if err != nil {
			t.Fatalf("stream after %d events: %v", len(events), err)
		}
		events = append(events, e)
	}
	return events
}

// render writes events one per line, for comparisons and failure messages.
func render(events []aap.Event) string {
	var b strings.Builder
	for _, e := range events {
		d, _ := json.Marshal(e)
		b.WriteString(string(e.Type) + " " + string(d) + "\n")
	}
	return b.String()
}

// text joins the text (or deltas) of a stream's events.
func text(events []aap.Event) string {
	var b strings.Builder
	for _, e := range events {
		switch e.Type {
		case aap.EventTextDelta:
			b.WriteString(e.Delta)
		case aap.EventText:
			b.WriteString(e.Text)
		}
	}
	return b.String()
}

// checkFrame fails unless events start with turn_start and end with the
// only turn_stop, of the given reason.
func checkFrame(t *testing.T, events []aap.Event, stop aap.StopReason) {
	t.Helper()
	if len(events) < 2 || events[0].Type != aap.EventTurnStart || events[len(events)-1].Type != aap.EventTurnStop {
		t.Fatalf("events are not framed by turn_start and turn_stop:\n%s", render(events))
	}
	if got := events[len(events)-1].StopReason; got != stop {
		t.Errorf("stopReason %q, want %q", got, stop)
	}
	for i, e := range events[1 : len(events)-1] {
		if e.Type == aap.EventTurnStart || e.Type == aap.EventTurnStop {
			t.Fatalf("event %d is a second %s:\n%s", i+2, e.Type, render(events))
		}
	}
}

// apiError fails unless err is an *aapclient.Error of the status.
func apiError(t *testing.T, err error, status int) *aapclient.Error {
	t.Helper()
	var e *aapclient.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T), want an *aapclient.Error", err, err)
	}
	if e.Status != status {
		t.Fatalf("status %d, want %d: %v", e.Status, status, e)
	}
	return e
}

func TestMeta(t *testing.T) {
	t.Parallel()
	c := startServer(t).client(t)
	meta, err := c.Meta(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if meta.Version != aap.Version || len(meta.Agents) != 1 || meta.Agents[0].Name != "echo" {
		t.Fatalf("meta %+v", meta)
	}
	if !meta.Agents[0].SupportsStream(aap.StreamDelta) || !meta.Agents[0].AcceptsClientTools() {
		t.Errorf("echo capabilities %+v", meta.Agents[0].Capabilities)
	}
}

func TestSessions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := startServer(t).client(t)
	var created []string
	for range 5 {
		created = append(created, echoSession(t, c))
	}

	page, err := c.ListSessions(ctx, aapclient.ListOptions{Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Sessions) != 2 || page.Next == "" {
		t.Fatalf("first page of 2: %d sessions, next %q", len(page.Sessions), page.Next)
	}
	var listed []string
	for s, err := range c.Sessions(ctx, aapclient.ListOptions{Limit: 2}) {
		if err != nil {
			t.Fatal(err)
		}
		listed = append(listed, s.SessionID)
	}
	slices.Sort(created)
	slices.Sort(listed)
	if !slices.Equal(listed, created) {
		t.Fatalf("listed over three pages %v, created %v", listed, created)
	}
	// Breaking out of the loop stops it.
	n := 0
	for range c.Sessions(ctx, aapclient.ListOptions{Limit: 2}) {
		if n++; n == 3 {
			break
		}
	}

	info, err := c.GetSession(ctx, created[0])
	if err != nil {
		t.Fatal(err)
	}
	if info.SessionID != created[0] || info.Agent.Name != "echo" {
		t.Fatalf("session %+v", info)
	}
	if err := c.DeleteSession(ctx, created[0]); err != nil {
		t.Fatal(err)
	}
	_, err = c.GetSession(ctx, created[0])
	if e := apiError(t, err, http.StatusNotFound); !strings.HasSuffix(e.Type, "/not-found") || e.Title == "" || e.Detail == "" {
		t.Errorf("404 problem %+v", e)
	}
	apiError(t, c.DeleteSession(ctx, created[0]), http.StatusNotFound)
}

func TestCreateSessionIdempotent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := startServer(t).client(t)
	req := aap.CreateSessionRequest{Agent: aap.AgentConfig{Name: "echo"}}
	key := aapclient.NewIdempotencyKey()
	a, err := c.CreateSession(ctx, req, aapclient.WithIdempotencyKey(key))
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.CreateSession(ctx, req, aapclient.WithIdempotencyKey(key))
	if err != nil {
		t.Fatal(err)
	}
	if a.SessionID != b.SessionID {
		t.Fatalf("same key, two sessions: %s and %s", a.SessionID, b.SessionID)
	}
	_, err = c.CreateSession(ctx, aap.CreateSessionRequest{Agent: aap.AgentConfig{Name: "nope"}})
	if e := apiError(t, err, http.StatusBadRequest); e.Field != "agent.name" {
		t.Errorf("bad agent: field %q: %v", e.Field, e)
	}
}

func TestHistory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := startServer(t).client(t)
	sid := echoSession(t, c)
	if _, err := c.SendTurn(ctx, sid, userTurn("", "hello")); err != nil {
		t.Fatal(err)
	}
	for _, typ := range []aap.HistoryType{aap.HistoryFull, aap.HistoryCompacted} {
		msgs, err := c.History(ctx, sid, typ)
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) != 2 || msgs[0].Role != aap.RoleUser || msgs[1].Role != aap.RoleAssistant || msgs[1].Content.PlainText() != "Echo: hello" {
			t.Fatalf("%s history %+v", typ, msgs)
		}
	}
	_, err := c.History(ctx, sid, "everything")
	apiError(t, err, http.StatusBadRequest)
}

func TestTurnModes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := startServer(t).client(t)

	t.Run("none", func(t *testing.T) {
		sid := echoSession(t, c)
		res, err := c.SendTurn(ctx, sid, userTurn(aap.StreamNone, "/think hmm\nhi"))
		if err != nil {
			t.Fatal(err)
		}
		if res.StopReason != aap.StopEndTurn || len(res.Messages) != 1 || res.Messages[0].Content.PlainText() != "Echo: hi" {
			t.Fatalf("response %+v", res.TurnResponse)
		}
		if !strings.HasPrefix(res.TurnID, "turn_") || res.Replayed {
			t.Errorf("turn id %q, replayed %v", res.TurnID, res.Replayed)
		}
		if _, err := c.SendTurn(ctx, sid, userTurn(aap.StreamDelta, "hi")); err == nil {
			t.Error("SendTurn took a streamed turn")
		}
	})
	for _, mode := range []aap.StreamMode{aap.StreamDelta, aap.StreamMessage} {
		t.Run(string(mode), func(t *testing.T) {
			sid := echoSession(t, c)
			s, err := c.StreamTurn(ctx, sid, userTurn(mode, "/think hmm\n/words 5"))
			if err != nil {
				t.Fatal(err)
			}
			events := collect(t, s)
			checkFrame(t, events, aap.StopEndTurn)
			if got := text(events); got != "Echo: word1 word2 word3 word4 word5" {
				t.Errorf("text %q", got)
			}
			want := map[aap.StreamMode]aap.EventType{aap.StreamDelta: aap.EventTextDelta, aap.StreamMessage: aap.EventText}[mode]
			if !slices.ContainsFunc(events, func(e aap.Event) bool { return e.Type == want }) {
				t.Errorf("no %s event in a %s stream:\n%s", want, mode, render(events))
			}
			if !strings.HasPrefix(s.TurnID(), "turn_") || s.LastEventID() != len(events) || s.Resumes() != 0 {
				t.Errorf("turn %q, last event id %d of %d events, %d resumes", s.TurnID(), s.LastEventID(), len(events), s.Resumes())
			}
		})
	}
}

func TestClientToolRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := startServer(t).client(t)
	sid := echoSession(t, c, "lookup")

	s, err := c.StreamTurn(ctx, sid, userTurn(aap.StreamMessage, `/tool lookup {"q":"tokyo"}`))
	if err != nil {
		t.Fatal(err)
	}
	events := collect(t, s)
	checkFrame(t, events, aap.StopToolUse)
	var calls []aap.ToolCall
	for _, e := range events {
		if e.Type == aap.EventToolCall {
			calls = append(calls, e.ToolCall)
		}
	}
	if len(calls) != 1 || calls[0].Name != "lookup" || string(calls[0].Input) != `{"q":"tokyo"}` || calls[0].ToolCallID == "" {
		t.Fatalf("tool calls %+v", calls)
	}

	res, err := c.SendTurn(ctx, sid, aap.TurnRequest{Messages: []aap.Message{aap.ToolMessage(calls[0].ToolCallID, "18°C")}})
	if err != nil {
		t.Fatal(err)
	}
	if res.StopReason != aap.StopEndTurn || len(res.Messages) == 0 || !strings.Contains(res.Messages[len(res.Messages)-1].Content.PlainText(), "18°C") {
		t.Fatalf("after the tool result: %+v", res.TurnResponse)
	}
}
