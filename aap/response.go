package aap

// StopReason says why a turn ended.
type StopReason string

// Stop reasons.
const (
	StopEndTurn   StopReason = "end_turn"
	StopToolUse   StopReason = "tool_use"
	StopMaxTokens StopReason = "max_tokens"
	StopRefusal   StopReason = "refusal"
	StopError     StopReason = "error"
)

// SessionInfo is the body of GET /sessions/:id and an item of GET /sessions.
type SessionInfo struct {
	SessionID string      `json:"sessionId"`
	Agent     AgentConfig `json:"agent"`
	Tools     []ToolSpec  `json:"tools,omitempty"`
}

// CreateSessionResponse is the body of POST /sessions.
type CreateSessionResponse struct {
	SessionID string `json:"sessionId"`
}

// SessionList is the body of GET /sessions.
type SessionList struct {
	Sessions []SessionInfo `json:"sessions"`
	Next     string        `json:"next,omitempty"`
}

// TurnResponse is the body of POST /sessions/:id/turns with stream "none".
type TurnResponse struct {
	StopReason StopReason `json:"stopReason"`
	Messages   []Message  `json:"messages"`
	// Error says why a turn that stopped with "error" failed (extension).
	Error *TurnError `json:"error,omitempty"`
}

// HistoryResponse is the body of GET /sessions/:id/history.
type HistoryResponse struct {
	History map[HistoryType][]Message `json:"history"`
}

// SecretPlaceholder replaces a secret option's value on every read.
const SecretPlaceholder = "***"
