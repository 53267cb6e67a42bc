package aapclient

import (
	"context"
	"fmt"
	"mime"
	"net/http"
	"strconv"

	"github.com/aapd/aapd/aap"
)

// Headers aapd sets on the answer to POST /sessions/:id/turns.
const (
	// TurnIDHeader carries the id of the turn the request started (or, for
	// a replay, had started): the handle of the extension endpoints.
	TurnIDHeader = "Aapd-Turn-Id"
	// ReplayedHeader is "true" on the answer to a retry that got the
	// original request's outcome instead of running again.
	ReplayedHeader = "Idempotent-Replayed"
)

// TurnResult is the answer to a turn sent with stream "none".
type TurnResult struct {
	aap.TurnResponse
	// TurnID is the turn's id on servers that say it (aapd), else empty.
	TurnID string
	// Replayed is true when the server answered with the outcome of an
	// earlier request with the same Idempotency-Key.
	Replayed bool
}

// SendTurn is POST /sessions/:id/turns with stream "none": it returns when
// the agent has finished. req.Stream must be empty or "none" (StreamTurn
// streams). The request carries an Idempotency-Key (WithIdempotencyKey, or
// a fresh one), so a retry after a lost answer gets the turn that ran
// instead of running another.
func (c *Client) SendTurn(ctx context.Context, sessionID string, req aap.TurnRequest, opts ...CallOption) (*TurnResult, error) {
	path := sessionPath(sessionID, "turns")
	if req.Mode() != aap.StreamNone {
		return nil, fmt.Errorf("aap: POST %s: stream %q: use StreamTurn for a streamed turn", path, req.Stream)
	}
	body, err := marshal(http.MethodPost, path, req)
	if err != nil {
		return nil, err
	}
	call := callOptions(opts)
	out := &TurnResult{}
	res, err := c.callJSON(ctx, request{method: http.MethodPost, path: path, body: body,
		header: call.idempotencyHeader(), resend: true}, &out.TurnResponse)
	if err != nil {
		return nil, err
	}
	out.TurnID = res.Header.Get(TurnIDHeader)
	out.Replayed = res.Header.Get(ReplayedHeader) == "true"
	return out, nil
}

// StreamTurn is POST /sessions/:id/turns with stream "delta" or "message"
// (empty means "delta"). It returns once the server has accepted the turn;
// read its events with Stream.Events. Refusals (409, 429, 503) are retried
// per the client's policy with the same Idempotency-Key. ctx governs the
// whole stream, its resumes included.
func (c *Client) StreamTurn(ctx context.Context, sessionID string, req aap.TurnRequest, opts ...CallOption) (*Stream, error) {
	path := sessionPath(sessionID, "turns")
	switch req.Stream {
	case "":
		req.Stream = aap.StreamDelta
	case aap.StreamDelta, aap.StreamMessage:
	default:
		return nil, fmt.Errorf("aap: POST %s: stream %q: use SendTurn for a turn that does not stream", path, req.Stream)
	}
	body, err := marshal(http.MethodPost, path, req)
	if err != nil {
		return nil, err
	}
	call := callOptions(opts)
	r := request{method: http.MethodPost, path: path, body: body, header: call.idempotencyHeader(),
		resend: true, accept: "text/event-stream"}
	res, _, err := c.do(ctx, r, true)
	if err != nil {
		return nil, err
	}
	if err := checkEventStream(res, r); err != nil {
		return nil, err
	}
	return &Stream{
		c: c, ctx: ctx, sessionID: sessionID,
		turnID: res.Header.Get(TurnIDHeader), replayed: res.Header.Get(ReplayedHeader) == "true",
		body: res.Body, sse: newSSEReader(res.Body),
	}, nil
}

// TurnEvents is GET /sessions/:id/turns/:turnId/events (aapd extension):
// the turn's events after event id after (0 for all of them), then its live
// events until turn_stop, from any replica. A stream whose turn has ended
// and whose last event is after has no events.
func (c *Client) TurnEvents(ctx context.Context, sessionID, turnID string, after int) (*Stream, error) {
	s := &Stream{c: c, ctx: ctx, sessionID: sessionID, turnID: turnID, last: after}
	res, err := s.open()
	if err != nil {
		return nil, err
	}
	if res == nil {
		s.done = true
		return s, nil
	}
	s.body, s.sse = res.Body, newSSEReader(res.Body)
	return s, nil
}

// open requests the turn's events after s.last. A nil response with no
// error is the server saying there are none (204: s.last was turn_stop).
func (s *Stream) open() (*http.Response, error) {
	h := http.Header{}
	h.Set("Last-Event-ID", strconv.Itoa(s.last))
	r := request{method: http.MethodGet, path: sessionPath(s.sessionID, "turns", s.turnID, "events"),
		header: h, resend: true, accept: "text/event-stream"}
	res, _, err := s.c.do(s.ctx, r, true)
	if err != nil {
		return nil, err
	}
	if res.StatusCode == http.StatusNoContent {
		res.Body.Close()
		return nil, nil
	}
	if err := checkEventStream(res, r); err != nil {
		return nil, err
	}
	return res, nil
}

// checkEventStream makes sure a successful answer is an event stream,
// closing its body when it is not.
func checkEventStream(res *http.Response, r request) error {
	if mt, _, _ := mime.ParseMediaType(res.Header.Get("Content-Type")); mt != "text/event-stream" {
		res.Body.Close()
		return fmt.Errorf("aap: %s %s: the answer is %q, not an event stream", r.method, r.path, res.Header.Get("Content-Type"))
	}
	return nil
}
