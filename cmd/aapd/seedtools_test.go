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
		created, err := c.api().CreateSession(t.Context(), createRequest(t, map[string]any{
			"agent": map[string]any{"name": "echo", "tools": enabled},
			"messages": []any{
				map[string]any{"role": "user", "content": "what is 6*7?"},
				map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "tool_use", "toolCallId": "call_seed",
					"name": "calculator", "input": map[string]any{"expression": "6*7"}}}},
			},
		}))
		if err != nil {
			refusal(t, err, http.StatusBadRequest, "invalid-request")
			continue
		}
		out, err := c.api().SendTurn(t.Context(), created.SessionID, turnRequest(t, map[string]any{"messages": []any{
			map[string]any{"role": "tool_permission", "toolCallId": "call_seed", "granted": true}}}))
		if err != nil {
			refusal(t, err, http.StatusBadRequest, "invalid-request")
			continue
		}
		for _, m := range out.Messages {
			if m.Role == aap.RoleTool && m.ToolCallID == "call_seed" && strings.TrimSpace(m.Content.PlainText()) == "42" {
				t.Errorf("enabled server tools %v: the disabled calculator ran on a seeded call: %+v", enabled, out.Messages)
			}
		}
	}
}
