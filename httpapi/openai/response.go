package openai

import (
	"encoding/json"
	"time"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/agents"
	"github.com/aapd/aapd/store"
)

// Response is OpenAI's Response object.
type Response struct {
	ID                 string             `json:"id"`
	Object             string             `json:"object"`
	CreatedAt          int64              `json:"created_at"`
	Status             string             `json:"status"`
	CompletedAt        *int64             `json:"completed_at"`
	Error              *responseError     `json:"error"`
	IncompleteDetails  *incompleteDetails `json:"incomplete_details"`
	Instructions       *string            `json:"instructions"`
	MaxOutputTokens    *int64             `json:"max_output_tokens"`
	Model              string             `json:"model"`
	Output             []Item             `json:"output"`
	ParallelToolCalls  bool               `json:"parallel_tool_calls"`
	PreviousResponseID *string            `json:"previous_response_id"`
	Conversation       *conversationRef   `json:"conversation"`
	Temperature        *float64           `json:"temperature"`
	TopP               *float64           `json:"top_p"`
	ToolChoice         json.RawMessage    `json:"tool_choice"`
	Tools              []toolParam        `json:"tools"`
	Background         bool               `json:"background"`
	Store              bool               `json:"store"`
	Metadata           map[string]string  `json:"metadata"`
	Text               json.RawMessage    `json:"text"`
	Truncation         string             `json:"truncation"`
	Reasoning          json.RawMessage    `json:"reasoning"`
	Usage              *usage             `json:"usage"`
	User               *string            `json:"user"`
}

type responseError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

type incompleteDetails struct {
	Reason string `json:"reason"`
}

type conversationRef struct {
	ID string `json:"id"`
}

type usage struct {
	InputTokens         int64          `json:"input_tokens"`
	InputTokensDetails  map[string]int `json:"input_tokens_details"`
	OutputTokens        int64          `json:"output_tokens"`
	OutputTokensDetails map[string]int `json:"output_tokens_details"`
	TotalTokens         int64          `json:"total_tokens"`
}

// Response statuses.
const (
	statusQueued     = "queued"
	statusInProgress = "in_progress"
	statusCompleted  = "completed"
	statusIncomplete = "incomplete"
	statusFailed     = "failed"
	statusCancelled  = "cancelled"
)

// responseID names a turn: resp_<session hex><turn hex>, so that a
// response is found from its id alone.
func responseID(sessionID, turnID string) string { return "resp_" + hexOf(sessionID) + hexOf(turnID) }

// parseResponseID returns the session and turn a response id names.
func parseResponseID(id string) (sessionID, turnID string, ok bool) {
	const n = 32
	if len(id) != len("resp_")+2*n || id[:5] != "resp_" {
		return "", "", false
	}
	sessionID, turnID = "sess_"+id[5:5+n], "turn_"+id[5+n:]
	return sessionID, turnID, store.ValidID("sess_", sessionID) && store.ValidID("turn_", turnID)
}

// newResponse is the response object of a turn before its output, with
// what its request asked (asked, kept with the turn).
func newResponse(sessionID string, turn store.Turn, model string) *Response {
	resp := &Response{
		ID: responseID(sessionID, turn.ID), Object: "response", CreatedAt: turn.CreatedAt.Unix(), Status: statusInProgress,
		Model: model, Output: []Item{}, ParallelToolCalls: true, ToolChoice: json.RawMessage(`"auto"`), Tools: []toolParam{},
		Store: true, Metadata: map[string]string{}, Text: json.RawMessage(`{"format":{"type":"text"}}`),
		Truncation: "disabled", Reasoning: json.RawMessage(`{"effort":null,"summary":null}`), Background: turn.Background,
	}
	if v := turn.Labels[labelResponse]; v != "" {
		var a asked
		if json.Unmarshal([]byte(v), &a) == nil {
			a.apply(resp)
		}
	}
	return resp
}

// labelResponse is the label of a turn that keeps what its request asked
// (asked, as JSON), so that GET /responses/{id} returns it.
const labelResponse = "openai.response"

// asked is what a request set that its response object returns: kept
// with the turn (store.Turn.Labels), it makes a response read later the
// one answered at first.
type asked struct {
	Instructions       *string           `json:"instructions,omitempty"`
	MaxOutputTokens    *int64            `json:"max_output_tokens,omitempty"`
	Metadata           map[string]string `json:"metadata,omitempty"`
	Tools              []toolParam       `json:"tools,omitempty"`
	ToolChoice         json.RawMessage   `json:"tool_choice,omitempty"`
	ParallelToolCalls  *bool             `json:"parallel_tool_calls,omitempty"`
	PreviousResponseID string            `json:"previous_response_id,omitempty"`
	Conversation       string            `json:"conversation,omitempty"`
	NotStored          bool              `json:"not_stored,omitempty"`
	Temperature        *float64          `json:"temperature,omitempty"`
	TopP               *float64          `json:"top_p,omitempty"`
	Text               json.RawMessage   `json:"text,omitempty"`
	Truncation         string            `json:"truncation,omitempty"`
	Reasoning          json.RawMessage   `json:"reasoning,omitempty"`
	User               *string           `json:"user,omitempty"`
}

// apply sets what was asked on a response object.
func (a *asked) apply(resp *Response) {
	resp.Instructions, resp.MaxOutputTokens, resp.Store = a.Instructions, a.MaxOutputTokens, !a.NotStored
	resp.Temperature, resp.TopP, resp.User = a.Temperature, a.TopP, a.User
	if a.Metadata != nil {
		resp.Metadata = a.Metadata
	}
	if a.Tools != nil {
		resp.Tools = a.Tools
	}
	if len(a.ToolChoice) > 0 {
		resp.ToolChoice = a.ToolChoice
	}
	if a.ParallelToolCalls != nil {
		resp.ParallelToolCalls = *a.ParallelToolCalls
	}
	if a.PreviousResponseID != "" {
		resp.PreviousResponseID = &a.PreviousResponseID
	}
	if a.Conversation != "" {
		resp.Conversation = &conversationRef{ID: a.Conversation}
	}
	if len(a.Text) > 0 {
		resp.Text = a.Text
	}
	if a.Truncation != "" {
		resp.Truncation = a.Truncation
	}
	if len(a.Reasoning) > 0 {
		resp.Reasoning = a.Reasoning
	}
}

// finish sets how the turn ended: its status, error, usage and output.
func (resp *Response) finish(stop aap.StopReason, status store.TurnStatus, turnErr *aap.TurnError, u agents.Usage, output []Item) {
	now := time.Now().Unix()
	resp.CompletedAt = &now
	resp.Output = output
	if resp.Output == nil {
		resp.Output = []Item{}
	}
	resp.Usage = &usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, TotalTokens: u.InputTokens + u.OutputTokens,
		InputTokensDetails: map[string]int{"cached_tokens": 0}, OutputTokensDetails: map[string]int{"reasoning_tokens": 0}}
	switch {
	case status == store.TurnCancelled:
		resp.Status = statusCancelled
	case stop == aap.StopError || status == store.TurnFailed || status == store.TurnInterrupted:
		resp.Status = statusFailed
		resp.Error = &responseError{Code: "server_error", Message: "the turn failed"}
		if turnErr != nil {
			resp.Error.Message = turnErr.Message
			if turnErr.Type == aap.TurnErrorModel {
				resp.Error.Code = "model_error"
			}
		}
	case stop == aap.StopMaxTokens:
		resp.Status = statusIncomplete
		resp.IncompleteDetails = &incompleteDetails{Reason: "max_output_tokens"}
	default:
		resp.Status = statusCompleted
	}
}

// outputOf translates the messages a turn produced into its output items:
// a server tool's call with its result as an mcp_call, one the turn left
// waiting for permission (stop tool_use) as an mcp_approval_request.
func outputOf(sess store.Session, agent *agents.Agent, clientTools []aap.ToolSpec, produced []store.StoredMessage, stop aap.StopReason) []Item {
	s := sess
	s.ClientTools, s.Pending = clientTools, nil
	t := newTranslator(s, agent)
	t.see(produced)
	server := t.serverCalls(produced)
	if stop == aap.StopToolUse {
		for id := range server {
			if _, done := t.results[id]; !done {
				t.pending[id] = true
			}
		}
	}
	return t.items(produced, server)
}
