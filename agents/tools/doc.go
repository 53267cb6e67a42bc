// Package tools holds aapd's built-in server tools: small, safe tools that
// are useful on any deployment. None of them runs a shell or reaches the
// network.
package tools

import (
	"context"
	"encoding/json"

	"github.com/aapd/aapd/aap"
)

// Func is a server tool made of a spec and a function.
type Func struct {
	ToolSpec aap.ToolSpec
	Fn       func(ctx context.Context, input json.RawMessage) (aap.Content, error)
}

// Spec returns the tool's declaration.
func (f Func) Spec() aap.ToolSpec { return f.ToolSpec }

// Call runs the tool.
func (f Func) Call(ctx context.Context, input json.RawMessage) (aap.Content, error) {
	return f.Fn(ctx, input)
}

// decodeInput reads a tool's input object into v, with an error the model
// can act on.
func decodeInput(input json.RawMessage, v any) error {
	if len(input) == 0 {
		input = json.RawMessage(`{}`)
	}
	if err := json.Unmarshal(input, v); err != nil {
		return &inputError{err}
	}
	return nil
}

type inputError struct{ err error }

func (e *inputError) Error() string { return "invalid input: " + e.err.Error() }
