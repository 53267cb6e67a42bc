// Package mcptest is an MCP server for tests: the same tools over stdio (see
// agents/mcp/testdata/mcpserver) or streamable HTTP (Handler).
package mcptest

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// PNG is the image the "image" tool returns (1×1 pixel).
var PNG = []byte{0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'}

// NewServer returns the test server. Its tools:
//
//	add {a, b}   the sum, as text
//	fail         an isError result "it failed"
//	image        an image (PNG)
//	slow {ms}    waits ms milliseconds (honouring cancellation), then "done"
//	crash        exits the process at once
//	whoami       the X-Test header of the HTTP request that called it
func NewServer() *sdk.Server {
	s := sdk.NewServer(&sdk.Implementation{Name: "aapd-test", Version: "1"}, nil)
	object := func(props string) json.RawMessage {
		return json.RawMessage(`{"type":"object","properties":{` + props + `}}`)
	}
	text := func(t string) *sdk.CallToolResult {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: t}}}
	}
	s.AddTool(&sdk.Tool{Name: "add", Title: "Add", Description: "Adds two numbers.",
		InputSchema: object(`"a":{"type":"number"},"b":{"type":"number"}`)},
		func(_ context.Context, r *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			var in struct{ A, B float64 }
			_ = json.Unmarshal(r.Params.Arguments, &in)
			b, _ := json.Marshal(in.A + in.B)
			return text(string(b)), nil
		})
	s.AddTool(&sdk.Tool{Name: "fail", Description: "Always fails.", InputSchema: object(``)},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			r := text("it failed")
			r.IsError = true
			return r, nil
		})
	s.AddTool(&sdk.Tool{Name: "image", Description: "Returns an image.", InputSchema: object(``)},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.ImageContent{MIMEType: "image/png", Data: PNG}}}, nil
		})
	s.AddTool(&sdk.Tool{Name: "slow", Description: "Waits.", InputSchema: object(`"ms":{"type":"number"}`)},
		func(ctx context.Context, r *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			var in struct{ Ms int }
			_ = json.Unmarshal(r.Params.Arguments, &in)
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(time.Duration(in.Ms) * time.Millisecond):
			}
			return text("done"), nil
		})
	s.AddTool(&sdk.Tool{Name: "crash", Description: "Exits the server.", InputSchema: object(``)},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			os.Exit(3)
			return nil, nil
		})
	s.AddTool(&sdk.Tool{Name: "whoami", Description: "Echoes the X-Test header.", InputSchema: object(``)},
		func(_ context.Context, r *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			h := ""
			if r.Extra != nil && r.Extra.Header != nil {
				h = r.Extra.Header.Get("X-Test")
			}
			return text(h), nil
		})
	return s
}

// Handler serves the test server over streamable HTTP.
func Handler() http.Handler {
	s := NewServer()
	return sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, nil)
}
