package anthropic

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/agents"
)

// stored passes a generated message through what the agent loop and the
// store do to it: the loop writes a lone text block as string content, the
// store keeps the message as JSON and Extra as JSON text.
func stored(t *testing.T, m agents.Message) agents.Message {
	t.Helper()
	if b := m.Content.AsBlocks(); len(b) == 1 && b[0].Type == aap.BlockText {
		m.Message = aap.Message{Role: aap.RoleAssistant, Content: aap.TextContent(b[0].Text)}
	}
	var back agents.Message
	if err := json.Unmarshal([]byte(mustJSON(t, m.Message)), &back.Message); err != nil {
		t.Fatal(err)
	}
	if m.Extra != nil {
		back.Extra = json.RawMessage(string(m.Extra))
	}
	return back
}

func TestThinkingRoundTrip(t *testing.T) {
	sig1 := "EuYBCkQYAiJAXkPQ0a1pLr2bXcQ+9aG0lZ7mN3oP/qR8sT9uV0wX1yZ2=="
	sig2 := "ErUBCkYIBRgCIkB0omitted=="
	f := newFake(t,
		sse(flat(messageStart(30, 0, 0),
			thinkingStart(0), thinkingDelta(0, "I should call "), thinkingDelta(0, "the tool."), signatureDelta(0, sig1), blockStop(0),
			redactedStart(1, "EmwKAhgBEgy3va3pzix/REDACTED"), blockStop(1),
			textStart(2), textDelta(2, "Checking."), blockStop(2),
			toolStart(3, "toolu_01", "get_weather"), inputDeltas(3, `{"city": "Paris"}`, 4), blockStop(3),
			messageDelta("tool_use", 60), messageStop())...),
		sse(flat(messageStart(90, 0, 0),
			thinkingStart(0), signatureDelta(0, sig2), blockStop(0),
			redactedStart(1, "SECOND-REDACTED"), blockStop(1),
			textStart(2), textDelta(2, "It is 18C."), blockStop(2),
			messageDelta("end_turn", 12), messageStop())...),
		sse(textStream("You're welcome.")...),
	)
	m := f.model(Config{ThinkingBudget: 1024})
	history := []agents.Message{{Message: aap.UserMessage("Weather in Paris?")}}

	r1, err := m.Generate(context.Background(), agents.ModelRequest{Messages: history}, nil)
	if err != nil {
		t.Fatal(err)
	}
	history = append(history, stored(t, r1.Message), agents.Message{Message: aap.ToolMessage("toolu_01", "18C")})

	r2, err := m.Generate(context.Background(), agents.ModelRequest{Messages: history}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := mustJSON(t, r2.Message.Message); got != `{"role":"assistant","content":[{"type":"text","text":"It is 18C."}]}` {
		t.Fatalf("second answer = %s", got)
	}
	history = append(history, stored(t, r2.Message), agents.Message{Message: aap.UserMessage("Thanks!")})

	if _, err := m.Generate(context.Background(), agents.ModelRequest{Messages: history}, nil); err != nil {
		t.Fatal(err)
	}

	wantSecond := `[
		{"role":"user","content":[{"type":"text","text":"Weather in Paris?"}]},
		{"role":"assistant","content":[
			{"type":"thinking","thinking":"I should call the tool.","signature":"` + sig1 + `"},
			{"type":"redacted_thinking","data":"EmwKAhgBEgy3va3pzix/REDACTED"},
			{"type":"text","text":"Checking."},
			{"type":"tool_use","id":"toolu_01","name":"get_weather","input":{"city":"Paris"}}]},
		{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_01","content":[{"type":"text","text":"18C"}]}]}]`
	if got := mustJSON(t, f.body(1)["messages"]); !sameJSON(t, got, wantSecond) {
		t.Errorf("second request's messages =\n%s\nwant\n%s", got, wantSecond)
	}
	// The third request carries both assistant messages back, the second
	// with its text-less thinking and its redacted block before the text.
	msgs, _ := f.body(2)["messages"].([]any)
	if len(msgs) != 5 {
		t.Fatalf("third request has %d messages, want 5: %s", len(msgs), mustJSON(t, msgs))
	}
	wantFourth := `{"role":"assistant","content":[
		{"type":"thinking","thinking":"","signature":"` + sig2 + `"},
		{"type":"redacted_thinking","data":"SECOND-REDACTED"},
		{"type":"text","text":"It is 18C."}]}`
	if got := mustJSON(t, msgs[3]); !sameJSON(t, got, wantFourth) {
		t.Errorf("third request's fourth message =\n%s\nwant\n%s", got, wantFourth)
	}
	if got := mustJSON(t, msgs[1]); !sameJSON(t, got, mustJSON(t, f.body(1)["messages"].([]any)[1])) {
		t.Errorf("the first answer changed between requests: %s", got)
	}
}

func TestAssistantBlocksFromExtra(t *testing.T) {
	think := aap.ThinkingBlock("reasoning")
	text := aap.TextBlock("answer")
	good := func(index int) string {
		return `{"anthropic":{"blocks":[{"index":` + strconv.Itoa(index) + `,"signature":"S","sha256":"` + thinkingHash("reasoning") + `"}]}}`
	}
	tests := []struct {
		name   string
		blocks []aap.ContentBlock
		extra  string
		want   string
	}{
		{"signed thinking", []aap.ContentBlock{think, text}, good(0),
			`[{"type":"thinking","thinking":"reasoning","signature":"S"},{"type":"text","text":"answer"}]`},
		{"no extra: unsigned thinking dropped", []aap.ContentBlock{think, text}, ``,
			`[{"type":"text","text":"answer"}]`},
		{"another provider's extra", []aap.ContentBlock{think, text}, `{"openai":{"reasoning":"x"}}`,
			`[{"type":"text","text":"answer"}]`},
		{"extra that is not JSON", []aap.ContentBlock{think, text}, `not json`,
			`[{"type":"text","text":"answer"}]`},
		{"thinking edited since it was signed", []aap.ContentBlock{aap.ThinkingBlock("edited"), text}, good(0),
			`[{"type":"text","text":"answer"}]`},
		{"signature pointing at a text block", []aap.ContentBlock{text, think}, good(0),
			`[{"type":"text","text":"answer"}]`},
		{"redacted and omitted blocks past the end go last", []aap.ContentBlock{text},
			`{"anthropic":{"blocks":[{"index":5,"redacted":"R"},{"index":1,"signature":"O","omitted":true}]}}`,
			`[{"type":"text","text":"answer"},{"type":"redacted_thinking","data":"R"},{"type":"thinking","thinking":"","signature":"O"}]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := agents.Message{Message: aap.AssistantMessage(tt.blocks...)}
			if tt.extra != "" {
				m.Extra = json.RawMessage(tt.extra)
			}
			if got := mustJSON(t, assistantBlocks(m)); !sameJSON(t, got, tt.want) {
				t.Errorf("blocks =\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}
