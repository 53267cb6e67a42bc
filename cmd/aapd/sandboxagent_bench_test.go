package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/agents"
	"github.com/aapd/aapd/httpapi/sandboxagent"
	"github.com/aapd/aapd/store"
	"github.com/aapd/aapd/store/storetest"
)

// BenchmarkSandboxAgentEventsAfterOffset measures GET
// /sandbox-agent/v1/sessions/{id}/events after an offset near the end of
// a session of n turns (docs/benchmarks.md): "tail", where the replica's
// index knows where each turn begins, so the read translates the last
// turn alone; "whole", the read of every event from offset 0 — what a
// replica that has not indexed the session pays once, on its first read.
func BenchmarkSandboxAgentEventsAfterOffset(b *testing.B) {
	s := startServer(b)
	tn := storetest.NewTenant(b, s.Store)
	for _, n := range []int{10, 100, 1000} {
		sid := seedTurns(b, s.Runner, tn.ID, n)
		c := &client{t: b, base: s.base, key: tn.Key}
		var page struct {
			Events []struct{ Sequence int64 } `json:"events"`
		}
		c.do("GET", saPath(fmt.Sprintf("/sessions/%s/events?offset=%d", sid, 27*n-10)), nil).expect(b, http.StatusOK).json(b, &page)
		last := page.Events[len(page.Events)-1].Sequence
		for _, read := range []struct{ name, query string }{
			{"tail", fmt.Sprintf("?offset=%d", last-5)},
			{"whole", fmt.Sprintf("?offset=0&limit=%d", sandboxagent.MaxEventLimit)},
		} {
			b.Run(fmt.Sprintf("turns=%d/%s", n, read.name), func(b *testing.B) {
				for b.Loop() {
					offset := int64(0)
					for {
						req, _ := http.NewRequest("GET", s.base+saPath("/sessions/"+sid+"/events")+read.query, nil)
						if read.name == "whole" {
							req.URL.RawQuery = fmt.Sprintf("offset=%d&limit=%d", offset, sandboxagent.MaxEventLimit)
						}
						req.Header.Set("Authorization", "Bearer "+tn.Key)
						res, err := http.DefaultClient.Do(req)
						if err != nil {
							b.Fatal(err)
						}
						var got struct {
							Events  []struct{ Sequence int64 } `json:"events"`
							HasMore bool                       `json:"hasMore"`
						}
						err = json.NewDecoder(res.Body).Decode(&got)
						res.Body.Close()
						if err != nil || len(got.Events) == 0 {
							b.Fatalf("read: %v", err)
						}
						offset = got.Events[len(got.Events)-1].Sequence
						if !got.HasMore {
							break
						}
					}
				}
			})
		}
	}
}

// seedTurns runs n turns of the echo agent on a new session and returns
// its id.
func seedTurns(b *testing.B, r *agents.Runner, tenantID string, n int) string {
	b.Helper()
	ctx := context.Background()
	sess, _, err := r.CreateSession(ctx, store.SessionCreateParams{TenantID: tenantID, AgentName: "echo"})
	if err != nil {
		b.Fatal(err)
	}
	for i := range n {
		h, err := r.Run(ctx, agents.StartParams{TenantID: tenantID, SessionID: sess.ID, Request: aap.TurnRequest{
			Stream: aap.StreamDelta, Messages: []aap.Message{aap.UserMessage(fmt.Sprintf("/think turn %d\n/words 20", i))}}})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := h.Response(ctx); err != nil {
			b.Fatal(err)
		}
	}
	return sess.ID
}
