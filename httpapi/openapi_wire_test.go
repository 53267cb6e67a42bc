package httpapi_test

import (
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/agents"
	"github.com/aapd/aapd/agents/echo"
	"github.com/aapd/aapd/httpapi"
	"github.com/aapd/aapd/httpapi/admin"
	v3 "github.com/aapd/aapd/httpapi/v3"
	"github.com/aapd/aapd/store"
)

// TestOpenAPISchemasMatchWireTypes holds the document's schemas to the Go
// wire types, variant by variant, including those the end-to-end suite may
// never see on the wire (every content block, role, option type, stop
// reason and event), and checks that the closed schemas reject what the
// server never writes.
func TestOpenAPISchemasMatchWireTypes(t *testing.T) {
	t.Parallel()
	d := loadDocument(t)
	registry, err := agents.NewRegistry(echo.NewAgent())
	if err != nil {
		t.Fatal(err)
	}
	e := &aap.Empty{}
	bare := aap.AgentInfo{Name: "bare", Version: "0.1.0"}
	full := aap.AgentInfo{Name: "full", Title: "Full", Version: "1.0.0", Description: "d",
		Tools: []aap.ToolSpec{{Name: "web", Title: "Web", Description: "search", Parameters: json.RawMessage(`{"type":"object"}`)}},
		Options: []aap.AgentOption{
			{Type: aap.OptionText, Name: "a", Default: ""},
			{Type: aap.OptionSecret, Name: "b", Title: "B", Description: "secret", Default: "x"},
			{Type: aap.OptionSelect, Name: "c", Options: []string{"x", "y"}, Default: "x"},
		},
		Capabilities: &aap.Capabilities{History: &aap.HistoryCapabilities{Full: e}, Stream: &aap.StreamCapabilities{None: e},
			Application: &aap.ApplicationCapabilities{}, Image: &aap.ImageCapabilities{Data: e}},
	}
	call := aap.ToolCall{ToolCallID: "call_1", Name: "web", Input: json.RawMessage(`{"q":"x"}`)}
	history := []aap.Message{
		aap.SystemMessage("be brief"),
		aap.UserMessage("hi"),
		{Role: aap.RoleUser, Content: aap.BlockContent(aap.TextBlock("look"), aap.ContentBlock{Type: aap.BlockImage, URL: "https://example.com/a.png"})},
		aap.AssistantMessage(aap.ThinkingBlock("hmm"), aap.TextBlock("ok"), aap.ToolUseBlock(call), aap.ToolUseBlock(aap.ToolCall{ToolCallID: "call_2", Name: "x"})),
		aap.ToolMessage("call_1", "result"),
		{Role: aap.RoleTool, ToolCallID: "call_2", Content: aap.BlockContent()},
		{Role: aap.RoleAssistant, Content: aap.TextContent("done")},
	}
	now := time.Date(2026, 11, 22, 12, 0, 0, 123e6, time.UTC)
	dur := int64(2333)
	rps, burst := 2.5, 5
	record := store.Compaction{ID: 3, CreatedAt: now, Trigger: agents.TriggerAuto, Strategy: "summarize", FromSeq: 2, ToSeq: 41,
		MessagesBefore: 49, MessagesAfter: 10, TokensBefore: 4112, TokensAfter: 2391}
	valid := []struct {
		schema string
		value  any
	}{
		{"Meta", registry.Meta()},
		{"Meta", aap.Meta{Version: aap.Version, Agents: []aap.AgentInfo{bare, full}}},
		{"Meta", aap.Meta{Version: aap.Version, Agents: []aap.AgentInfo{}}},
		{"SessionInfo", aap.SessionInfo{SessionID: "sess_1", Agent: aap.AgentConfig{Name: "echo"}}},
		{"SessionList", v3.SessionList{Sessions: []v3.SessionRecord{{SessionInfo: aap.SessionInfo{SessionID: "sess_1",
			Agent: aap.AgentConfig{Name: "full", Tools: []aap.ServerToolRef{{Name: "web"}}, Options: map[string]string{"b": aap.SecretPlaceholder}},
			Tools: full.Tools}, CreatedAt: now, UpdatedAt: now, Status: store.SessionRequiresAction}}, Next: "abc"}},
		{"SessionList", v3.SessionList{Sessions: []v3.SessionRecord{}}},
		{"CreateSessionResponse", aap.CreateSessionResponse{SessionID: "sess_1"}},
		{"HistoryResponse", aap.HistoryResponse{History: map[aap.HistoryType][]aap.Message{aap.HistoryFull: history}}},
		{"HistoryResponse", aap.HistoryResponse{History: map[aap.HistoryType][]aap.Message{aap.HistoryCompacted: {}}}},
		{"TurnInfo", v3.TurnInfo{TurnID: "turn_1", SessionID: "sess_1", Status: string(store.TurnRunning), Stream: aap.StreamDelta, CreatedAt: now}},
		{"TurnList", v3.TurnList{Turns: []v3.TurnInfo{{TurnID: "turn_1", SessionID: "sess_1", Status: string(store.TurnFailed),
			Stream: aap.StreamNone, StopReason: aap.StopError, Error: &aap.TurnError{Type: aap.TurnErrorModel, Message: "boom"}, Usage: agents.Usage{InputTokens: 1, OutputTokens: 2},
			IdempotencyKey: "k", CreatedAt: now, FinishedAt: &now, DurationMs: &dur}}, Next: "n"}},
		{"ScheduleInfo", v3.ScheduleInfo{ScheduleID: "sch_1", SessionID: "sess_1", Cron: "0 9 * * 1-5", Timezone: "Europe/Berlin",
			Messages: []aap.Message{aap.UserMessage("report")}, Stream: aap.StreamNone, EndAt: &now, State: "active", CreatedAt: now,
			NextRunAt: &now, LastRunAt: &now, LastTurnID: "turn_1", Runs: 3, SkippedRunning: 1, SkippedMissed: 2, SkippedRefused: 1, LastError: "e"}},
		{"ScheduleList", v3.ScheduleList{Schedules: []v3.ScheduleInfo{{ScheduleID: "sch_1", SessionID: "sess_1", Every: "30s",
			Messages: []aap.Message{aap.UserMessage("ping")}, Stream: aap.StreamDelta, State: "ended", CreatedAt: now}}}},
		{"ScheduleList", v3.ScheduleList{Schedules: []v3.ScheduleInfo{}}},
		{"CompactResponse", v3.CompactResponse{Compacted: true, Compaction: &record}},
		{"CompactResponse", v3.CompactResponse{Tokens: 1458, Reason: "within the target"}},
		{"CompactionList", v3.CompactionList{Compactions: []store.Compaction{record}}},
		{"Problem", httpapi.Problem{Type: httpapi.ProblemTypeBase + "turn-running", Title: "t", Status: 409, Detail: "d",
			Instance: "/sessions/x/turns", RequestID: "abc", TurnID: "turn_1"}},

		{"SessionRecord", v3.SessionRecord{SessionInfo: aap.SessionInfo{SessionID: "sess_1", Agent: aap.AgentConfig{Name: "echo"}}, Owner: "user-1",
			CreatedAt: now, UpdatedAt: now, Status: store.SessionIdle}},
		{"SessionList", v3.SessionList{Sessions: []v3.SessionRecord{{SessionInfo: aap.SessionInfo{SessionID: "sess_1",
			Agent: aap.AgentConfig{Name: "echo"}}, Owner: "user-1", CreatedAt: now, UpdatedAt: now, Status: store.SessionRunning}}, Next: "n"}},
		{"SessionRecord", v3.SessionRecord{SessionInfo: aap.SessionInfo{SessionID: "sess_1", Agent: aap.AgentConfig{Name: "echo"}},
			CreatedAt: now, UpdatedAt: now, Status: store.SessionRequiresAction, Pending: []v3.PendingCall{
				{ToolCallID: "c1", Name: "lookup", Input: json.RawMessage(`{"q":1}`), Awaiting: v3.AwaitingResult},
				{ToolCallID: "c2", Name: "clock", Input: json.RawMessage(`{}`), Awaiting: v3.AwaitingPermission}}}},
		{"SessionEventList", v3.SessionEventList{Events: []v3.SessionEventItem{
			{ID: "dHVybl8wMDAwMDAwMDAwMDAwMDAwLjE", TurnID: "turn_1", Seq: 1, Event: aap.EventTurnStart, Data: aap.Event{Type: aap.EventTurnStart, TurnID: "turn_1"}},
			{ID: "dHVybl8wMDAwMDAwMDAwMDAwMDAwLjI", TurnID: "turn_1", Seq: 2, Event: aap.EventTurnStop, Data: aap.TurnStopError(aap.TurnError{Type: aap.TurnErrorModel, Message: "m"})}},
			Next: "dHVybl8wMDAwMDAwMDAwMDAwMDAwLjI", HasMore: true}},
		{"SessionEventList", v3.SessionEventList{Events: []v3.SessionEventItem{}}},
		{"Tenant", admin.Tenant{ID: "t", Name: "team-a", CreatedAt: now}},
		{"TenantPage", admin.TenantPage{Tenants: []admin.Tenant{{ID: "t", Name: "team-a", CreatedAt: now,
			Limits: admin.Limits{RequestsPerSecond: &rps, Burst: &burst, MaxRunningTurns: &burst}}}, NextCursor: "c"}},
		{"TenantPage", admin.TenantPage{Tenants: []admin.Tenant{}}},
		{"Limits", admin.Limits{RequestsPerSecond: &rps, Burst: &burst}},
		{"CreatedKey", admin.CreatedKey{Key: admin.Key{ID: "k", Prefix: "aapd_k_", Scopes: []string{"sessions:read"}, CreatedAt: now,
			ExpiresAt: &now, State: "active"}, Secret: "aapd_k_secret"}},
		{"KeyPage", admin.KeyPage{Keys: []admin.Key{{ID: "k", Prefix: "aapd_k_", Label: "l", Scopes: []string{}, CreatedAt: now,
			LastUsedAt: &now, RevokedAt: &now, State: "revoked"}}, NextCursor: "c"}},
		{"Issuer", admin.Issuer{ID: "iss_1", Issuer: "i", Audience: "a", JWKSURL: "https://i.example/jwks", CreatedAt: now}},
		{"IssuerPage", admin.IssuerPage{Issuers: []admin.Issuer{{ID: "iss_1", Issuer: "i", Audience: "a", PublicKeys: []string{"pem"}, CreatedAt: now}}}},
		{"TenantUsage", admin.Usage{Tenant: "team-a", From: now, To: now, Agents: []admin.AgentUsage{{Agent: "echo"}},
			Days: []admin.DayUsage{{Date: "2026-11-22", Agent: "echo", UsageCounts: admin.UsageCounts{Turns: 1, InputTokens: 2, OutputTokens: 3}}}}},
	}
	for _, r := range []aap.StopReason{aap.StopEndTurn, aap.StopToolUse, aap.StopMaxTokens, aap.StopRefusal, aap.StopError} {
		valid = append(valid, struct {
			schema string
			value  any
		}{"TurnResponse", aap.TurnResponse{StopReason: r, Messages: history[3:]}})
	}
	valid = append(valid, struct {
		schema string
		value  any
	}{"TurnResponse", aap.TurnResponse{StopReason: aap.StopError, Messages: history[3:],
		Error: &aap.TurnError{Type: aap.TurnErrorModel, Message: "the model failed"}}})
	for _, c := range valid {
		b, err := json.Marshal(c.value)
		if err != nil {
			t.Fatal(err)
		}
		for _, msg := range d.CheckSchema(c.schema, b) {
			t.Errorf("%s %s: %s", c.schema, b, msg)
		}
	}

	events := []aap.Event{
		aap.TurnStart(),
		{Type: aap.EventTextDelta, Delta: "a"}, {Type: aap.EventThinkingDelta, Delta: ""},
		{Type: aap.EventText, Text: "a"}, {Type: aap.EventThinking, Thinking: "b"},
		aap.ToolCallEvent(call), aap.ToolCallEvent(aap.ToolCall{ToolCallID: "c", Name: "n"}),
		aap.ToolResultEvent("call_1", aap.TextContent("r")),
		aap.ToolResultEvent("call_1", aap.BlockContent(aap.TextBlock("r"))),
		aap.TurnStop(aap.StopEndTurn), aap.TurnStop(aap.StopRefusal),
	}
	for i, ev := range events {
		b, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		for _, msg := range d.CheckEvent(strconv.Itoa(i+1), string(ev.Type), string(b)) {
			t.Error(msg)
		}
	}

	// What the server never writes must not pass: the response schemas
	// are closed, their enumerations exact.
	invalid := []struct{ schema, json string }{
		{"HistoryResponse", `{"history":{"full":[{"role":"tool_permission","toolCallId":"c","granted":true}]}}`},
		{"HistoryResponse", `{"history":{"full":[],"compacted":[]}}`},
		{"HistoryResponse", `{"history":{"full":[{"role":"system","content":[{"type":"text","text":"x"}]}]}}`},
		{"TurnResponse", `{"stopReason":"stop","messages":[]}`},
		{"TurnResponse", `{"stopReason":"end_turn","messages":[{"role":"assistant","content":[{"type":"text","text":"x","extra":1}]}]}`},
		{"SessionInfo", `{"sessionId":"s","agent":{"name":"echo"},"owner":"u"}`},
		{"SessionRecord", `{"sessionId":"s","agent":{"name":"echo"},"owner":""}`},
		{"Issuer", `{"id":"i","issuer":"i","audience":"a","createdAt":"2026-01-01T00:00:00Z"}`},
		{"Limits", `{"requestsPerSecond":0,"burst":null,"maxRunningTurns":null}`},
		{"CreatedKey", `{"id":"k","prefix":"aapd_k_","label":"","scopes":["sessions:admin"],"createdAt":"2026-01-01T00:00:00Z","expiresAt":null,"lastUsedAt":null,"revokedAt":null,"state":"active","key":"aapd_x"}`},
		{"Meta", `{"version":2,"agents":[]}`},
		{"Meta", `{"version":3,"agents":[{"name":"a","version":"1","options":[{"type":"select","name":"s","default":"x"}]}]}`},
		{"TurnInfo", `{"turnId":"t","sessionId":"s","status":"done","stream":"none","usage":{"inputTokens":0,"outputTokens":0},"createdAt":"2026-01-01T00:00:00Z"}`},
		{"Problem", `{"type":"https://aapd.dev/problems/x","title":"t","status":200,"detail":"d","instance":"/","requestId":"r"}`},
	}
	for _, c := range invalid {
		if len(d.CheckSchema(c.schema, []byte(c.json))) == 0 {
			t.Errorf("%s accepts %s", c.schema, c.json)
		}
	}
	if len(d.CheckEvent("1", "text_delta", `{"text":"x"}`)) == 0 {
		t.Error("a text_delta event with a text member passes")
	}
	if len(d.CheckEvent("1", "usage", `{}`)) == 0 {
		t.Error("an unknown event type passes")
	}
}

// TestOpenAPIRequestSchemasTakeWhatTheServerTakes checks the request body
// schemas against bodies the aap decoder accepts, and against the ones it
// refuses for their shape.
func TestOpenAPIRequestSchemasTakeWhatTheServerTakes(t *testing.T) {
	t.Parallel()
	d := loadDocument(t)
	accepted := []struct{ schema, json string }{
		{"CreateSessionRequest", `{"agent":{"name":"echo"}}`},
		{"CreateSessionRequest", `{"agent":{"name":"echo","tools":null,"options":{"style":"shout"}},"messages":null,"tools":null,"unknown":1}`},
		{"CreateSessionRequest", `{"agent":{"name":"echo","tools":[{"name":"clock","trust":true},{"name":"calc"}]},
			"messages":[{"role":"system","content":"s"},{"role":"user","content":[{"type":"text","text":"hi"},{"type":"image","url":"data:image/png;base64,AAAA"}]},
			{"role":"assistant","content":[{"type":"thinking","thinking":"t"},{"type":"tool_use","toolCallId":"c1","name":"lookup","input":{}}]},
			{"role":"tool","toolCallId":"c1","content":"r"}],
			"tools":[{"name":"lookup","description":"d","parameters":{"type":"object"}}]}`},
		{"TurnRequest", `{"messages":[{"role":"user","content":"hi"}]}`},
		{"TurnRequest", `{"stream":"delta","agent":{"name":"echo","options":{"style":"plain"}},"messages":[{"role":"user","content":"hi"}],"tools":[]}`},
		{"TurnRequest", `{"stream":null,"agent":null,"messages":[{"role":"tool","toolCallId":"c1","content":[{"type":"text","text":"r"}]},
			{"role":"tool_permission","toolCallId":"c2","granted":false,"reason":"no"}]}`},
	}
	for _, c := range accepted {
		if err := decodeAs(c.schema, c.json); err != nil {
			t.Fatalf("the server's decoder refuses %s: %v", c.json, err)
		}
		for _, msg := range d.CheckSchema(c.schema, []byte(c.json)) {
			t.Errorf("%s refuses %s: %s", c.schema, c.json, msg)
		}
	}
	refused := []struct{ schema, json string }{
		{"CreateSessionRequest", `{"messages":[]}`},
		{"CreateSessionRequest", `{"agent":{"name":"echo"},"messages":[{"role":"bot","content":"x"}]}`},
		{"CreateSessionRequest", `{"agent":{"name":"echo"},"messages":[{"role":"system","content":[]}]}`},
		{"CreateSessionRequest", `{"agent":{"name":"echo"},"tools":[{"name":"t"}]}`},
		{"CreateSessionRequest", `{"agent":{"name":"echo","options":{"style":1}}}`},
		{"TurnRequest", `{}`},
		{"TurnRequest", `{"messages":[{"role":"user"}]}`},
		{"TurnRequest", `{"messages":[{"role":"tool","content":"r"}]}`},
		{"TurnRequest", `{"messages":[{"role":"tool_permission","toolCallId":"c"}]}`},
		{"TurnRequest", `{"messages":[{"role":"user","content":[{"type":"video"}]}]}`},
		{"TurnRequest", `{"stream":5,"messages":[{"role":"user","content":"hi"}]}`},
	}
	for _, c := range refused {
		if decodeAs(c.schema, c.json) == nil {
			t.Fatalf("the server's decoder takes %s", c.json)
		}
		if len(d.CheckSchema(c.schema, []byte(c.json))) == 0 {
			t.Errorf("%s accepts %s, which the server refuses", c.schema, c.json)
		}
	}
}

// decodeAs decodes a body as the handler does (before the rules that need
// the agent or the session).
func decodeAs(schema, body string) error {
	if schema == "CreateSessionRequest" {
		var r aap.CreateSessionRequest
		if err := json.Unmarshal([]byte(body), &r); err != nil {
			return err
		}
		if r.Agent.Name == "" {
			return &aap.Error{Field: "agent.name", Msg: "required"}
		}
		return nil
	}
	var r aap.TurnRequest
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		return err
	}
	if len(r.Messages) == 0 {
		return &aap.Error{Field: "messages", Msg: "at least one message is required"}
	}
	return nil
}
