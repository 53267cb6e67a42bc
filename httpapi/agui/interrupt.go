package agui

import (
	"encoding/json"
	"fmt"

	"github.com/aapd/aapd/aap"
)

// An untrusted server tool call waits for the client's permission (AAP's
// tool_permission). AG-UI's word for a run that waits on its client is an
// interrupt: the run finishes with outcome "interrupt", one interrupt per
// such call, and the next run answers each in its resume entries.

// InterruptReason is the reason of the interrupts aapd raises.
const InterruptReason = "tool_permission"

// Interrupt is one thing a run waits for (@ag-ui/core's Interrupt).
type Interrupt struct {
	ID             string          `json:"id"`
	Reason         string          `json:"reason"`
	Message        string          `json:"message,omitempty"`
	ToolCallID     string          `json:"toolCallId,omitempty"`
	ResponseSchema json.RawMessage `json:"responseSchema,omitempty"`
}

// permissionSchema is what a resume entry's payload may say: whether the
// call is granted (by default it is) and why not.
var permissionSchema = json.RawMessage(`{"type":"object","properties":{"granted":{"type":"boolean"},"reason":{"type":"string"}}}`)

// permissionInterrupt is the interrupt of a server tool call awaiting
// permission: its id is the call's.
func permissionInterrupt(c call) Interrupt {
	return Interrupt{
		ID: c.id, Reason: InterruptReason, ToolCallID: c.id, ResponseSchema: permissionSchema,
		Message: fmt.Sprintf("The agent asks to run the server tool %q. Resolve with {\"granted\": true} to allow it, or cancel to deny it.", c.name),
	}
}

// permissions turns resume entries into AAP tool_permission messages: a
// cancelled interrupt denies the call; a resolved one grants it unless its
// payload says {"granted": false}, with its "reason" if any.
func permissions(resume []ResumeEntry) ([]aap.Message, error) {
	var out []aap.Message
	for i, e := range resume {
		m := aap.Message{Role: aap.RoleToolPermission, ToolCallID: e.InterruptID, Granted: e.Status == "resolved"}
		if len(e.Payload) > 0 && string(e.Payload) != "null" {
			var p struct {
				Granted *bool   `json:"granted"`
				Reason  *string `json:"reason"`
			}
			if err := json.Unmarshal(e.Payload, &p); err != nil {
				return nil, &aap.Error{Field: fmt.Sprintf("resume[%d].payload", i), Msg: `must be an object {"granted": boolean, "reason": string}`}
			}
			if p.Granted != nil && e.Status == "resolved" {
				m.Granted = *p.Granted
			}
			if p.Reason != nil {
				m.Reason = *p.Reason
			}
		}
		out = append(out, m)
	}
	return out, nil
}
