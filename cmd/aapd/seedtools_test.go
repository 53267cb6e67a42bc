package main

import (
	"net/http"
	"strings"
	"testing"

	"github.com/aapd/aapd/aap"
)

// TestSeededCallOfADisabledServerToolDoesNotRun: "agent.tools — if omitted,
// all exposed server-side tools are disabled" (spec, POST /sessions). A seed
// history may end with a tool call; when it names a server tool the session
// has not enabled, granting it must not run that tool. The server may refuse
// the seed (400) or answer the call with an error result, but the tool's
// real output must not appear.
func TestSeededCallOfADisabledServerToolDoesNotRun(t *testing.T) {
	t.Parallel()
	s := startParallelServer(t)
	c := s.newTenant(t)
	for _, enabled := range [][]aap.ServerToolRef{nil, {{Name: "clock", Trust: true}}} {
		r := c.do("POST", "/sessions", map[string]any{
			"agent": map[string]any{"name": "echo", "tools": enabled},
			"messages": []any{
				map[string]any{"role": "user", "content": "what is 6*7?"},
				map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "tool_use", "toolCallId": "call_seed",
					"name": "calculator", "input": map[string]any{"expression": "6*7"}}}},
			},
		})
		if r.StatusCode == http.StatusBadRequest {
			checkProblem(t, r, http.StatusBadRequest, "invalid-request")
			continue
		}
		var created aap.CreateSessionResponse
		r.expect(t, http.StatusCreated).json(t, &created)
		resp := c.do("POST", "/sessions/"+created.SessionID+"/turns", map[string]any{"messages": []any{
			map[string]any{"role": "tool_permission", "toolCallId": "call_seed", "granted": true}}})
		if resp.StatusCode == http.StatusBadRequest {
			checkProblem(t, resp, http.StatusBadRequest, "invalid-request")
			continue
		}
		var out aap.TurnResponse
		resp.expect(t, http.StatusOK).json(t, &out)
		for _, m := range out.Messages {
			if m.Role == aap.RoleTool && m.ToolCallID == "call_seed" && strings.TrimSpace(m.Content.PlainText()) == "42" {
				t.Errorf("enabled server tools %v: the disabled calculator ran on a seeded call: %s", enabled, resp.body)
			}
		}
	}
}
