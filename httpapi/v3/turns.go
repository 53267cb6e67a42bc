package v3

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gorilla/mux"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/agents"
	"github.com/aapd/aapd/httpapi"
	"github.com/aapd/aapd/logctx"
	"github.com/aapd/aapd/store"
)

// postTurn is POST /sessions/:id/turns. The turn runs in a worker, not
// under this request's context: if the client goes away the turn still
// completes and its messages reach the history. (A stream "none" turn runs
// on the request's goroutine, which waits for its end anyway.)
func (d *Door) postTurn(w http.ResponseWriter, r *http.Request) error {
	id, err := sessionID(r)
	if err != nil {
		return err
	}
	body, err := d.edge.ReadBody(w, r)
	if err != nil {
		return err
	}
	key, hash, err := d.edge.Idempotency(r, body)
	if err != nil {
		return err
	}
	var req aap.TurnRequest
	if err := d.edge.Decode(body, &req); err != nil {
		return err
	}
	switch req.Mode() {
	case aap.StreamNone, aap.StreamDelta, aap.StreamMessage:
	default:
		return &aap.Error{Field: "stream", Msg: `unknown stream mode "` + string(req.Stream) + `" (want "none", "delta" or "message")`}
	}
	p := agents.StartParams{
		TenantID: httpapi.TenantOf(r), SessionID: id, Owner: httpapi.OwnerOf(r), Request: req,
		IdempotencyKey: key, RequestHash: hash, RequestID: httpapi.RequestID(r.Context()),
	}
	if respondAsync(r) {
		return d.startBackground(w, r, p)
	}
	start := d.cfg.Runner.Start
	if req.Mode() == aap.StreamNone {
		// The request waits for the end anyway: the turn runs on its goroutine.
		start = d.cfg.Runner.Run
	}
	h, err := start(r.Context(), p)
	if err != nil {
		return err
	}
	d.edge.Started(w, r, h)
	// A replay answers in the mode of the original turn: its events are
	// recorded in that mode.
	if h.Turn.Stream == aap.StreamNone {
		resp, err := h.Response(r.Context())
		if err != nil {
			return err
		}
		return httpapi.WriteJSON(w, http.StatusOK, resp)
	}
	// A replay only follows the turn: it ends, like any follower, when the
	// server drains.
	return d.edge.StreamTurn(w, r, h.Events, httpapi.StreamOptions{Follow: h.Replay})
}

// TurnInfo is a turn's record as the turn extension endpoints show it.
type TurnInfo struct {
	TurnID     string         `json:"turnId"`
	SessionID  string         `json:"sessionId"`
	Status     string         `json:"status"`
	Stream     aap.StreamMode `json:"stream"`
	StopReason aap.StopReason `json:"stopReason,omitempty"`
	// Error says why a turn that stopped with "error" failed.
	Error          *aap.TurnError `json:"error,omitempty"`
	Usage          agents.Usage   `json:"usage"`
	IdempotencyKey string         `json:"idempotencyKey,omitempty"`
	CreatedAt      time.Time      `json:"createdAt"`
	// UpdatedAt is when the record last changed: its end, or its start
	// while it runs (extension of the record, docs/protocols.md).
	UpdatedAt  time.Time  `json:"updatedAt"`
	FinishedAt *time.Time `json:"finishedAt,omitempty"`
	DurationMs *int64     `json:"durationMs,omitempty"`
	// Background is true for a turn started with Prefer: respond-async
	// (docs/background.md).
	Background bool `json:"background,omitempty"`
	// Attempts counts the workers that began the turn: 0 while it is
	// queued, more than 1 once it was resumed after its process died.
	Attempts int `json:"attempts"`
}

func turnInfo(t store.Turn) TurnInfo {
	info := TurnInfo{
		TurnID: t.ID, SessionID: t.SessionID, Status: string(t.Status), Stream: t.Stream,
		StopReason: t.StopReason, Error: t.TurnError(), IdempotencyKey: t.IdempotencyKey,
		Usage:     agents.Usage{InputTokens: t.InputTokens, OutputTokens: t.OutputTokens},
		CreatedAt: t.CreatedAt.UTC(), UpdatedAt: t.CreatedAt.UTC(), FinishedAt: t.FinishedAt,
		Background: t.Background, Attempts: t.Attempts,
	}
	if t.FinishedAt != nil {
		info.UpdatedAt = t.FinishedAt.UTC()
		d := t.FinishedAt.Sub(t.CreatedAt).Milliseconds()
		info.DurationMs = &d
	}
	return info
}

// TurnList is the body of GET /sessions/:id/turns.
type TurnList struct {
	Turns []TurnInfo `json:"turns"`
	Next  string     `json:"next,omitempty"`
}

// listTurns is GET /sessions/:id/turns (extension): the session's turns,
// newest first, paged like sessions.
func (d *Door) listTurns(w http.ResponseWriter, r *http.Request) error {
	id, err := sessionID(r)
	if err != nil {
		return err
	}
	q, err := httpapi.Query(r)
	if err != nil {
		return err
	}
	limit, err := pageLimit(q)
	if err != nil {
		return err
	}
	tenant := httpapi.TenantOf(r)
	if _, err := d.cfg.Store.SessionGetOwned(r.Context(), tenant, httpapi.OwnerOf(r), id); err != nil {
		return err
	}
	page, err := d.cfg.Store.TurnList(r.Context(), store.TurnListParams{
		TenantID: tenant, SessionID: id, After: q.Get("after"), Limit: limit})
	if errors.Is(err, store.ErrBadCursor) {
		return badCursor()
	}
	if err != nil {
		return err
	}
	out := TurnList{Turns: make([]TurnInfo, len(page.Turns)), Next: page.Next}
	for i, t := range page.Turns {
		out.Turns[i] = turnInfo(t)
	}
	return httpapi.WriteJSON(w, http.StatusOK, out)
}

// turnRef reads the session and turn of the route, checking that the turn
// belongs to the tenant's session, and for an end user, that the session is
// theirs.
func (d *Door) turnRef(r *http.Request) (store.Turn, error) {
	id, err := sessionID(r)
	if err != nil {
		return store.Turn{}, err
	}
	turnID := mux.Vars(r)["turnId"]
	if !store.ValidID("turn_", turnID) {
		return store.Turn{}, httpapi.NotFound("no such turn")
	}
	logctx.FromContext(r.Context()).SetTurn(turnID)
	t, err := d.cfg.Store.TurnGetOwned(r.Context(), httpapi.TenantOf(r), httpapi.OwnerOf(r), id, turnID)
	if errors.Is(err, store.ErrNotFound) {
		return store.Turn{}, httpapi.NotFound("no such turn")
	}
	return t, err
}

// getTurn is GET /sessions/:id/turns/:turnId (extension). With Prefer:
// wait=N it answers once the turn has ended, or after N seconds (at most
// MaxTurnWait) with the record as it is then (docs/background.md).
func (d *Door) getTurn(w http.ResponseWriter, r *http.Request) error {
	t, err := d.turnRef(r)
	if err != nil {
		return err
	}
	if wait := waitPreference(r); wait > 0 {
		if !t.Status.Ended() {
			if t, err = d.waitTurnEnd(r.Context(), t, wait); err != nil {
				return err
			}
		}
		w.Header().Set(PreferenceAppliedHeader, preferWait+"="+strconv.Itoa(int(wait/time.Second)))
	}
	return httpapi.WriteJSON(w, http.StatusOK, turnInfo(t))
}

// turnEvents is GET /sessions/:id/turns/:turnId/events (extension): the
// turn's events after Last-Event-ID (or ?after=), then live until turn_stop,
// from whichever process runs the turn. A cursor beyond the turn's log is
// a 400 (no client was sent such an id); the id of a finished turn's last
// event is a 204, which tells an EventSource there is nothing more to read.
func (d *Door) turnEvents(w http.ResponseWriter, r *http.Request) error {
	t, err := d.turnRef(r)
	if err != nil {
		return err
	}
	q, err := httpapi.Query(r)
	if err != nil {
		return err
	}
	after, field := int64(0), ""
	for _, c := range []struct{ name, value string }{{"after", q.Get("after")}, {"Last-Event-ID", r.Header.Get("Last-Event-ID")}} {
		if c.value == "" {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(c.value), 10, 64)
		if err != nil || n < 0 {
			return &aap.Error{Field: c.name, Msg: fmt.Sprintf("%q is not an event id (a whole number from 0)", c.value)}
		}
		after, field = n, c.name
	}
	src, n, finished, err := d.cfg.Runner.FollowAfter(r.Context(), t.Ref(), int(after))
	if err != nil {
		return err
	}
	switch {
	case after > int64(n):
		return &aap.Error{Field: field, Msg: fmt.Sprintf("event %d is beyond the turn's log, whose last event so far is %d", after, n)}
	case finished && after == int64(n):
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	return d.edge.StreamTurn(w, r, src, httpapi.StreamOptions{After: int(after), Follow: true})
}

// cancelWait is how long POST .../cancel waits for the turn to stop.
const cancelWait = 10 * time.Second

// cancelTurn is POST /sessions/:id/turns/:turnId/cancel (extension): stop the
// model, keep what it produced, end the stream with turn_stop and free the
// session. It answers with the turn once it has stopped (200), or 202 if it
// is still stopping after a while. Cancelling a finished turn changes
// nothing and answers 200.
func (d *Door) cancelTurn(w http.ResponseWriter, r *http.Request) error {
	t, err := d.turnRef(r)
	if err != nil {
		return err
	}
	t, err = d.cfg.Runner.CancelTurn(r.Context(), t, cancelWait)
	switch {
	case r.Context().Err() != nil:
		return nil // the client has gone
	case err != nil:
		return err
	case !t.Status.Ended():
		return httpapi.WriteJSON(w, http.StatusAccepted, turnInfo(t))
	}
	return httpapi.WriteJSON(w, http.StatusOK, turnInfo(t))
}
