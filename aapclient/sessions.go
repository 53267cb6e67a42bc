package aapclient

import (
	"context"
	"fmt"
	"iter"
	"net/http"
	"net/url"
	"strconv"

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

// ListOptions selects a page of a list.
type ListOptions struct {
	// After is the Next cursor of the previous page; empty for the first.
	After string
	// Limit is the page size (an aapd extension: 1–100, the server's
	// default when zero). Servers that do not know it ignore it.
	Limit int
}

func (o ListOptions) query() url.Values {
	q := url.Values{}
	if o.After != "" {
		q.Set("after", o.After)
	}
	if o.Limit > 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	return q
}

// ListSessions is GET /sessions: one page of sessions.
func (c *Client) ListSessions(ctx context.Context, opts ListOptions) (aap.SessionList, error) {
	var out aap.SessionList
	err := c.getJSON(ctx, "/sessions", opts.query(), &out)
	return out, err
}

// Sessions iterates over every session, page after page from opts.After,
// fetching each page when the previous one has been read. It stops at the
// first error, which it yields.
func (c *Client) Sessions(ctx context.Context, opts ListOptions) iter.Seq2[aap.SessionInfo, error] {
	return pages(ctx, opts, func(ctx context.Context, o ListOptions) ([]aap.SessionInfo, string, error) {
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

// GetSession is GET /sessions/:id.
func (c *Client) GetSession(ctx context.Context, sessionID string) (aap.SessionInfo, error) {
	var out aap.SessionInfo
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
