package agents

import (
	"context"
	"encoding/json"

	"github.com/aapd/aapd/aap"
)

// Tool is a server-side tool: one the agent runs itself, inline when the
// session trusts it and after the client's permission otherwise.
type Tool interface {
	// Spec is the tool's declaration, as shown in GET /meta.
	Spec() aap.ToolSpec
	// Call runs the tool. An error is reported to the model as the tool's
	// result ("Error: ..."), so it should be written for the model to read;
	// the turn itself goes on.
	Call(ctx context.Context, input json.RawMessage) (aap.Content, error)
}
