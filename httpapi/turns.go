package httpapi

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
	"github.com/aapd/aapd/logctx"
	"github.com/aapd/aapd/store"
)

// TurnIDHeader carries the id of the turn a POST /sessions/:id/turns
// started, in every response mode.
const TurnIDHeader = "Aapd-Turn-Id"

// postTurn is POST /sessions/:id/turns. The turn runs in a worker, not
// under this request's context: if the client goes away the turn still
// completes and its messages reach the history. (A stream "none" turn runs
// on the request's goroutine, which waits for its end anyway.)
func (s *Server) postTurn(w http.ResponseWriter, r *http.Request) error {
	id, err := sessionID(r)
	if err != nil {
		return err
	}
	key, err := idempotencyKey(r)
	if err != nil {
		return err
	}
	body, err := s.readBody(w, r)
	if err != nil {
		return err
	}
	var req aap.TurnRequest
	if err := decodeJSON(body, &req); err != nil {
		return err
	}
	switch req.Mode() {
	case aap.StreamNone, aap.StreamDelta, aap.StreamMessage:
	default:
		return &aap.Error{Field: "stream", Msg: `unknown stream mode "` + string(req.Stream) + `" (want "none", "delta" or "message")`}
	}
	start := s.cfg.Runner.Start
	if req.Mode() == aap.StreamNone {
		// The request waits for the end anyway: the turn runs on its goroutine.
		start = s.cfg.Runner.Run
	}
	h, err := start(r.Context(), agents.StartParams{
		TenantID: tenantOf(r), SessionID: id, Owner: ownerOf(r), Request: req,
		IdempotencyKey: key, RequestHash: requestHash(r, body), RequestID: requestIDFrom(r.Context()),
	})
	if err != nil {
		return err
	}
	logctx.FromContext(r.Context()).SetTurn(h.Turn.ID)
	w.Header().Set(TurnIDHeader, h.Turn.ID)
	if h.Replay {
		w.Header().Set(ReplayedHeader, "true")
	}
	// A replay answers in the mode of the original turn: its events are
	// recorded in that mode.
	if h.Turn.Stream == aap.StreamNone {
		resp, err := h.Response(r.Context())
		if err != nil {
			return err
		}
		return writeJSON(w, http.StatusOK, resp)
	}
	// A replay only follows the turn: it ends, like any follower, when the
	// server drains.
	return s.streamEvents(w, r, h.Events, 0, h.Replay)
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
}

func turnInfo(t store.Turn) TurnInfo {
	info := TurnInfo{
		TurnID: t.ID, SessionID: t.SessionID, Status: string(t.Status), Stream: t.Stream,
		StopReason: t.StopReason, Error: t.TurnError(), IdempotencyKey: t.IdempotencyKey,
		Usage:     agents.Usage{InputTokens: t.InputTokens, OutputTokens: t.OutputTokens},
		CreatedAt: t.CreatedAt.UTC(), UpdatedAt: t.CreatedAt.UTC(), FinishedAt: t.FinishedAt,
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
func (s *Server) listTurns(w http.ResponseWriter, r *http.Request) error {
	id, err := sessionID(r)
	if err != nil {
		return err
	}
	limit, err := pageLimit(r)
	if err != nil {
		return err
	}
	tenant := tenantOf(r)
	if _, err := s.cfg.Store.SessionGetOwned(r.Context(), tenant, ownerOf(r), id); err != nil {
		return err
	}
	page, err := s.cfg.Store.TurnList(r.Context(), store.TurnListParams{
		TenantID: tenant, SessionID: id, After: r.URL.Query().Get("after"), Limit: limit})
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
	return writeJSON(w, http.StatusOK, out)
}

// turnRef reads the session and turn of the route, checking that the turn
// belongs to the tenant's session, and for an end user, that the session is
// theirs.
func (s *Server) turnRef(r *http.Request) (store.Turn, error) {
	id, err := sessionID(r)
	if err != nil {
		return store.Turn{}, err
	}
	turnID := mux.Vars(r)["turnId"]
	if !store.ValidID("turn_", turnID) {
		return store.Turn{}, probNotFound.with("no such turn")
	}
	logctx.FromContext(r.Context()).SetTurn(turnID)
	t, err := s.cfg.Store.TurnGetOwned(r.Context(), tenantOf(r), ownerOf(r), id, turnID)
	if errors.Is(err, store.ErrNotFound) {
		return store.Turn{}, probNotFound.with("no such turn")
	}
	return t, err
}

// getTurn is GET /sessions/:id/turns/:turnId (extension).
func (s *Server) getTurn(w http.ResponseWriter, r *http.Request) error {
	t, err := s.turnRef(r)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, turnInfo(t))
}

// turnEvents is GET /sessions/:id/turns/:turnId/events (extension): the
// turn's events after Last-Event-ID (or ?after=), then live until turn_stop,
// from whichever process runs the turn. A cursor beyond the turn's log is
// a 400 (no client was sent such an id); the id of a finished turn's last
// event is a 204, which tells an EventSource there is nothing more to read.
func (s *Server) turnEvents(w http.ResponseWriter, r *http.Request) error {
	t, err := s.turnRef(r)
	if err != nil {
		return err
	}
	after, field := int64(0), ""
	for _, c := range []struct{ name, value string }{{"after", r.URL.Query().Get("after")}, {"Last-Event-ID", r.Header.Get("Last-Event-ID")}} {
		if c.value == "" {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(c.value), 10, 64)
		if err != nil || n < 0 {
			return &aap.Error{Field: c.name, Msg: fmt.Sprintf("%q is not an event id (a whole number from 0)", c.value)}
		}
		after, field = n, c.name
	}
	ref := t.Ref()
	n, finished, err := s.cfg.Runner.LogPosition(r.Context(), ref)
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
	return s.streamEvents(w, r, s.cfg.Runner.Follow(ref), int(after), true)
}

// cancelWait is how long POST .../cancel waits for the turn to stop.
const cancelWait = 10 * time.Second

// cancelTurn is POST /sessions/:id/turns/:turnId/cancel (extension): stop the
// model, keep what it produced, end the stream with turn_stop and free the
// session. It answers with the turn once it has stopped (200), or 202 if it
// is still stopping after a while. Cancelling a finished turn changes
// nothing and answers 200.
func (s *Server) cancelTurn(w http.ResponseWriter, r *http.Request) error {
	t, err := s.turnRef(r)
	if err != nil {
		return err
	}
	ref := t.Ref()
	if t.Status == store.TurnRunning {
		if t, err = s.cfg.Store.TurnRequestCancel(r.Context(), ref); err != nil {
			return err
		}
		s.cfg.Runner.Cancel(t.ID)
	}
	deadline := time.Now().Add(cancelWait)
	for t.Status == store.TurnRunning {
		// A turn whose process is gone is stopped here and now.
		if _, err := s.cfg.Store.TurnInterruptIfDead(r.Context(), ref); err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return writeJSON(w, http.StatusAccepted, turnInfo(t))
		}
		select {
		case <-r.Context().Done():
			return nil
		case <-time.After(50 * time.Millisecond):
		}
		if t, err = s.cfg.Store.TurnGet(r.Context(), ref.TenantID, ref.SessionID, ref.TurnID); err != nil {
			return err
		}
	}
	return writeJSON(w, http.StatusOK, turnInfo(t))
}
