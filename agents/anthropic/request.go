package anthropic

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/packages/param"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/agents"
)

// params maps a model request onto a Messages API request.
func (m *Model) params(req agents.ModelRequest) (anthropic.MessageNewParams, error) {
	model := req.Model
	if model == "" {
		model = m.cfg.DefaultModel
	}
	if model == "" {
		return anthropic.MessageNewParams{}, errors.New("anthropic: no model: the request names none and no DefaultModel is configured")
	}
	tools, err := toolParams(req.Tools)
	if err != nil {
		return anthropic.MessageNewParams{}, fmt.Errorf("anthropic: %w", err)
	}
	system, messages := conversation(req.System, req.Messages)
	p := anthropic.MessageNewParams{
		Model:     anthropic.Model(model),
		MaxTokens: m.cfg.MaxTokens,
		System:    system,
		Messages:  messages,
		Tools:     tools,
	}
	if tc := req.ToolChoice; tc != nil && len(tools) > 0 {
		if tc.Name != "" {
			p.ToolChoice = anthropic.ToolChoiceParamOfTool(tc.Name)
		} else {
			p.ToolChoice = anthropic.ToolChoiceUnionParam{OfAny: &anthropic.ToolChoiceAnyParam{}}
		}
	}
	if m.cfg.Temperature != nil {
		p.Temperature = param.NewOpt(*m.cfg.Temperature)
	}
	switch {
	case m.cfg.ThinkingBudget > 0:
		p.Thinking = anthropic.ThinkingConfigParamOfEnabled(m.cfg.ThinkingBudget)
	case m.cfg.AdaptiveThinking:
		p.Thinking = anthropic.ThinkingConfigParamUnion{OfAdaptive: &anthropic.ThinkingConfigAdaptiveParam{}}
	}
	return p, nil
}

// conversation maps the system prompt and the history. The API takes
// system text only in its system parameter, so the agent's prompt comes
// first there, followed by the history's system messages in order, each
// its own text block; they lose their place among the other messages.
//
// Tool results become tool_result blocks of a user message. Messages of
// the same role that end up next to each other (a run of tool results and
// the user message after them, for instance) are merged into one, so that
// roles alternate, with tool_result blocks first as the API requires.
// Messages left with nothing to send are skipped.
func conversation(prompt string, history []agents.Message) ([]anthropic.TextBlockParam, []anthropic.MessageParam) {
	var system []anthropic.TextBlockParam
	if prompt != "" {
		system = append(system, anthropic.TextBlockParam{Text: prompt})
	}
	var msgs []anthropic.MessageParam
	add := func(role anthropic.MessageParamRole, blocks []anthropic.ContentBlockParamUnion) {
		if len(blocks) == 0 {
			return
		}
		if n := len(msgs); n > 0 && msgs[n-1].Role == role {
			msgs[n-1].Content = append(msgs[n-1].Content, blocks...)
			return
		}
		msgs = append(msgs, anthropic.MessageParam{Role: role, Content: blocks})
	}
	for _, m := range history {
		switch m.Role {
		case aap.RoleSystem:
			if text := m.Content.PlainText(); text != "" {
				system = append(system, anthropic.TextBlockParam{Text: text})
			}
		case aap.RoleUser:
			add(anthropic.MessageParamRoleUser, userBlocks(m.Content))
		case aap.RoleAssistant:
			add(anthropic.MessageParamRoleAssistant, assistantBlocks(m))
		case aap.RoleTool:
			add(anthropic.MessageParamRoleUser, []anthropic.ContentBlockParamUnion{toolResult(m.Message)})
		}
	}
	for i := range msgs {
		if msgs[i].Role == anthropic.MessageParamRoleUser {
			slices.SortStableFunc(msgs[i].Content, func(a, b anthropic.ContentBlockParamUnion) int {
				return toolResultRank(a) - toolResultRank(b)
			})
		}
	}
	return system, msgs
}

func toolResultRank(b anthropic.ContentBlockParamUnion) int {
	if b.OfToolResult != nil {
		return 0
	}
	return 1
}

// userBlocks maps a user message's text and image blocks; empty text is
// dropped (the API rejects it).
func userBlocks(c aap.Content) []anthropic.ContentBlockParamUnion {
	var out []anthropic.ContentBlockParamUnion
	for _, b := range c.AsBlocks() {
		switch b.Type {
		case aap.BlockText:
			if b.Text != "" {
				out = append(out, anthropic.NewTextBlock(b.Text))
			}
		case aap.BlockImage:
			img, placeholder := image(b.URL)
			if img != nil {
				out = append(out, anthropic.ContentBlockParamUnion{OfImage: img})
			} else {
				out = append(out, anthropic.NewTextBlock(placeholder))
			}
		}
	}
	return out
}

// toolResult maps a tool message: its string content or its text and
// image blocks.
func toolResult(m aap.Message) anthropic.ContentBlockParamUnion {
	r := &anthropic.ToolResultBlockParam{ToolUseID: m.ToolCallID}
	text := func(s string) {
		if s != "" {
			r.Content = append(r.Content, anthropic.ToolResultBlockParamContentUnion{OfText: &anthropic.TextBlockParam{Text: s}})
		}
	}
	for _, b := range m.Content.AsBlocks() {
		switch b.Type {
		case aap.BlockText:
			text(b.Text)
		case aap.BlockImage:
			img, placeholder := image(b.URL)
			if img != nil {
				r.Content = append(r.Content, anthropic.ToolResultBlockParamContentUnion{OfImage: img})
			} else {
				text(placeholder)
			}
		}
	}
	return anthropic.ContentBlockParamUnion{OfToolResult: r}
}

// mediaTypes are the image types the API accepts, by the names data: URIs
// use for them.
var mediaTypes = map[string]anthropic.Base64ImageSourceMediaType{
	"image/jpeg": anthropic.Base64ImageSourceMediaTypeImageJPEG,
	"image/jpg":  anthropic.Base64ImageSourceMediaTypeImageJPEG,
	"image/png":  anthropic.Base64ImageSourceMediaTypeImagePNG,
	"image/gif":  anthropic.Base64ImageSourceMediaTypeImageGIF,
	"image/webp": anthropic.Base64ImageSourceMediaTypeImageWebP,
}

// image maps an AAP image URL: https:// to a URL source, a base64 data:
// URI to a base64 source. An image the API cannot take is replaced by a
// text placeholder saying so, rather than failing every later turn of the
// session over one message of its history.
func image(url string) (*anthropic.ImageBlockParam, string) {
	// Schemes are case-insensitive (RFC 3986), and so is ";base64".
	switch scheme, _, _ := strings.Cut(url, ":"); {
	case strings.EqualFold(scheme, "https") && strings.HasPrefix(url[len(scheme):], "://"):
		return &anthropic.ImageBlockParam{Source: anthropic.ImageBlockParamSourceUnion{
			OfURL: &anthropic.URLImageSourceParam{URL: url},
		}}, ""
	case strings.EqualFold(scheme, "data"):
		meta, data, ok := strings.Cut(url[len("data:"):], ",")
		isBase64 := len(meta) >= len(";base64") && strings.EqualFold(meta[len(meta)-len(";base64"):], ";base64")
		mediaType := meta
		if isBase64 {
			mediaType = meta[:len(meta)-len(";base64")]
		}
		// Parameters (";charset=…") are not part of the media type.
		mediaType, _, _ = strings.Cut(mediaType, ";")
		mt, known := mediaTypes[strings.ToLower(mediaType)]
		switch {
		case !ok || !isBase64:
			return nil, "[image omitted: only base64 data: URIs are supported]"
		case !known:
			return nil, fmt.Sprintf("[image omitted: %s is not a supported image type (jpeg, png, gif, webp)]", mediaType)
		}
		return &anthropic.ImageBlockParam{Source: anthropic.ImageBlockParamSourceUnion{
			OfBase64: &anthropic.Base64ImageSourceParam{MediaType: mt, Data: data},
		}}, ""
	}
	return nil, "[image omitted: only https:// and data: image URLs are supported]"
}

// toolParams maps tool specs to custom tool definitions. The spec's
// parameters schema becomes input_schema: its properties and required
// list, and any other keywords ($defs, additionalProperties, …) as they
// are. The type is always "object", as the API requires.
func toolParams(specs []aap.ToolSpec) ([]anthropic.ToolUnionParam, error) {
	var tools []anthropic.ToolUnionParam
	for _, s := range specs {
		schema := anthropic.ToolInputSchemaParam{}
		if len(s.Parameters) > 0 {
			var fields map[string]json.RawMessage
			if err := json.Unmarshal(s.Parameters, &fields); err != nil {
				return nil, fmt.Errorf("tool %q: parameters must be a JSON Schema object: %w", s.Name, err)
			}
			for k, v := range fields {
				switch k {
				case "type":
				case "properties":
					schema.Properties = v
				case "required":
					if err := json.Unmarshal(v, &schema.Required); err != nil {
						return nil, fmt.Errorf("tool %q: parameters.required must be a list of names: %w", s.Name, err)
					}
				default:
					if schema.ExtraFields == nil {
						schema.ExtraFields = map[string]any{}
					}
					schema.ExtraFields[k] = v
				}
			}
		}
		if schema.Properties == nil {
			// Also keeps the schema from being omitted as a zero value:
			// input_schema is required.
			schema.Properties = json.RawMessage(`{}`)
		}
		tool := anthropic.ToolParam{Name: s.Name, InputSchema: schema}
		if s.Description != "" {
			tool.Description = param.NewOpt(s.Description)
		}
		tools = append(tools, anthropic.ToolUnionParam{OfTool: &tool})
	}
	return tools, nil
}
