package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/agents"
)

// errNoModel is a call that names no model and has no default.
var errNoModel = errors.New("openai: no model id: set Config.DefaultModel or the agent's model option")

// params maps a model request to a chat completions request.
func (m *Model) params(req agents.ModelRequest) (sdk.ChatCompletionNewParams, error) {
	model := req.Model
	if model == "" {
		model = m.cfg.DefaultModel
	}
	if model == "" {
		return sdk.ChatCompletionNewParams{}, errNoModel
	}
	msgs, err := messages(req.System, req.Messages)
	if err != nil {
		return sdk.ChatCompletionNewParams{}, err
	}
	tools, err := functionTools(req.Tools)
	if err != nil {
		return sdk.ChatCompletionNewParams{}, err
	}
	p := sdk.ChatCompletionNewParams{
		Model:         model,
		Messages:      msgs,
		Tools:         tools,
		StreamOptions: sdk.ChatCompletionStreamOptionsParam{IncludeUsage: sdk.Bool(true)},
	}
	if tc := req.ToolChoice; tc != nil && len(tools) > 0 {
		p.ToolChoice = toolChoice(tc.Name)
	}
	if m.cfg.Temperature != nil {
		p.Temperature = sdk.Float(*m.cfg.Temperature)
	}
	if m.cfg.MaxTokens > 0 {
		m.maxTokens(&p, m.cfg.MaxTokens)
	}
	return p, nil
}

// messages maps the system prompt and the history. Thinking is not sent
// back: chat completions has no place for it, and providers that reason
// do not expect their past reasoning in the prompt.
func messages(system string, history []agents.Message) ([]sdk.ChatCompletionMessageParamUnion, error) {
	out := make([]sdk.ChatCompletionMessageParamUnion, 0, len(history)+1)
	if system != "" {
		out = append(out, sdk.SystemMessage(system))
	}
	// Chat completions takes no images in tool messages: a tool result's
	// images follow the run of tool messages it is part of, in one user
	// message (a user message between the results of one assistant
	// message's calls would be refused).
	var toolImages []sdk.ChatCompletionContentPartUnionParam
	flushImages := func() {
		if len(toolImages) > 0 {
			out = append(out, sdk.UserMessage(toolImages))
			toolImages = nil
		}
	}
	for i, m := range history {
		if m.Role != aap.RoleTool {
			flushImages()
		}
		switch m.Role {
		case aap.RoleSystem:
			out = append(out, sdk.SystemMessage(m.Content.PlainText()))
		case aap.RoleUser:
			out = append(out, userMessage(m.Content))
		case aap.RoleAssistant:
			if msg, ok := assistantMessage(m.Content); ok {
				out = append(out, msg)
			}
		case aap.RoleTool:
			text, images := toolResult(m.Message, len(toolImages))
			out = append(out, sdk.ToolMessage(text, m.ToolCallID))
			toolImages = append(toolImages, images...)
		default:
			return nil, fmt.Errorf("openai: history message %d: role %q cannot be sent to a model", i, m.Role)
		}
	}
	flushImages()
	return out, nil
}

// toolResult maps a tool message to the text of its tool message and the
// content parts of its images, which follow in a user message: the text
// says where each image went, and the user message says which result each
// image belongs to. seen is the number of image parts already waiting.
func toolResult(m aap.Message, seen int) (string, []sdk.ChatCompletionContentPartUnionParam) {
	if !m.Content.IsBlocks() {
		return m.Content.Text, nil
	}
	var (
		parts  []string
		images []sdk.ChatCompletionContentPartUnionParam
	)
	for _, b := range m.Content.Blocks {
		switch b.Type {
		case aap.BlockText:
			parts = append(parts, b.Text)
		case aap.BlockImage:
			n := (seen+len(images))/2 + 1
			parts = append(parts, fmt.Sprintf("[image %d of the tool results: it follows in the next user message]", n))
			images = append(images,
				sdk.TextContentPart(fmt.Sprintf("Image %d of the tool results (tool call %s):", n, m.ToolCallID)),
				sdk.ImageContentPart(sdk.ChatCompletionContentPartImageImageURLParam{URL: b.URL}))
		}
	}
	return strings.Join(parts, "\n"), images
}

// userMessage sends plain text as a string, which every compatible server
// accepts, and switches to content parts only when there are images.
func userMessage(c aap.Content) sdk.ChatCompletionMessageParamUnion {
	blocks := c.AsBlocks()
	hasImage := false
	for _, b := range blocks {
		hasImage = hasImage || b.Type == aap.BlockImage
	}
	if !hasImage {
		return sdk.UserMessage(c.PlainText())
	}
	parts := make([]sdk.ChatCompletionContentPartUnionParam, 0, len(blocks))
	for _, b := range blocks {
		switch b.Type {
		case aap.BlockText:
			parts = append(parts, sdk.TextContentPart(b.Text))
		case aap.BlockImage:
			parts = append(parts, sdk.ImageContentPart(sdk.ChatCompletionContentPartImageImageURLParam{URL: b.URL}))
		}
	}
	return sdk.UserMessage(parts)
}

// assistantMessage maps text and tool calls; it is false for a message
// with neither (one that only thought, cut short by an error).
func assistantMessage(c aap.Content) (sdk.ChatCompletionMessageParamUnion, bool) {
	var calls []sdk.ChatCompletionMessageToolCallUnionParam
	for _, b := range c.AsBlocks() {
		if b.Type != aap.BlockToolUse {
			continue
		}
		args := string(b.Input)
		if len(bytes.TrimSpace(b.Input)) == 0 || string(b.Input) == "null" {
			args = "{}"
		}
		calls = append(calls, sdk.ChatCompletionMessageToolCallUnionParam{
			OfFunction: &sdk.ChatCompletionMessageFunctionToolCallParam{
				ID:       b.ToolCallID,
				Function: sdk.ChatCompletionMessageFunctionToolCallFunctionParam{Name: b.Name, Arguments: args},
			},
		})
	}
	text := flatten(c, "an assistant message")
	if text == "" && len(calls) == 0 {
		return sdk.ChatCompletionMessageParamUnion{}, false
	}
	var msg sdk.ChatCompletionAssistantMessageParam
	if text != "" {
		msg.Content.OfString = sdk.String(text)
	}
	msg.ToolCalls = calls
	return sdk.ChatCompletionMessageParamUnion{OfAssistant: &msg}, true
}

// flatten is content as text, for the messages that can only carry text:
// text blocks joined by newlines, with each image replaced by a note that
// says what it was.
func flatten(c aap.Content, where string) string {
	if !c.IsBlocks() {
		return c.Text
	}
	var parts []string
	for _, b := range c.Blocks {
		switch b.Type {
		case aap.BlockText:
			parts = append(parts, b.Text)
		case aap.BlockImage:
			parts = append(parts, imageNote(b.URL, where))
		}
	}
	return strings.Join(parts, "\n")
}

// imageNote describes an image the model cannot be shown. A data: URL is
// described by its media type rather than copied: megabytes of base64 as
// text would only waste the context window.
func imageNote(url, where string) string {
	src := url
	if rest, ok := strings.CutPrefix(url, "data:"); ok {
		mediaType, _, _ := strings.Cut(rest, ",")
		mediaType, _, _ = strings.Cut(mediaType, ";")
		if mediaType == "" {
			mediaType = "unknown type"
		}
		src = "inline " + mediaType + " data"
	}
	return fmt.Sprintf("[image not shown: %s cannot carry images (%s)]", where, src)
}

// functionTools declares the tools as functions.
func functionTools(specs []aap.ToolSpec) ([]sdk.ChatCompletionToolUnionParam, error) {
	tools := make([]sdk.ChatCompletionToolUnionParam, 0, len(specs))
	for _, t := range specs {
		def := shared.FunctionDefinitionParam{Name: t.Name}
		if t.Description != "" {
			def.Description = sdk.String(t.Description)
		}
		if len(t.Parameters) > 0 {
			// The top-level properties stay raw JSON so the schema is sent
			// exactly as written.
			var props map[string]json.RawMessage
			if err := json.Unmarshal(t.Parameters, &props); err != nil {
				return nil, fmt.Errorf("openai: tool %q: parameters are not a JSON object: %w", t.Name, err)
			}
			def.Parameters = make(shared.FunctionParameters, len(props))
			for k, v := range props {
				def.Parameters[k] = v
			}
		}
		tools = append(tools, sdk.ChatCompletionFunctionTool(def))
	}
	return tools, nil
}

// toolChoice forces a call: of the function named, or of any ("required").
// The named form is chat completions' own, which the compatible servers
// that force calls (vLLM, llama.cpp's server, LiteLLM) take as OpenAI does.
func toolChoice(name string) sdk.ChatCompletionToolChoiceOptionUnionParam {
	if name == "" {
		return sdk.ChatCompletionToolChoiceOptionUnionParam{OfAuto: sdk.String(string(sdk.ChatCompletionToolChoiceOptionAutoRequired))}
	}
	return sdk.ChatCompletionToolChoiceOptionUnionParam{OfFunctionToolChoice: &sdk.ChatCompletionNamedToolChoiceParam{
		Function: sdk.ChatCompletionNamedToolChoiceFunctionParam{Name: name}}}
}
