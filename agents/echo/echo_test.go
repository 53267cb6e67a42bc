package echo_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/agents"
	"github.com/aapd/aapd/agents/echo"
)

func generate(t *testing.T, ctx context.Context, opts map[string]string, msgs ...aap.Message) (agents.ModelResponse, string, error) {
	t.Helper()
	var streamed strings.Builder
	if opts == nil {
		opts = map[string]string{"prefix": "Echo: ", "style": "plain"}
	}
	resp, err := echo.Model{}.Generate(ctx, agents.ModelRequest{Messages: agents.Messages(msgs...), Options: opts},
		func(d agents.ModelDelta) { streamed.WriteString(d.Text) })
	return resp, streamed.String(), err
}

func TestEchoDirectives(t *testing.T) {
	cases := []struct {
		in     string
		stop   aap.StopReason
		blocks string // types of the answer's blocks
		text   string
	}{
		{"hello", aap.StopEndTurn, "text", "Echo: hello"},
		{"/think hmm\nhi", aap.StopEndTurn, "thinking,text", "Echo: hi"},
		{"/tool lookup {\"q\":1}\n/tool clock", aap.StopToolUse, "tool_use,tool_use", ""},
		{"/refuse", aap.StopRefusal, "text", "I can't help with that."},
		{"/max_tokens\nthis is a long answer", aap.StopMaxTokens, "text", "Echo: this"},
		{"/words 3", aap.StopEndTurn, "text", "Echo: word1 word2 word3"},
		{"/tool bad/name {}", aap.StopEndTurn, "text", "Echo: /tool: \"bad/name\" is not a tool name"},
	}
	for _, tc := range cases {
		resp, streamed, err := generate(t, context.Background(), nil, aap.UserMessage(tc.in))
		if err != nil {
			t.Fatalf("%q: %v", tc.in, err)
		}
		var types []string
		for _, b := range resp.Message.Content.Blocks {
			types = append(types, b.Type)
		}
		if resp.StopReason != tc.stop || strings.Join(types, ",") != tc.blocks || resp.Message.Content.PlainText() != tc.text {
			t.Errorf("%q: stop %s, blocks %v, text %q", tc.in, resp.StopReason, types, resp.Message.Content.PlainText())
		}
		if !strings.Contains(streamed, tc.text) {
			t.Errorf("%q: streamed %q", tc.in, streamed)
		}
	}
}

func TestEchoOptionsAndToolResults(t *testing.T) {
	resp, _, _ := generate(t, context.Background(), map[string]string{"prefix": "> ", "style": "shout", "token": "x"}, aap.UserMessage("hi\n/options"))
	if got := resp.Message.Content.PlainText(); got != "> HI\nOPTIONS: PREFIX=\"> \", STYLE=\"SHOUT\", TOKEN=SET" {
		t.Errorf("got %q", got)
	}
	call := aap.ToolCall{ToolCallID: "c1", Name: "lookup", Input: []byte(`{}`)}
	resp, _, _ = generate(t, context.Background(), nil, aap.UserMessage("q"), aap.AssistantMessage(aap.ToolUseBlock(call)), aap.ToolMessage("c1", "found"))
	if got := resp.Message.Content.PlainText(); got != "Tool results: lookup: found" {
		t.Errorf("got %q", got)
	}
}

func TestEchoFailsAndHonoursCancellation(t *testing.T) {
	resp, _, err := generate(t, context.Background(), nil, aap.UserMessage("/error boom"))
	if !errors.Is(err, echo.ErrRequested) || resp.Message.Content.PlainText() != "Partial answer" {
		t.Errorf("/error: %v, %+v", err, resp)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	resp, _, err = generate(t, ctx, nil, aap.UserMessage("/slow 20\n/words 1000"))
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > time.Second || resp.Message.Content.PlainText() == "" {
		t.Errorf("cancelled: %v after %s, partial %q", err, time.Since(start), resp.Message.Content.PlainText())
	}
}

// TestEchoAskCallsTheQuestionTool: /ask calls agents.QuestionTool with the
// question and its options.
func TestEchoAskCallsTheQuestionTool(t *testing.T) {
	resp, _, err := generate(t, context.Background(), nil, aap.UserMessage("/ask Which color? | red | green blue |"))
	if err != nil {
		t.Fatal(err)
	}
	calls := resp.Message.ToolCalls()
	if resp.StopReason != aap.StopToolUse || len(calls) != 1 || calls[0].Name != agents.QuestionToolName {
		t.Fatalf("stop %s, calls %+v", resp.StopReason, calls)
	}
	if got, want := string(calls[0].Input), `{"question":"Which color?","options":["red","green blue"]}`; got != want {
		t.Errorf("input %s, want %s", got, want)
	}
}
