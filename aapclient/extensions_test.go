package aapclient_test

import (
	"context"
	"encoding/json"
	"iter"
	"net/http"
	"testing"
	"time"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/aapclient"
	"github.com/aapd/aapd/agents"
	"github.com/aapd/aapd/httpapi"
	v3 "github.com/aapd/aapd/httpapi/v3"
	"github.com/aapd/aapd/store"
)

// Turn records, their events, cancel and compaction, through aapd's
// extension endpoints.
func TestExtensions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := startServer(t).client(t)
	sid := echoSession(t, c)

	var ids []string
	for _, msg := range []string{"one", "two", "three"} {
		res, err := c.SendTurn(ctx, sid, userTurn("", msg))
		if err != nil {
			t.Fatal(err)
		}
		ids = append([]string{res.TurnID}, ids...) // newest first
	}
	var listed []string
	for turn, err := range c.Turns(ctx, sid, aapclient.ListOptions{Limit: 2}) {
		if err != nil {
			t.Fatal(err)
		}
		listed = append(listed, turn.TurnID)
	}
	if len(listed) != 3 || listed[0] != ids[0] || listed[2] != ids[2] {
		t.Fatalf("turns %v, want %v", listed, ids)
	}
	info, err := c.GetTurn(ctx, sid, ids[0])
	if err != nil {
		t.Fatal(err)
	}
	if info.Status != aapclient.TurnCompleted || info.StopReason != aap.StopEndTurn || info.Stream != aap.StreamNone ||
		info.FinishedAt == nil || info.IdempotencyKey == "" {
		t.Fatalf("turn %+v", info)
	}
	_, err = c.GetTurn(ctx, sid, "turn_nope")
	apiError(t, err, http.StatusNotFound)

	// Cancel a long turn: its stream ends, its record says cancelled.
	s, err := c.StreamTurn(ctx, sid, userTurn(aap.StreamDelta, "/slow 100\n/words 100"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	next, stop := iter.Pull2(s.Events())
	defer stop()
	if e, err, _ := next(); err != nil || e.Type != aap.EventTurnStart {
		t.Fatalf("first event %v, %v", e.Type, err)
	}
	cancelled, stopping, err := c.CancelTurn(ctx, sid, s.TurnID())
	if err != nil || stopping || cancelled.Status != aapclient.TurnCancelled {
		t.Fatalf("cancel: %+v, stopping %v, %v", cancelled, stopping, err)
	}
	for {
		e, err, ok := next()
		if err != nil || !ok {
			t.Fatalf("after cancel: %v (stream over: %v)", err, !ok)
		}
		if e.Type == aap.EventTurnStop {
			break
		}
	}

	res, err := c.Compact(ctx, sid)
	if err != nil {
		t.Fatal(err)
	}
	if res.Compacted || res.Reason == "" || res.Tokens <= 0 {
		t.Errorf("compact of a short history: %+v", res)
	}
	list, err := c.Compactions(ctx, sid, 5)
	if err != nil || len(list) != 0 {
		t.Errorf("compactions %+v, %v", list, err)
	}
}

// The extension types are declared by the client, not imported from the
// server: their JSON must stay the server's.
func TestExtensionShapes(t *testing.T) {
	finished := time.Date(2026, 1, 2, 3, 4, 6, 0, time.UTC)
	ms := int64(1000)
	check := func(name string, server, client any) {
		t.Helper()
		want, err := json.Marshal(server)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(want, client); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got, _ := json.Marshal(client)
		if string(got) != string(want) {
			t.Errorf("%s: the client reads\n%s\nas\n%s", name, want, got)
		}
	}
	check("TurnList", v3.TurnList{Next: "c", Turns: []v3.TurnInfo{{
		TurnID: "turn_1", SessionID: "sess_1", Status: "failed", Stream: aap.StreamDelta, StopReason: aap.StopError,
		Error: &aap.TurnError{Type: aap.TurnErrorModel, Message: "boom"}, Usage: agents.Usage{InputTokens: 1, OutputTokens: 2}, IdempotencyKey: "k",
		CreatedAt: finished.Add(-time.Second), FinishedAt: &finished, DurationMs: &ms,
	}}}, &aapclient.TurnList{})
	check("CompactResponse", v3.CompactResponse{Compacted: true, Compaction: &store.Compaction{
		ID: 1, CreatedAt: finished, Trigger: "manual", Strategy: "summarize", FromSeq: 1, ToSeq: 9,
		MessagesBefore: 9, MessagesAfter: 2, TokensBefore: 900, TokensAfter: 200,
	}}, &aapclient.CompactResult{})
	check("SessionList", v3.SessionList{Next: "c", Sessions: []v3.SessionRecord{
		{SessionInfo: aap.SessionInfo{SessionID: "sess_1", Agent: aap.AgentConfig{Name: "echo", Options: map[string]string{"token": "***"}}}, Owner: "user1",
			CreatedAt: finished.Add(-time.Hour), UpdatedAt: finished, Status: "requires_action",
			Pending: []v3.PendingCall{{ToolCallID: "call_1", Name: "t", Input: json.RawMessage(`{"a":1}`), Awaiting: v3.AwaitingResult}}},
		{SessionInfo: aap.SessionInfo{SessionID: "sess_2", Agent: aap.AgentConfig{Name: "echo"}, Tools: []aap.ToolSpec{{Name: "t", Description: "d", Parameters: json.RawMessage(`{"type":"object"}`)}}},
			CreatedAt: finished, UpdatedAt: finished, Status: "idle"},
	}}, &aapclient.SessionList{})
	check("CompactResponse unchanged", v3.CompactResponse{Tokens: 12, Reason: "below the threshold"}, &aapclient.CompactResult{})
	if aapclient.TurnIDHeader != httpapi.TurnIDHeader || aapclient.ReplayedHeader != httpapi.ReplayedHeader ||
		aapclient.IdempotencyKeyHeader != httpapi.IdempotencyKeyHeader {
		t.Error("the client's header names differ from the server's")
	}
}
