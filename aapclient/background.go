package aapclient

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/aapd/aapd/aap"
)

// Background turns (aapd, docs/background.md): a turn nobody waits on. The
// server answers at once with the turn's record and runs the turn as a
// streamed one; it survives the client, and on aapd the replica running it.

// BackgroundTurn is the answer to StartBackgroundTurn.
type BackgroundTurn struct {
	// TurnInfo is the turn's record when the server answered: running, or
	// queued while every worker is busy.
	TurnInfo
	// Location is the path of the turn's record.
	Location string
	// Replayed is true when the server answered with the turn an earlier
	// request with the same Idempotency-Key started.
	Replayed bool
}

// StartBackgroundTurn is POST /sessions/:id/turns with Prefer:
// respond-async (aapd): it returns as soon as the server has accepted the
// turn (202). Follow it with TurnEvents, wait for its end with WaitTurn,
// or poll GetTurn. The request carries an Idempotency-Key (WithIdempotencyKey,
// or a fresh one), so a retry after a lost answer gets the turn that
// started instead of starting another. A server that ignores the
// preference (one other than aapd) runs the turn in the foreground: that
// is an error here, once the turn has ended.
func (c *Client) StartBackgroundTurn(ctx context.Context, sessionID string, req aap.TurnRequest, opts ...CallOption) (*BackgroundTurn, error) {
	path := sessionPath(sessionID, "turns")
	body, err := marshal(http.MethodPost, path, req)
	if err != nil {
		return nil, err
	}
	call := callOptions(opts)
	header := call.idempotencyHeader()
	header.Set("Prefer", "respond-async")
	out := &BackgroundTurn{}
	res, err := c.callJSON(ctx, request{method: http.MethodPost, path: path, body: body, header: header, resend: true}, &out.TurnInfo)
	if err != nil {
		return nil, err
	}
	if res.StatusCode != http.StatusAccepted {
		return nil, fmt.Errorf("aap: POST %s: the server answered %d, not 202: it ran the turn in the foreground (it does not honour Prefer: respond-async)", path, res.StatusCode)
	}
	out.Location = res.Header.Get("Location")
	out.Replayed = res.Header.Get(ReplayedHeader) == "true"
	return out, nil
}

// TurnWait is how long each request of WaitTurn asks the server to wait
// for the turn's end (Prefer: wait, which aapd bounds at 60 s).
const TurnWait = 30 * time.Second

// WaitTurn waits until a turn has ended and returns its record (aapd). It
// asks for the record with Prefer: wait (docs/background.md), which aapd
// answers once the turn has ended, or after TurnWait with the turn still
// running, when it asks again: one request for a turn that ends within
// TurnWait, wherever it runs. A context with a nearer deadline asks for a
// wait that ends a second before it (at least a second), so the server's
// answer, not the context's end, comes first. A server that does not honour the
// preference has its events followed to turn_stop instead (resuming the
// stream when a connection drops), then the record read.
func (c *Client) WaitTurn(ctx context.Context, sessionID, turnID string) (TurnInfo, error) {
	for {
		// A context that ends sooner asks for less, so that the answer
		// comes before it does.
		wait := TurnWait
		if deadline, ok := ctx.Deadline(); ok {
			wait = max(min(wait, time.Until(deadline)-time.Second), time.Second)
		}
		header := http.Header{"Prefer": {"wait=" + strconv.Itoa(int(wait/time.Second))}}
		var info TurnInfo
		res, err := c.callJSON(ctx, request{method: http.MethodGet, path: sessionPath(sessionID, "turns", turnID),
			header: header, resend: true}, &info)
		if err != nil {
			return TurnInfo{}, err
		}
		if info.Ended() {
			return info, nil
		}
		if !strings.HasPrefix(res.Header.Get("Preference-Applied"), "wait=") {
			return c.followToEnd(ctx, sessionID, turnID)
		}
	}
}

// followToEnd follows a turn's events to turn_stop, then reads its record.
func (c *Client) followToEnd(ctx context.Context, sessionID, turnID string) (TurnInfo, error) {
	s, err := c.TurnEvents(ctx, sessionID, turnID, 0)
	if err != nil {
		return TurnInfo{}, err
	}
	defer s.Close()
	for _, err := range s.Events() {
		if err != nil {
			return TurnInfo{}, err
		}
	}
	return c.GetTurn(ctx, sessionID, turnID)
}
