package aapclient

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/aapd/aapd/aap"
)

// Meta is GET /meta: the protocol version and the server's agents.
func (c *Client) Meta(ctx context.Context) (aap.Meta, error) {
	var out aap.Meta
	err := c.getJSON(ctx, "/meta", nil, &out)
	return out, err
}

// CreateSession is POST /sessions. The request carries an Idempotency-Key
// (WithIdempotencyKey, or a fresh one), so the client may retry it after a
// lost answer without creating a second session.
func (c *Client) CreateSession(ctx context.Context, req aap.CreateSessionRequest, opts ...CallOption) (aap.CreateSessionResponse, error) {
	var out aap.CreateSessionResponse
	body, err := marshal(http.MethodPost, "/sessions", req)
	if err != nil {
		return out, err
	}
	call := callOptions(opts)
	_, err = c.callJSON(ctx, request{method: http.MethodPost, path: "/sessions", body: body,
		header: call.idempotencyHeader(), resend: true}, &out)
	return out, err
}

// Session is a session as GET /sessions/:id and GET /sessions show it: its
// AAP shape, with the members aapd adds to it (empty on other servers).
type Session struct {
	aap.SessionInfo
	// Owner is the sub of the end-user token that created the session
	// (aapd, docs/tenancy.md); empty for a session created with an API key.
	Owner string `json:"owner,omitempty"`
	// CreatedAt and UpdatedAt are aapd's dashboard fields (docs/protocols.md);
	// nil from a server that does not send them.
	CreatedAt *time.Time `json:"createdAt,omitempty"`
	UpdatedAt *time.Time `json:"updatedAt,omitempty"`
	// Status is aapd's: running, requires_action or idle.
	Status string `json:"status,omitempty"`
	// Pending are the tool calls the session waits on the client for
	// (aapd, docs/protocols.md): what a client that lost its state must
	// answer.
	Pending []PendingCall `json:"pending,omitempty"`
	// ForkedFrom names the session this one was forked from (aapd,
	// docs/lifecycle.md); nil for a session that is not a fork.
	ForkedFrom *ForkedFrom `json:"forkedFrom,omitempty"`
}

// PendingCall is a tool call a session waits on the client for.
type PendingCall struct {
	ToolCallID string          `json:"toolCallId"`
	Name       string          `json:"name"`
	Input      json.RawMessage `json:"input"`
	// Awaiting is "result" (a client tool's result) or "permission" (a
	// tool_permission for an untrusted server tool).
	Awaiting string `json:"awaiting"`
}

// SessionList is a page of sessions, newest first.
type SessionList struct {
	Sessions []Session `json:"sessions"`
	// Next is the cursor of the next page (ListOptions.After); empty on the
	// last page.
	Next string `json:"next,omitempty"`
}

// ListOptions selects a page of a list.
type ListOptions struct {
	// After is the Next cursor of the previous page; empty for the first.
	After string
	// Limit is the page size (an aapd extension: 1–100, the server's
	// default when zero). Servers that do not know it ignore it.
	Limit int
	// Owner lists only the sessions of one end user, a token's sub (an
	// aapd extension of GET /sessions, docs/tenancy.md): the way an API
	// key sees one user's sessions. Other lists refuse it.
	Owner string
}

func (o ListOptions) query() url.Values {
	q := url.Values{}
	if o.After != "" {
		q.Set("after", o.After)
	}
	if o.Limit > 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	if o.Owner != "" {
		q.Set("owner", o.Owner)
	}
	return q
}

// ListSessions is GET /sessions: one page of sessions.
func (c *Client) ListSessions(ctx context.Context, opts ListOptions) (SessionList, error) {
	var out SessionList
	err := c.getJSON(ctx, "/sessions", opts.query(), &out)
	return out, err
}

// Sessions iterates over every session, page after page from opts.After,
// fetching each page when the previous one has been read. It stops at the
// first error, which it yields.
func (c *Client) Sessions(ctx context.Context, opts ListOptions) iter.Seq2[Session, error] {
	return pages(ctx, opts, func(ctx context.Context, o ListOptions) ([]Session, string, error) {
		page, err := c.ListSessions(ctx, o)
		return page.Sessions, page.Next, err
	})
}

// pages iterates over the items of a cursor-paged list.
func pages[T any](ctx context.Context, opts ListOptions, list func(context.Context, ListOptions) ([]T, string, error)) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		seen := map[string]bool{}
		for {
			items, next, err := list(ctx, opts)
			if err != nil {
				var zero T
				yield(zero, err)
				return
			}
			for _, it := range items {
				if !yield(it, nil) {
					return
				}
			}
			if next == "" {
				return
			}
			// A server that hands back a cursor it gave before would loop
			// forever.
			if seen[next] {
				var zero T
				yield(zero, fmt.Errorf("aap: list: the server returned cursor %q twice", next))
				return
			}
			seen[next] = true
			opts.After = next
		}
	}
}

// GetSession is GET /sessions/:id. Secret option values read "***".
func (c *Client) GetSession(ctx context.Context, sessionID string) (Session, error) {
	var out Session
	err := c.getJSON(ctx, sessionPath(sessionID), nil, &out)
	return out, err
}

// DeleteSession is DELETE /sessions/:id. A session that does not exist is
// an *Error with status 404.
func (c *Client) DeleteSession(ctx context.Context, sessionID string) error {
	_, _, err := c.do(ctx, request{method: http.MethodDelete, path: sessionPath(sessionID)}, false)
	return err
}

// History is GET /sessions/:id/history?type=: the session's full or
// compacted history.
func (c *Client) History(ctx context.Context, sessionID string, typ aap.HistoryType) ([]aap.Message, error) {
	var out aap.HistoryResponse
	if err := c.getJSON(ctx, sessionPath(sessionID, "history"), url.Values{"type": {string(typ)}}, &out); err != nil {
		return nil, err
	}
	msgs, ok := out.History[typ]
	if !ok {
		return nil, fmt.Errorf("aap: GET %s: the response has no %q history", sessionPath(sessionID, "history"), typ)
	}
	return msgs, nil
}
