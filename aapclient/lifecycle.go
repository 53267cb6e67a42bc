package aapclient

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
)

// The methods of this file call aapd's fork, export and import
// (docs/lifecycle.md). Other AAP servers answer them 404.

// Problem types of a fork's point that sending again does not resolve
// (Error.Temporary is false for them).
const (
	ProblemToolCallsOpen        = "https://aapd.dev/problems/tool-calls-open"
	ProblemCompactedHistoryGone = "https://aapd.dev/problems/compacted-history-gone"
	ProblemHistoryTrimmed       = "https://aapd.dev/problems/history-trimmed"
	ProblemInvalidDocument      = "https://aapd.dev/problems/invalid-document"
)

// ForkedFrom names the session a fork was made from, and its point: how
// many of that session's full-history messages it took.
type ForkedFrom struct {
	SessionID string `json:"sessionId"`
	At        struct {
		Message int64 `json:"message"`
	} `json:"at"`
}

// ForkRequest says where Fork cuts its session and whose the fork is.
type ForkRequest struct {
	// At is the point; nil forks the whole session (AtTurn, AtMessage).
	At *ForkAt `json:"at,omitempty"`
	// Owner, for a client with an API key, is the end user (a token's sub)
	// the fork belongs to; empty for none. A client with an end user's
	// token forks into its own sessions.
	Owner string `json:"-"`
}

// ForkAt is a fork's point: the end of a turn, or the first Message
// full-history messages.
type ForkAt struct {
	Turn    string `json:"turn,omitempty"`
	Message *int64 `json:"message,omitempty"`
}

// AtTurn is the session as it stood at the end of a turn.
func AtTurn(turnID string) *ForkAt { return &ForkAt{Turn: turnID} }

// AtMessage is the session's first n full-history messages.
func AtMessage(n int64) *ForkAt { return &ForkAt{Message: &n} }

// Fork is POST /sessions/:id/fork (aapd): a new session from this one up
// to a point, and its record. A point that takes part of a running turn is
// a 409 retried per the client's policy; a point where tool calls are open
// is a 409 returned at once (ProblemToolCallsOpen).
func (c *Client) Fork(ctx context.Context, sessionID string, req ForkRequest) (Session, error) {
	path := sessionPath(sessionID, "fork")
	body, err := marshal(http.MethodPost, path, req)
	if err != nil {
		return Session{}, err
	}
	var out Session
	_, err = c.callJSON(ctx, request{method: http.MethodPost, path: path, query: ownerQuery(req.Owner), body: body}, &out)
	return out, err
}

// Export is GET /sessions/:id/export (aapd): it writes the session's
// document (JSON Lines) to w as it arrives, and returns its size. A
// document cut short (the connection broke) has no trailer; import refuses
// it.
func (c *Client) Export(ctx context.Context, sessionID string, w io.Writer) (int64, error) {
	path := sessionPath(sessionID, "export")
	res, _, err := c.do(ctx, request{method: http.MethodGet, path: path, resend: true, accept: "application/x-ndjson"}, true)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	n, err := io.Copy(w, res.Body)
	if err != nil {
		return n, fmt.Errorf("aap: GET %s: read the document: %w", path, err)
	}
	return n, nil
}

// Import is POST /sessions/import (aapd): a new session from a document
// read from r as it is sent, and its record. owner, for a client with an
// API key, is the end user the session belongs to ("" for none). It is
// sent once: r cannot be read again. A document the server refuses is an
// *Error whose Line and Rule say why (ProblemInvalidDocument).
func (c *Client) Import(ctx context.Context, r io.Reader, owner string) (Session, error) {
	var out Session
	_, err := c.callJSON(ctx, request{method: http.MethodPost, path: "/sessions/import", query: ownerQuery(owner),
		stream: r, contentType: "application/x-ndjson"}, &out)
	return out, err
}

func ownerQuery(owner string) url.Values {
	if owner == "" {
		return nil
	}
	return url.Values{"owner": {owner}}
}
