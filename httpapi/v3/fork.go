package v3

import (
	"errors"
	"net/http"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/auth"
	"github.com/aapd/aapd/httpapi"
	"github.com/aapd/aapd/logctx"
	"github.com/aapd/aapd/store"
)

// ForkRequest is the body of POST /sessions/:id/fork: {} for the whole
// session, or a point.
type ForkRequest struct {
	At *ForkPoint `json:"at"`
}

// ForkPoint is where a fork cuts its source: the end of a turn, or its
// first Message full-history messages. Exactly one is given.
type ForkPoint struct {
	Turn    *string `json:"turn"`
	Message *int64  `json:"message"`
}

// forkSession is POST /sessions/:id/fork (extension, docs/lifecycle.md): a
// new session of the caller's from the session up to a point, 201 with its
// record.
func (d *Door) forkSession(w http.ResponseWriter, r *http.Request) error {
	id, err := sessionID(r)
	if err != nil {
		return err
	}
	owner, err := newOwner(r)
	if err != nil {
		return err
	}
	body, err := d.edge.ReadBody(w, r)
	if err != nil {
		return err
	}
	var req ForkRequest
	if len(body) > 0 {
		if err := d.edge.Decode(body, &req); err != nil {
			return err
		}
	}
	var point store.ForkPoint
	if at := req.At; at != nil {
		switch {
		case at.Turn != nil && at.Message != nil:
			return &aap.Error{Field: "at", Msg: `give "turn" or "message", not both`}
		case at.Turn != nil:
			point.TurnID = *at.Turn
		case at.Message != nil:
			point.Messages, point.AtMessages = *at.Message, true
		default:
			return &aap.Error{Field: "at", Msg: `give "turn" (the end of that turn) or "message" (how many full-history messages to take), or no "at" for the whole session`}
		}
	}
	fork, err := d.cfg.Store.SessionFork(r.Context(), store.SessionForkParams{
		TenantID: httpapi.TenantOf(r), Owner: httpapi.OwnerOf(r), SessionID: id, Point: point, NewOwner: owner,
	})
	if err != nil {
		return pointError(err)
	}
	logctx.FromContext(r.Context()).SetSession(fork.ID)
	w.Header().Set("Location", "/sessions/"+fork.ID)
	return httpapi.WriteJSON(w, http.StatusCreated, sessionRecord(fork))
}

// newOwner is the owner of a session a request makes (a fork, an import):
// the end user of a token, or, for an API key, the end user ?owner= names
// (none without it). A token may name only its own subject.
func newOwner(r *http.Request) (string, error) {
	owner := httpapi.OwnerOf(r)
	q, err := httpapi.Query(r)
	if err != nil {
		return "", err
	}
	asked, ok := q["owner"]
	if !ok {
		return owner, nil
	}
	switch {
	case len(asked) != 1 || !auth.ValidOwner(asked[0]):
		return "", &aap.Error{Field: "owner", Msg: "must be one end user's subject (a token's sub: 1 to 255 bytes, no control characters)"}
	case owner != "" && asked[0] != owner:
		return "", &aap.Error{Field: "owner", Msg: "an end user's sessions are their own: ?owner= may only name the token's subject"}
	}
	return asked[0], nil
}

// pointError answers a point that cannot be taken: the caller's mistake
// (400), or a state of the session the caller can wait out or avoid (409).
func pointError(err error) error {
	var (
		bad      *store.PointError
		conflict *store.PointConflictError
	)
	switch {
	case errors.As(err, &bad):
		return &aap.Error{Field: bad.Field, Msg: bad.Msg}
	case errors.As(err, &conflict):
		titles := map[string]string{
			store.PointTurnRunning:          "A turn is already running",
			store.PointToolCallsOpen:        "Tool calls are open at that point",
			store.PointCompactedHistoryGone: "The compacted history at that point is gone",
			store.PointHistoryTrimmed:       "The full history at that point was trimmed",
		}
		p := httpapi.NewProblem(http.StatusConflict, conflict.Reason, titles[conflict.Reason], "%s", conflict.Msg)
		p.TurnID = conflict.TurnID
		if conflict.Reason == store.PointTurnRunning {
			p.WithRetryAfter(1) // the turn ends; the point may then be taken
		}
		return p
	}
	return err
}
