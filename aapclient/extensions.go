package aapclient

import (
	"context"
	"fmt"
	"iter"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/aapd/aapd/aap"
)

// The methods of this file call aapd's extension endpoints
// (docs/durability.md, docs/compaction.md). Other AAP servers answer them
// 404. Their types mirror aapd's JSON; they are declared here so that the
// client needs nothing of the server.

// Turn statuses of TurnInfo.Status.
const (
	// TurnQueued is a background turn waiting for a worker (background.go).
	TurnQueued      = "queued"
	TurnRunning     = "running"
	TurnCompleted   = "completed"
	TurnFailed      = "failed"
	TurnInterrupted = "interrupted"
	TurnCancelled   = "cancelled"
)

// TurnInfo is a turn's record.
type TurnInfo struct {
	TurnID    string         `json:"turnId"`
	SessionID string         `json:"sessionId"`
	Status    string         `json:"status"`
	Stream    aap.StreamMode `json:"stream"`
	// StopReason is set once the turn has ended.
	StopReason aap.StopReason `json:"stopReason,omitempty"`
	// Error says why a turn that stopped with "error" failed.
	Error          *aap.TurnError `json:"error,omitempty"`
	Usage          Usage          `json:"usage"`
	IdempotencyKey string         `json:"idempotencyKey,omitempty"`
	CreatedAt      time.Time      `json:"createdAt"`
	// UpdatedAt is when the record last changed: its end, or its start.
	UpdatedAt  time.Time  `json:"updatedAt"`
	FinishedAt *time.Time `json:"finishedAt,omitempty"`
	DurationMs *int64     `json:"durationMs,omitempty"`
	// Background is true for a turn started by StartBackgroundTurn.
	Background bool `json:"background,omitempty"`
	// Attempts counts the server's workers that began the turn: 0 while it
	// is queued, more than 1 once another replica resumed it.
	Attempts int `json:"attempts"`
}

// Ended reports whether the turn has ended (neither queued nor running).
func (t TurnInfo) Ended() bool { return t.Status != TurnQueued && t.Status != TurnRunning }

// Usage counts a turn's model tokens.
type Usage struct {
	InputTokens  int64 `json:"inputTokens"`
	OutputTokens int64 `json:"outputTokens"`
}

// TurnList is a page of a session's turns, newest first.
type TurnList struct {
	Turns []TurnInfo `json:"turns"`
	Next  string     `json:"next,omitempty"`
}

// ListTurns is GET /sessions/:id/turns (aapd): one page of the session's
// turns, newest first.
func (c *Client) ListTurns(ctx context.Context, sessionID string, opts ListOptions) (TurnList, error) {
	var out TurnList
	if opts.Owner != "" {
		return out, fmt.Errorf("aap: GET %s: ListOptions.Owner selects sessions, not turns", sessionPath(sessionID, "turns"))
	}
	err := c.getJSON(ctx, sessionPath(sessionID, "turns"), opts.query(), &out)
	return out, err
}

// Turns iterates over every turn of the session, newest first, page after
// page (aapd).
func (c *Client) Turns(ctx context.Context, sessionID string, opts ListOptions) iter.Seq2[TurnInfo, error] {
	return pages(ctx, opts, func(ctx context.Context, o ListOptions) ([]TurnInfo, string, error) {
		page, err := c.ListTurns(ctx, sessionID, o)
		return page.Turns, page.Next, err
	})
}

// GetTurn is GET /sessions/:id/turns/:turnId (aapd).
func (c *Client) GetTurn(ctx context.Context, sessionID, turnID string) (TurnInfo, error) {
	var out TurnInfo
	err := c.getJSON(ctx, sessionPath(sessionID, "turns", turnID), nil, &out)
	return out, err
}

// CancelTurn is POST /sessions/:id/turns/:turnId/cancel (aapd): stop the
// turn, keeping what it produced. It returns the turn's record; stopping is
// true when the server answered 202 because the turn had not stopped yet.
// Cancelling a turn that has ended changes nothing.
func (c *Client) CancelTurn(ctx context.Context, sessionID, turnID string) (info TurnInfo, stopping bool, err error) {
	// Cancelling twice is harmless, so the request may be sent again.
	res, err := c.callJSON(ctx, request{method: http.MethodPost, path: sessionPath(sessionID, "turns", turnID, "cancel"),
		resend: true}, &info)
	if err != nil {
		return info, false, err
	}
	return info, res.StatusCode == http.StatusAccepted, nil
}

// Compaction is the record of one compaction of a session's history.
type Compaction struct {
	ID        int64     `json:"id"`
	CreatedAt time.Time `json:"createdAt"`
	// Trigger is "auto" (after a turn, by the agent's policy) or "manual".
	Trigger  string `json:"trigger"`
	Strategy string `json:"strategy"`
	// FromSeq and ToSeq bound the full-history messages the compaction
	// dropped, pruned or summarized.
	FromSeq        int64 `json:"fromSeq"`
	ToSeq          int64 `json:"toSeq"`
	MessagesBefore int   `json:"messagesBefore"`
	MessagesAfter  int   `json:"messagesAfter"`
	TokensBefore   int64 `json:"tokensBefore"`
	TokensAfter    int64 `json:"tokensAfter"`
}

// CompactResult is the answer to Compact.
type CompactResult struct {
	Compacted bool `json:"compacted"`
	// Compaction is the record of what was done, when Compacted.
	Compaction *Compaction `json:"compaction,omitempty"`
	// Tokens and Reason say, when nothing was done, how big the history is
	// and why it stays as it is.
	Tokens int    `json:"tokens,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// Compact is POST /sessions/:id/compact (aapd): compact the session's
// history now with its agent's policy. A turn running on the session makes
// it a 409, retried per the client's policy.
func (c *Client) Compact(ctx context.Context, sessionID string) (CompactResult, error) {
	var out CompactResult
	_, err := c.callJSON(ctx, request{method: http.MethodPost, path: sessionPath(sessionID, "compact")}, &out)
	return out, err
}

// Compactions is GET /sessions/:id/compactions (aapd): the session's
// latest compactions, newest first, at most limit (the server's default
// when zero).
func (c *Client) Compactions(ctx context.Context, sessionID string, limit int) ([]Compaction, error) {
	var out struct {
		Compactions []Compaction `json:"compactions"`
	}
	q := url.Values{}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	err := c.getJSON(ctx, sessionPath(sessionID, "compactions"), q, &out)
	return out.Compactions, err
}
