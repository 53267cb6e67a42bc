package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/aapclient"
)

// The suite's calls go through aapclient, the public Go client, wherever a
// test is about behaviour rather than the bytes on the wire: sessions,
// turns, streams (read with openTurn/streamTurn, followed with followTurn),
// listings, turn records, cancel, compaction. So every run of the suite
// exercises the client against the real server, and its traffic is checked
// against the OpenAPI document like the rest (checkedTransport). Raw
// requests (client.do, client.openStream) remain where the wire itself is
// under test, each with a comment saying so.

// api returns an aapclient client acting as c. It does not retry: a test
// asserts what the server answered to the one request.
func (c *client) api() *aapclient.Client {
	c.t.Helper()
	api, err := aapclient.New(c.base, aapclient.WithAPIKey(c.key),
		aapclient.WithHTTPClient(&http.Client{Transport: checkedTransport{t: c.t}}),
		aapclient.WithRetryPolicy(aapclient.RetryPolicy{MaxAttempts: 1}))
	if err != nil {
		c.t.Fatal(err)
	}
	return api
}

// checkedTransport checks every exchange against the OpenAPI document: a
// whole body at once, a stream's status and headers at once and its events
// as they are read (checkOpenAPIStream).
type checkedTransport struct{ t testing.TB }

func (ct checkedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	var sent []byte
	if req.Body != nil {
		b, err := io.ReadAll(req.Body)
		if err != nil {
			return nil, err
		}
		sent = b
		req.Body = io.NopCloser(bytes.NewReader(b))
	}
	res, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		return res, err
	}
	if isStream(res) {
		checkOpenAPIStream(ct.t, req, sent, res)
		return res, nil
	}
	body, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil {
		return nil, err
	}
	checkOpenAPI(ct.t, req, sent, res, body)
	res.Body = io.NopCloser(bytes.NewReader(body))
	return res, nil
}

// turnVia sends a stream "none" turn through aapclient; body is the
// request as JSON would write it.
func (c *client) turnVia(sid string, body any) aap.TurnResponse {
	c.t.Helper()
	return c.sendTurn(sid, body).TurnResponse
}

// sendTurn sends a stream "none" turn through aapclient and returns its
// result, turn id and replay mark included.
func (c *client) sendTurn(sid string, body any, opts ...aapclient.CallOption) *aapclient.TurnResult {
	c.t.Helper()
	res, err := c.api().SendTurn(context.Background(), sid, turnRequest(c.t, body), opts...)
	if err != nil {
		c.t.Fatalf("POST /sessions/%s/turns: %v", sid, err)
	}
	return res
}

// turnRequest reads body, a turn request as JSON would write it.
func turnRequest(t testing.TB, body any) aap.TurnRequest {
	t.Helper()
	var req aap.TurnRequest
	b, err := json.Marshal(body)
	if err == nil {
		err = json.Unmarshal(b, &req)
	}
	if err != nil {
		t.Fatalf("turn request %s: %v", b, err)
	}
	return req
}

// createSessionVia creates a session through aapclient; body is the
// request as JSON would write it.
func (c *client) createSessionVia(body any) aap.CreateSessionResponse {
	c.t.Helper()
	out, err := c.api().CreateSession(context.Background(), createRequest(c.t, body))
	if err != nil {
		c.t.Fatalf("POST /sessions: %v", err)
	}
	return out
}

// refusal fails the test unless err is the server's refusal with the
// status and, when slug is not empty, the problem type of that slug, with
// a title and a detail; it returns the refusal. (The OpenAPI check has
// already held the rest of it to the document: application/problem+json,
// its members, its headers.)
func refusal(t testing.TB, err error, status int, slug string) *aapclient.Error {
	t.Helper()
	var e *aapclient.Error
	if !errors.As(err, &e) {
		t.Fatalf("got %v, want the server's %d %s", err, status, slug)
	}
	if e.Status != status {
		t.Fatalf("%s %s: status %d, want %d (%s)", e.Method, e.Path, e.Status, status, e)
	}
	if slug != "" && e.Type != problemType(slug) {
		t.Fatalf("%s %s: problem type %s, want %s (%s)", e.Method, e.Path, e.Type, problemType(slug), e)
	}
	if e.Title == "" || e.Detail == "" {
		t.Errorf("%s %s: a problem without a title or a detail: %+v", e.Method, e.Path, e)
	}
	return e
}

// meta is GET /meta through aapclient.
func (c *client) meta() aap.Meta {
	c.t.Helper()
	m, err := c.api().Meta(context.Background())
	if err != nil {
		c.t.Fatalf("GET /meta: %v", err)
	}
	return m
}

// getSession is GET /sessions/:id through aapclient.
func (c *client) getSession(sid string) aapclient.Session {
	c.t.Helper()
	info, err := c.api().GetSession(context.Background(), sid)
	if err != nil {
		c.t.Fatalf("GET /sessions/%s: %v", sid, err)
	}
	return info
}

// listSessions is one page of GET /sessions through aapclient.
func (c *client) listSessions(opts aapclient.ListOptions) aapclient.SessionList {
	c.t.Helper()
	list, err := c.api().ListSessions(context.Background(), opts)
	if err != nil {
		c.t.Fatalf("GET /sessions %+v: %v", opts, err)
	}
	return list
}

// deleteSession is DELETE /sessions/:id through aapclient.
func (c *client) deleteSession(sid string) {
	c.t.Helper()
	if err := c.api().DeleteSession(context.Background(), sid); err != nil {
		c.t.Fatalf("DELETE /sessions/%s: %v", sid, err)
	}
}

// cancelTurn is POST /sessions/:id/turns/:turnId/cancel through aapclient;
// it fails the test unless the turn has stopped (200, not 202).
func (c *client) cancelTurn(sid, turnID string) aapclient.TurnInfo {
	c.t.Helper()
	info, stopping, err := c.api().CancelTurn(context.Background(), sid, turnID)
	if err != nil {
		c.t.Fatalf("cancel turn %s: %v", turnID, err)
	}
	if stopping {
		c.t.Fatalf("cancel turn %s: 202, the turn is still stopping: %+v", turnID, info)
	}
	return info
}

// compact is POST /sessions/:id/compact through aapclient.
func (c *client) compact(sid string) aapclient.CompactResult {
	c.t.Helper()
	res, err := c.api().Compact(context.Background(), sid)
	if err != nil {
		c.t.Fatalf("POST /sessions/%s/compact: %v", sid, err)
	}
	return res
}

// compactions is GET /sessions/:id/compactions through aapclient.
func (c *client) compactions(sid string, limit int) []aapclient.Compaction {
	c.t.Helper()
	list, err := c.api().Compactions(context.Background(), sid, limit)
	if err != nil {
		c.t.Fatalf("GET /sessions/%s/compactions: %v", sid, err)
	}
	return list
}

// turnEvent is an event of a turn read through aapclient, with the SSE id
// it came with.
type turnEvent struct {
	aap.Event
	ID int
}

// turnStream reads a turn's events through aapclient a few at a time. The
// stream's connection is closed when the test ends, if not before.
type turnStream struct {
	*aapclient.Stream
	t    testing.TB
	next func() (aap.Event, error, bool)
	stop func()
}

func newTurnStream(t testing.TB, s *aapclient.Stream) *turnStream {
	next, stop := iter.Pull2(s.Events())
	ts := &turnStream{Stream: s, t: t, next: next, stop: stop}
	t.Cleanup(ts.close)
	return ts
}

// openTurn posts a streaming turn through aapclient; body is the request as
// JSON would write it (its stream mode included).
func (c *client) openTurn(sid string, body any, opts ...aapclient.CallOption) *turnStream {
	c.t.Helper()
	s, err := c.api().StreamTurn(context.Background(), sid, turnRequest(c.t, body), opts...)
	if err != nil {
		c.t.Fatalf("POST /sessions/%s/turns: %v", sid, err)
	}
	return newTurnStream(c.t, s)
}

// followTurn opens a turn's events after event id after, as a client that
// lost its stream would (GET /sessions/:id/turns/:turnId/events).
func (c *client) followTurn(sid, turnID string, after int) *turnStream {
	c.t.Helper()
	s, err := c.api().TurnEvents(context.Background(), sid, turnID, after)
	if err != nil {
		c.t.Fatalf("events of turn %s after %d: %v", turnID, after, err)
	}
	return newTurnStream(c.t, s)
}

// streamTurn posts a streaming turn and reads every event of it.
func (c *client) streamTurn(sid string, body any, opts ...aapclient.CallOption) (*aapclient.Stream, []turnEvent) {
	c.t.Helper()
	ts := c.openTurn(sid, body, opts...)
	return ts.Stream, ts.read(-1)
}

// read returns the next n events, or with n < 0 every event up to the end
// of the turn (turn_stop); it fails the test if the stream breaks first.
func (ts *turnStream) read(n int) []turnEvent {
	ts.t.Helper()
	out, err := ts.tryRead(n)
	if err != nil {
		ts.t.Fatal(err)
	}
	return out
}

// tryRead is read for goroutines: it returns what it read and the error
// that stopped it. A connection that ends before turn_stop is an error
// here, although aapclient would resume it: the suite judges the server's
// streams as the server sends them.
func (ts *turnStream) tryRead(n int) ([]turnEvent, error) {
	var out []turnEvent
	for n < 0 || len(out) < n {
		e, err, ok := ts.next()
		if r := ts.Resumes(); r > 0 {
			return out, fmt.Errorf("turn %s: the stream broke after event %d and aapclient resumed it (%d times)", ts.TurnID(), ts.LastEventID(), r)
		}
		if err != nil {
			return out, fmt.Errorf("turn %s, after event %d: %w", ts.TurnID(), ts.LastEventID(), err)
		}
		if !ok {
			if n >= 0 {
				return out, fmt.Errorf("turn %s ended after %d of %d events: %v", ts.TurnID(), len(out), n, types(out))
			}
			break
		}
		out = append(out, turnEvent{Event: e, ID: ts.LastEventID()})
	}
	return out, nil
}

// close stops reading and closes the connection; the turn goes on.
func (ts *turnStream) close() {
	ts.stop()
	ts.Close()
}

// types lists the events' types.
func types(events []turnEvent) []string {
	out := make([]string, len(events))
	for i, e := range events {
		out[i] = string(e.Type)
	}
	return out
}

// jsonMap writes v as JSON and reads it back as a map, for comparing what
// the client read with a literal.
func jsonMap(t testing.TB, v any) map[string]any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// cuttingTransport cuts every event stream it passes after a number of
// bytes, as a flaky network would, and counts the cuts.
type cuttingTransport struct {
	next  http.RoundTripper
	after int
	cuts  atomic.Int32
}

func (ct *cuttingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	res, err := ct.next.RoundTrip(req)
	if err != nil || !isStream(res) {
		return res, err
	}
	res.Body = &cutBody{ReadCloser: res.Body, left: ct.after, cuts: &ct.cuts}
	return res, nil
}

var errCut = errors.New("test: connection cut")

// cutBody ends its body with errCut after left bytes.
type cutBody struct {
	io.ReadCloser
	left int
	cut  bool
	cuts *atomic.Int32
}

func (b *cutBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		if !b.cut {
			b.cut = true
			b.cuts.Add(1)
		}
		return 0, errCut
	}
	n, err := b.ReadCloser.Read(p[:min(len(p), b.left)])
	b.left -= n
	return n, err
}

// createRequest reads body, a session request as JSON would write it.
func createRequest(t testing.TB, body any) aap.CreateSessionRequest {
	t.Helper()
	var req aap.CreateSessionRequest
	b, err := json.Marshal(body)
	if err == nil {
		err = json.Unmarshal(b, &req)
	}
	if err != nil {
		t.Fatalf("create session request %s: %v", b, err)
	}
	return req
}
