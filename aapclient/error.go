package aapclient

import (
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Error is a server's answer to a request it did not serve: the status and,
// when the body was application/problem+json (RFC 9457), its members. aapd
// documents its problem types in docs/errors.md; match on Type, not Detail.
type Error struct {
	// Method and Path say which request failed.
	Method string
	Path   string

	Status int
	Type   string // a URI naming the kind of problem; "about:blank" when the body had none
	Title  string
	Detail string
	// Instance, RequestID, Field and TurnID are members aapd adds: the
	// request's path and id (also in its logs), the JSON path of the
	// offending value of a bad request, and the turn a 409 conflicts with.
	Instance  string
	RequestID string
	Field     string
	TurnID    string
	// Line and Rule are, for an import refused, the document's line and
	// the rule it breaks (docs/lifecycle.md).
	Line int
	Rule string

	// RetryAfter is the server's Retry-After, zero when it sent none.
	RetryAfter time.Duration
	// Body is the response body when it was not a problem document.
	Body string
}

// Error describes the failure in one line.
func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "aap: %s %s: %d", e.Method, e.Path, e.Status)
	if e.Title != "" {
		b.WriteString(" " + e.Title)
	} else {
		b.WriteString(" " + http.StatusText(e.Status))
	}
	switch {
	case e.Detail != "":
		b.WriteString(": " + e.Detail)
	case e.Body != "":
		b.WriteString(": " + e.Body)
	}
	return b.String()
}

// Temporary reports whether the request may succeed if sent again later:
// the server refused it without acting on it (409 a turn is running, 429,
// 503). Retries of these are what the client's RetryPolicy does. The
// conflicts of a fork's point that waiting does not resolve (aapd's
// tool-calls-open, compacted-history-gone and history-trimmed) are not temporary.
func (e *Error) Temporary() bool {
	switch e.Status {
	case http.StatusConflict:
		return e.Type != ProblemToolCallsOpen && e.Type != ProblemCompactedHistoryGone && e.Type != ProblemHistoryTrimmed
	case http.StatusTooManyRequests, http.StatusServiceUnavailable:
		return true
	}
	return false
}

// maxErrorBody bounds how much of an error response is read.
const maxErrorBody = 64 << 10

// readError builds the Error of a response whose status is not a success,
// reading (and not closing) its body.
func readError(res *http.Response, method, path string, now time.Time) *Error {
	e := &Error{Method: method, Path: path, Status: res.StatusCode, Type: "about:blank",
		RetryAfter: parseRetryAfter(res.Header.Get("Retry-After"), now), RequestID: res.Header.Get("X-Request-Id")}
	body, _ := io.ReadAll(io.LimitReader(res.Body, maxErrorBody))
	if mt, _, _ := mime.ParseMediaType(res.Header.Get("Content-Type")); mt == "application/problem+json" || mt == "application/json" {
		var p struct {
			Type      string `json:"type"`
			Title     string `json:"title"`
			Status    int    `json:"status"`
			Detail    string `json:"detail"`
			Instance  string `json:"instance"`
			RequestID string `json:"requestId"`
			Field     string `json:"field"`
			TurnID    string `json:"turnId"`
			Line      int    `json:"line"`
			Rule      string `json:"rule"`
		}
		if json.Unmarshal(body, &p) == nil && (p.Type != "" || p.Title != "" || p.Detail != "") {
			if p.Type != "" {
				e.Type = p.Type
			}
			e.Title, e.Detail, e.Instance = p.Title, p.Detail, p.Instance
			e.Field, e.TurnID, e.Line, e.Rule = p.Field, p.TurnID, p.Line, p.Rule
			if p.RequestID != "" {
				e.RequestID = p.RequestID
			}
			return e
		}
	}
	e.Body = strings.TrimSpace(string(body))
	return e
}

// parseRetryAfter reads a Retry-After value: delay seconds or an HTTP date
// (RFC 9110 §10.2.3). It returns zero when there is none or it is malformed.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n <= 0 {
			return 0
		}
		return time.Duration(min(n, 24*3600)) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return d
		}
	}
	return 0
}
