package anthropic

import (
	"context"
	"strings"
	"testing"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/agents"
)

func TestGenerateAssemblesStream(t *testing.T) {
	sigA := "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"
	weather := `{"location": "San Francisco, CA", "unit": "celsius"}`
	clock := `{"tz":"Europe/Paris"}`
	tests := []struct {
		name        string
		events      []event
		wantDeltas  string
		wantMessage string // the AAP message as JSON
		wantExtra   string // "" for none
		wantStop    aap.StopReason
		wantUsage   agents.Usage
	}{{
		name:        "plain text over several deltas, with pings",
		events:      flat(messageStart(12, 0, 0), textStart(0), ping(), textDelta(0, "Hel"), textDelta(0, "lo, "), ping(), textDelta(0, "world"), blockStop(0), messageDelta("end_turn", 7), messageStop()),
		wantDeltas:  "[Hel][lo, ][world]",
		wantMessage: `{"role":"assistant","content":[{"type":"text","text":"Hello, world"}]}`,
		wantStop:    aap.StopEndTurn,
		wantUsage:   agents.Usage{InputTokens: 12, OutputTokens: 7},
	}, {
		name: "thinking with signature, then text",
		events: flat(messageStart(20, 0, 0),
			thinkingStart(0), thinkingDelta(0, "Let me"), thinkingDelta(0, " think."), signatureDelta(0, sigA), blockStop(0),
			textStart(1), textDelta(1, "42"), blockStop(1),
			messageDelta("end_turn", 30), messageStop()),
		wantDeltas:  "~Let me~~ think.~[42]",
		wantMessage: `{"role":"assistant","content":[{"type":"thinking","thinking":"Let me think."},{"type":"text","text":"42"}]}`,
		wantExtra:   `{"anthropic":{"blocks":[{"index":0,"signature":"` + sigA + `","sha256":"` + thinkingHash("Let me think.") + `"}]}}`,
		wantStop:    aap.StopEndTurn,
		wantUsage:   agents.Usage{InputTokens: 20, OutputTokens: 30},
	}, {
		name: "redacted thinking between thinking and text",
		events: flat(messageStart(5, 0, 0),
			thinkingStart(0), thinkingDelta(0, "Hmm."), signatureDelta(0, "sig1"), blockStop(0),
			redactedStart(1, "EmwKAhgBEgy3va3pzix/LafPsn4a"), blockStop(1),
			textStart(2), textDelta(2, "Done"), blockStop(2),
			messageDelta("end_turn", 9), messageStop()),
		wantDeltas:  "~Hmm.~[Done]",
		wantMessage: `{"role":"assistant","content":[{"type":"thinking","thinking":"Hmm."},{"type":"text","text":"Done"}]}`,
		wantExtra:   `{"anthropic":{"blocks":[{"index":0,"signature":"sig1","sha256":"` + thinkingHash("Hmm.") + `"},{"index":1,"redacted":"EmwKAhgBEgy3va3pzix/LafPsn4a"}]}}`,
		wantStop:    aap.StopEndTurn,
		wantUsage:   agents.Usage{InputTokens: 5, OutputTokens: 9},
	}, {
		name: "thinking whose text the API omitted",
		events: flat(messageStart(5, 0, 0),
			thinkingStart(0), signatureDelta(0, "sigOmitted"), blockStop(0),
			textStart(1), textDelta(1, "Hi"), blockStop(1),
			messageDelta("end_turn", 3), messageStop()),
		wantDeltas:  "[Hi]",
		wantMessage: `{"role":"assistant","content":[{"type":"text","text":"Hi"}]}`,
		wantExtra:   `{"anthropic":{"blocks":[{"index":0,"signature":"sigOmitted","omitted":true}]}}`,
		wantStop:    aap.StopEndTurn,
		wantUsage:   agents.Usage{InputTokens: 5, OutputTokens: 3},
	}, {
		name: "two tool_use blocks with input split across many deltas",
		events: flat(messageStart(50, 0, 0),
			textStart(0), textDelta(0, "Checking."), blockStop(0),
			toolStart(1, "toolu_01A", "get_weather"), inputDelta(1, ""), inputDeltas(1, weather, 3), blockStop(1),
			toolStart(2, "toolu_01B", "clock"), inputDeltas(2, clock, 1), blockStop(2),
			toolStart(3, "toolu_01C", "noargs"), blockStop(3),
			messageDelta("tool_use", 80), messageStop()),
		wantDeltas: "[Checking.]",
		wantMessage: `{"role":"assistant","content":[{"type":"text","text":"Checking."},` +
			`{"type":"tool_use","toolCallId":"toolu_01A","name":"get_weather","input":{"location":"San Francisco, CA","unit":"celsius"}},` +
			`{"type":"tool_use","toolCallId":"toolu_01B","name":"clock","input":{"tz":"Europe/Paris"}},` +
			`{"type":"tool_use","toolCallId":"toolu_01C","name":"noargs","input":{}}]}`,
		wantStop:  aap.StopToolUse,
		wantUsage: agents.Usage{InputTokens: 50, OutputTokens: 80},
	}, {
		name:        "max_tokens",
		events:      flat(messageStart(3, 0, 0), textStart(0), textDelta(0, "Once upon"), blockStop(0), messageDelta("max_tokens", 4096), messageStop()),
		wantDeltas:  "[Once upon]",
		wantMessage: `{"role":"assistant","content":[{"type":"text","text":"Once upon"}]}`,
		wantStop:    aap.StopMaxTokens,
		wantUsage:   agents.Usage{InputTokens: 3, OutputTokens: 4096},
	}, {
		name: "max_tokens in the middle of a tool input drops the call",
		events: flat(messageStart(3, 0, 0), textStart(0), textDelta(0, "Let me look"), blockStop(0),
			toolStart(1, "toolu_01", "get_weather"), inputDelta(1, `{"locat`), blockStop(1),
			messageDelta("max_tokens", 100), messageStop()),
		wantDeltas:  "[Let me look]",
		wantMessage: `{"role":"assistant","content":[{"type":"text","text":"Let me look"}]}`,
		wantStop:    aap.StopMaxTokens,
		wantUsage:   agents.Usage{InputTokens: 3, OutputTokens: 100},
	}, {
		name:        "refusal",
		events:      flat(messageStart(8, 0, 0), textStart(0), textDelta(0, "I can't"), blockStop(0), messageDelta("refusal", 2), messageStop()),
		wantDeltas:  "[I can't]",
		wantMessage: `{"role":"assistant","content":[{"type":"text","text":"I can't"}]}`,
		wantStop:    aap.StopRefusal,
		wantUsage:   agents.Usage{InputTokens: 8, OutputTokens: 2},
	}, {
		name:        "stop_sequence ends the turn",
		events:      flat(messageStart(1, 0, 0), textStart(0), textDelta(0, "a"), blockStop(0), messageDelta("stop_sequence", 1), messageStop()),
		wantDeltas:  "[a]",
		wantMessage: `{"role":"assistant","content":[{"type":"text","text":"a"}]}`,
		wantStop:    aap.StopEndTurn,
		wantUsage:   agents.Usage{InputTokens: 1, OutputTokens: 1},
	}, {
		name:        "pause_turn ends the turn",
		events:      flat(messageStart(1, 0, 0), textStart(0), textDelta(0, "b"), blockStop(0), messageDelta("pause_turn", 1), messageStop()),
		wantDeltas:  "[b]",
		wantMessage: `{"role":"assistant","content":[{"type":"text","text":"b"}]}`,
		wantStop:    aap.StopEndTurn,
		wantUsage:   agents.Usage{InputTokens: 1, OutputTokens: 1},
	}, {
		name:        "usage adds cache reads and writes to input",
		events:      flat(messageStart(25, 1000, 300), textStart(0), textDelta(0, "ok"), blockStop(0), messageDelta("end_turn", 42), messageStop()),
		wantDeltas:  "[ok]",
		wantMessage: `{"role":"assistant","content":[{"type":"text","text":"ok"}]}`,
		wantStop:    aap.StopEndTurn,
		wantUsage:   agents.Usage{InputTokens: 1325, OutputTokens: 42},
	}, {
		name: "cumulative input usage in message_delta wins",
		events: flat(messageStart(25, 0, 0), textStart(0), textDelta(0, "ok"), blockStop(0),
			event{"message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"input_tokens":40,"cache_read_input_tokens":2,"output_tokens":9}}`},
			messageStop()),
		wantDeltas:  "[ok]",
		wantMessage: `{"role":"assistant","content":[{"type":"text","text":"ok"}]}`,
		wantStop:    aap.StopEndTurn,
		wantUsage:   agents.Usage{InputTokens: 42, OutputTokens: 9},
	}, {
		name:        "no content at all",
		events:      flat(messageStart(4, 0, 0), messageDelta("end_turn", 1), messageStop()),
		wantMessage: `{"role":"assistant","content":[]}`,
		wantStop:    aap.StopEndTurn,
		wantUsage:   agents.Usage{InputTokens: 4, OutputTokens: 1},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t, sse(tt.events...))
			var c collector
			resp, err := f.model(Config{}).Generate(context.Background(), agents.ModelRequest{Messages: agents.Messages(aap.UserMessage("hi"))}, c.out)
			if err != nil {
				t.Fatal(err)
			}
			if got := c.String(); got != tt.wantDeltas {
				t.Errorf("deltas = %s, want %s", got, tt.wantDeltas)
			}
			if got := mustJSON(t, resp.Message.Message); got != tt.wantMessage {
				t.Errorf("message =\n%s\nwant\n%s", got, tt.wantMessage)
			}
			if got := string(resp.Message.Extra); tt.wantExtra == "" && got != "" || tt.wantExtra != "" && !sameJSON(t, got, tt.wantExtra) {
				t.Errorf("extra =\n%s\nwant\n%s", got, tt.wantExtra)
			}
			if resp.StopReason != tt.wantStop {
				t.Errorf("stop = %q, want %q", resp.StopReason, tt.wantStop)
			}
			if resp.Usage != tt.wantUsage {
				t.Errorf("usage = %+v, want %+v", resp.Usage, tt.wantUsage)
			}
			if n := len(f.calls()); n != 1 {
				t.Errorf("%d requests, want 1", n)
			}
		})
	}
}

func TestGenerateRejectsMalformedStreams(t *testing.T) {
	tests := []struct {
		name   string
		events []event
		want   string
	}{
		{"delta before its block", flat(messageStart(1, 0, 0), textDelta(0, "x")), "not started"},
		{"delta of the wrong kind", flat(messageStart(1, 0, 0), textStart(0), inputDelta(0, "{}")), "input_json_delta for a text block"},
		{"tool input that is not an object", flat(messageStart(1, 0, 0), toolStart(0, "toolu_1", "t"), inputDelta(0, `[1]`), blockStop(0), messageDelta("tool_use", 1), messageStop()), `tool "t"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t, sse(tt.events...))
			_, err := f.model(Config{}).Generate(context.Background(), agents.ModelRequest{Messages: agents.Messages(aap.UserMessage("hi"))}, nil)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want one mentioning %q", err, tt.want)
			}
			if n := len(f.calls()); n != 1 {
				t.Errorf("%d requests, want 1 (not retried)", n)
			}
		})
	}
}
