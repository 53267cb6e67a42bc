// Package echo is aapd's built-in agent: a deterministic model that needs no
// network and no credentials, so the server works out of the box and every
// protocol path can be exercised by tests and by a person with curl.
//
// The echo model answers the last user message. Lines of the message that
// start with a slash are directives (see the README's "echo agent" section):
//
//	/think TEXT        think TEXT before answering
//	/tool NAME [JSON]  call tool NAME with input JSON (one line per call; several lines call in parallel)
//	/ask Q | A | B     ask the user question Q with options A and B (agents.QuestionTool)
//	/slow MS           wait MS milliseconds before each streamed piece (of the report of tool results too)
//	/words N           answer with N numbered words (a long answer)
//	/options           answer with the session's option values (secrets as "set"/"unset")
//	/refuse            refuse (stop reason "refusal")
//	/max_tokens        stop early (stop reason "max_tokens")
//	/error [TEXT]      fail after a partial answer (stop reason "error")
//
// Every other line is echoed back, after the "prefix" option, shouted when
// the "style" option is "shout". After tool results it reports them.
package echo

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/agents"
	"github.com/aapd/aapd/agents/tools"
	"github.com/aapd/aapd/compaction"
)

// Name is the echo agent's name.
const Name = "echo"

// NewAgent returns the echo agent with the clock and calculator tools.
func NewAgent() *agents.Agent {
	e := &aap.Empty{}
	return &agents.Agent{
		Info: aap.AgentInfo{
			Name:        Name,
			Title:       "Echo",
			Version:     "1.0.0",
			Description: "Deterministic built-in agent for development and tests: echoes messages and follows /directives to think, call tools, refuse or fail.",
			Options: []aap.AgentOption{
				{Type: aap.OptionText, Name: "prefix", Title: "Prefix", Description: "Text put before every echoed answer.", Default: "Echo: "},
				{Type: aap.OptionSelect, Name: "style", Title: "Style", Description: "plain echoes as sent; shout echoes in capitals.", Options: []string{"plain", "shout"}, Default: "plain"},
				{Type: aap.OptionSecret, Name: "token", Title: "Token", Description: "A secret the echo agent only reports as set or unset (/options): shows how secrets are kept.", Default: ""},
			},
			Capabilities: &aap.Capabilities{
				History:     &aap.HistoryCapabilities{Compacted: e, Full: e},
				Stream:      &aap.StreamCapabilities{Delta: e, Message: e, None: e},
				Application: &aap.ApplicationCapabilities{Tools: e},
				Image:       &aap.ImageCapabilities{HTTP: e, Data: e},
			},
		},
		Model:     Model{},
		Provider:  "echo",
		ModelName: "echo",
		Tools:     []agents.Tool{tools.Clock(nil), tools.Calculator()},
		Compaction: &agents.Compaction{
			Policy:     DefaultCompaction,
			Summarizer: compaction.EchoSummarizer{},
		},
	}
}

// DefaultCompaction is the echo agent's compaction policy: small, so that
// compaction can be watched in a short conversation, and deterministic.
var DefaultCompaction = compaction.Policy{
	Strategy:  compaction.StrategySummarize,
	Threshold: 4000,
	Target:    2400,
	KeepLast:  8,
}.WithDefaults()

// Model is the echo model.
type Model struct{}

// Provider is "echo": no provider's API is called (agents.ModelDescriber).
func (Model) Provider() string { return Name }

// ModelID is "echo": there is only the one.
func (Model) ModelID(agents.ModelRequest) string { return Name }

// ErrRequested is the failure the /error directive asks for.
var ErrRequested = errors.New("echo: failure requested by /error")

// Generate answers the conversation's last message.
func (Model) Generate(ctx context.Context, req agents.ModelRequest, out func(agents.ModelDelta)) (agents.ModelResponse, error) {
	g := &generation{ctx: ctx, out: out}
	if len(req.Messages) == 0 {
		return g.answer("(empty conversation)", aap.StopEndTurn)
	}
	last := req.Messages[len(req.Messages)-1].Message
	switch last.Role {
	case aap.RoleTool:
		g.delay = slowOf(req.Messages)
		return g.answer(reportResults(req.Messages), aap.StopEndTurn)
	case aap.RoleUser:
		return g.follow(last.Content, req.Options)
	}
	return g.answer("(no new message)", aap.StopEndTurn)
}

// generation builds one answer, streaming its pieces.
type generation struct {
	ctx    context.Context
	out    func(agents.ModelDelta)
	delay  time.Duration
	blocks []aap.ContentBlock
}

// stream emits text piece by piece (a word and its space at a time) and
// appends it to the answer as one block.
func (g *generation) stream(thinking bool, text string) error {
	block := aap.TextBlock("")
	if thinking {
		block = aap.ThinkingBlock("")
	}
	g.blocks = append(g.blocks, block)
	b := &g.blocks[len(g.blocks)-1]
	for _, piece := range pieces(text) {
		if g.delay > 0 {
			select {
			case <-g.ctx.Done():
				return g.ctx.Err()
			case <-time.After(g.delay):
			}
		} else if err := g.ctx.Err(); err != nil {
			return err
		}
		if thinking {
			b.Thinking += piece
		} else {
			b.Text += piece
		}
		g.out(agents.ModelDelta{Thinking: thinking, Text: piece})
	}
	return nil
}

func (g *generation) response(stop aap.StopReason) agents.ModelResponse {
	return agents.ModelResponse{Message: agents.Message{Message: aap.AssistantMessage(g.blocks...)}, StopReason: stop}
}

func (g *generation) answer(text string, stop aap.StopReason) (agents.ModelResponse, error) {
	if err := g.stream(false, text); err != nil {
		return g.response(stop), err
	}
	return g.response(stop), nil
}

// follow answers a user message, obeying its directives.
func (g *generation) follow(content aap.Content, opts map[string]string) (agents.ModelResponse, error) {
	var (
		echo    []string
		calls   []aap.ContentBlock
		think   []string
		stop    = aap.StopEndTurn
		failure error
	)
	for _, line := range strings.Split(content.PlainText(), "\n") {
		directive, arg, _ := strings.Cut(strings.TrimSpace(line), " ")
		arg = strings.TrimSpace(arg)
		switch directive {
		case "/think":
			think = append(think, arg)
		case "/tool":
			call, err := parseCall(arg)
			if err != nil {
				echo = append(echo, err.Error())
				continue
			}
			calls = append(calls, call)
		case "/ask":
			calls = append(calls, askCall(arg))
		case "/slow":
			ms, _ := strconv.Atoi(arg)
			g.delay = time.Duration(ms) * time.Millisecond
		case "/words":
			n, _ := strconv.Atoi(arg)
			echo = append(echo, words(min(max(n, 0), 100000)))
		case "/options":
			echo = append(echo, describeOptions(opts))
		case "/refuse":
			stop = aap.StopRefusal
			echo = append(echo, "I can't help with that.")
		case "/max_tokens":
			stop = aap.StopMaxTokens
		case "/error":
			failure = ErrRequested
			if arg != "" {
				failure = fmt.Errorf("%w: %s", ErrRequested, arg)
			}
		default:
			if strings.TrimSpace(line) != "" {
				echo = append(echo, line)
			}
		}
	}
	if n := countImages(content); n > 0 {
		echo = append(echo, fmt.Sprintf("[%d image(s)]", n))
	}
	for _, t := range think {
		if err := g.stream(true, t); err != nil {
			return g.response(stop), err
		}
	}
	text := ""
	if len(echo) > 0 && stop != aap.StopRefusal {
		text = opts["prefix"] + strings.Join(echo, "\n")
		if opts["style"] == "shout" {
			text = strings.ToUpper(text)
		}
	} else if len(echo) > 0 {
		text = strings.Join(echo, "\n")
	}
	if stop == aap.StopMaxTokens {
		text = truncate(text)
	}
	if failure != nil {
		if err := g.stream(false, "Partial answer"); err != nil {
			return g.response(stop), err
		}
		return g.response(aap.StopError), failure
	}
	if text != "" {
		if err := g.stream(false, text); err != nil {
			return g.response(stop), err
		}
	}
	if len(calls) > 0 {
		g.blocks = append(g.blocks, calls...)
		stop = aap.StopToolUse
	}
	return g.response(stop), nil
}

// parseCall reads "NAME [JSON]".
func parseCall(arg string) (aap.ContentBlock, error) {
	name, input, _ := strings.Cut(arg, " ")
	input = strings.TrimSpace(input)
	if input == "" {
		input = "{}"
	}
	if !aap.ValidToolName(name) {
		return aap.ContentBlock{}, fmt.Errorf("/tool: %q is not a tool name", name)
	}
	var obj map[string]any
	if err := json.Unmarshal([]byte(input), &obj); err != nil {
		return aap.ContentBlock{}, fmt.Errorf("/tool %s: input is not a JSON object: %v", name, err)
	}
	return aap.ToolUseBlock(aap.ToolCall{ToolCallID: newCallID(), Name: name, Input: json.RawMessage(input)}), nil
}

// askCall is a call of the question tool (agents.QuestionTool) from
// "QUESTION | OPTION | OPTION…".
func askCall(arg string) aap.ContentBlock {
	parts := strings.Split(arg, "|")
	in := struct {
		Question string   `json:"question"`
		Options  []string `json:"options"`
	}{Question: strings.TrimSpace(parts[0]), Options: []string{}}
	for _, o := range parts[1:] {
		if o = strings.TrimSpace(o); o != "" {
			in.Options = append(in.Options, o)
		}
	}
	input, _ := json.Marshal(in)
	return aap.ToolUseBlock(aap.ToolCall{ToolCallID: newCallID(), Name: agents.QuestionToolName, Input: input})
}

func newCallID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return "call_" + hex.EncodeToString(b)
}

// slowOf is the delay the last user message asks for (/slow), which the
// report of its tool calls' results keeps: a turn of several steps is slow
// in each.
func slowOf(msgs []agents.Message) time.Duration {
	for i := len(msgs) - 1; i >= 0; i-- {
		m := msgs[i].Message
		if m.Role != aap.RoleUser {
			continue
		}
		for _, line := range strings.Split(m.Content.PlainText(), "\n") {
			if directive, arg, _ := strings.Cut(strings.TrimSpace(line), " "); directive == "/slow" {
				ms, _ := strconv.Atoi(strings.TrimSpace(arg))
				return time.Duration(ms) * time.Millisecond
			}
		}
		return 0
	}
	return 0
}

// reportResults describes the tool results that follow the last assistant
// message.
func reportResults(msgs []agents.Message) string {
	names := map[string]string{}
	var results []string
	for i := len(msgs) - 1; i >= 0; i-- {
		m := msgs[i].Message
		if m.Role == aap.RoleAssistant {
			for _, c := range m.ToolCalls() {
				names[c.ToolCallID] = c.Name
			}
			break
		}
		if m.Role == aap.RoleTool {
			results = append(results, m.ToolCallID+"\x00"+m.Content.PlainText())
		}
	}
	slices.Reverse(results)
	parts := make([]string, len(results))
	for i, r := range results {
		id, text, _ := strings.Cut(r, "\x00")
		name := names[id]
		if name == "" {
			name = id
		}
		parts[i] = name + ": " + text
	}
	return "Tool results: " + strings.Join(parts, "; ")
}

func describeOptions(opts map[string]string) string {
	keys := make([]string, 0, len(opts))
	for k := range opts {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		v := strconv.Quote(opts[k])
		if k == "token" {
			v = "unset"
			if opts[k] != "" {
				v = "set"
			}
		}
		parts[i] = k + "=" + v
	}
	return "options: " + strings.Join(parts, ", ")
}

func countImages(c aap.Content) int {
	n := 0
	for _, b := range c.Blocks {
		if b.Type == aap.BlockImage {
			n++
		}
	}
	return n
}

func words(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		if i > 1 {
			b.WriteByte(' ')
		}
		b.WriteString("word")
		b.WriteString(strconv.Itoa(i))
	}
	return b.String()
}

func truncate(s string) string {
	if r := []rune(s); len(r) > 10 {
		return string(r[:10])
	}
	return s
}

// pieces splits text into streamable pieces: each word with the space
// after it.
func pieces(s string) []string {
	var out []string
	for len(s) > 0 {
		i := strings.IndexByte(s, ' ')
		if i < 0 {
			out = append(out, s)
			break
		}
		out = append(out, s[:i+1])
		s = s[i+1:]
	}
	return out
}
