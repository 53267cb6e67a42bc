package mcp

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/agents"
)

// listTools turns the server's tools into agent tools: prefixed, filtered
// by Include, and skipped (with a warning) if their name is not one every
// model provider accepts.
func (s *Server) listTools(ctx context.Context, session *sdk.ClientSession) ([]agents.Tool, error) {
	var out []agents.Tool
	for t, err := range session.Tools(ctx, nil) {
		if err != nil {
			return nil, fmt.Errorf("mcp server %q: list tools: %w", s.cfg.Name, err)
		}
		if len(s.cfg.Include) > 0 && !slices.Contains(s.cfg.Include, t.Name) {
			continue
		}
		name := s.cfg.ToolPrefix + t.Name
		if !aap.ValidToolName(name) {
			slog.Warn("mcp: tool left out: its name is not valid for model providers", "server", s.cfg.Name, "tool", name)
			continue
		}
		params, err := json.Marshal(t.InputSchema)
		if err != nil || !strings.HasPrefix(string(params), "{") {
			params = json.RawMessage(`{"type":"object"}`)
		}
		title := t.Title
		if title == "" && t.Annotations != nil {
			title = t.Annotations.Title
		}
		out = append(out, &tool{server: s, remote: t.Name,
			spec: aap.ToolSpec{Name: name, Title: title, Description: t.Description, Parameters: params}})
	}
	for _, name := range s.cfg.Include {
		if !slices.ContainsFunc(out, func(t agents.Tool) bool { return t.(*tool).remote == name }) {
			return nil, fmt.Errorf("mcp server %q has no tool %q (listed in include)", s.cfg.Name, name)
		}
	}
	return out, nil
}

// tool is one tool of an MCP server.
type tool struct {
	server *Server
	remote string // the tool's name on the server
	spec   aap.ToolSpec
}

func (t *tool) Spec() aap.ToolSpec { return t.spec }

// MCPServer names the tool's server, for traces and metrics (kind="mcp").
func (t *tool) MCPServer() string { return t.server.cfg.Name }

// Call calls the tool. A result flagged isError is returned as an error, so
// the model reads "Error: ...".
func (t *tool) Call(ctx context.Context, input json.RawMessage) (aap.Content, error) {
	ctx, cancel := context.WithTimeout(ctx, t.server.cfg.Timeout)
	defer cancel()
	session, err := t.server.current(ctx)
	if err != nil {
		return aap.Content{}, err
	}
	var args map[string]any
	if len(input) > 0 {
		if err := json.Unmarshal(input, &args); err != nil {
			return aap.Content{}, fmt.Errorf("the input is not a JSON object: %v", err)
		}
	}
	res, err := session.CallTool(ctx, &sdk.CallToolParams{Name: t.remote, Arguments: args})
	if err != nil {
		if ctx.Err() != nil {
			return aap.Content{}, fmt.Errorf("the tool did not answer within %s", t.server.cfg.Timeout)
		}
		var rpcErr *jsonrpc.Error
		if errors.As(err, &rpcErr) {
			return aap.Content{}, err // the server answered: it is alive
		}
		// The connection failed (the process died, the endpoint went away):
		// the next call connects again. This one is not retried, as the
		// server may have run it.
		t.server.broken(session)
		return aap.Content{}, fmt.Errorf("the tool's server %q stopped: %v", t.server.cfg.Name, err)
	}
	content := convert(res.Content)
	if res.IsError {
		return aap.Content{}, errors.New(content.PlainText())
	}
	return content, nil
}

// convert turns MCP content into AAP content: text as text, images as data:
// URIs, anything else described in text. A single text block is a string.
func convert(in []sdk.Content) aap.Content {
	var blocks []aap.ContentBlock
	for _, c := range in {
		switch c := c.(type) {
		case *sdk.TextContent:
			blocks = append(blocks, aap.TextBlock(c.Text))
		case *sdk.ImageContent:
			blocks = append(blocks, aap.ContentBlock{Type: aap.BlockImage,
				URL: "data:" + c.MIMEType + ";base64," + base64.StdEncoding.EncodeToString(c.Data)})
		case *sdk.AudioContent:
			blocks = append(blocks, aap.TextBlock(fmt.Sprintf("[audio: %s, %d bytes]", c.MIMEType, len(c.Data))))
		case *sdk.ResourceLink:
			blocks = append(blocks, aap.TextBlock(fmt.Sprintf("[resource %s: %s]", c.Name, c.URI)))
		case *sdk.EmbeddedResource:
			if r := c.Resource; r != nil && r.Text != "" {
				blocks = append(blocks, aap.TextBlock(fmt.Sprintf("[resource %s]\n%s", r.URI, r.Text)))
			} else if r != nil {
				blocks = append(blocks, aap.TextBlock(fmt.Sprintf("[resource %s: %s, %d bytes]", r.URI, r.MIMEType, len(r.Blob))))
			}
		default:
			if b, err := json.Marshal(c); err == nil {
				blocks = append(blocks, aap.TextBlock(string(b)))
			}
		}
	}
	if len(blocks) == 1 && blocks[0].Type == aap.BlockText {
		return aap.TextContent(blocks[0].Text)
	}
	if len(blocks) == 0 {
		return aap.TextContent("")
	}
	return aap.BlockContent(blocks...)
}
