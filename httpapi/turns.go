package httpapi

import (
	"net/http"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/agents"
	"github.com/aapd/aapd/store"
)

// TurnIDHeader carries the id of the turn a POST /sessions/:id/turns
// started, in every response mode.
const TurnIDHeader = "Aapd-Turn-Id"

// postTurn is POST /sessions/:id/turns. The turn runs in a worker, not in
// this request: if the client goes away the turn still completes and its
// messages reach the history.
func (s *Server) postTurn(w http.ResponseWriter, r *http.Request) error {
	id, err := sessionID(r)
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
	h, err := s.cfg.Runner.Start(r.Context(), agents.StartParams{
		TenantID: tenantOf(r), SessionID: id, Request: req,
	})
	if err != nil {
		return err
	}
	w.Header().Set(TurnIDHeader, h.Turn.ID)
	if req.Mode() == aap.StreamNone {
		return s.respondTurnJSON(w, r, h)
	}
	return s.streamEvents(w, r, h.Stream, 0)
}

// respondTurnJSON waits for the turn and writes its stop reason and the
// messages the agent produced, as stored.
func (s *Server) respondTurnJSON(w http.ResponseWriter, r *http.Request, h *agents.Handle) error {
	stop, err := h.Stream.Wait(r.Context())
	if err != nil {
		return nil // the client left; the turn completes without it
	}
	stored, err := s.cfg.Store.TurnMessages(r.Context(), h.Turn.TenantID, h.Turn.SessionID, h.Turn.ID)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, turnResponse(stop.StopReason, stored))
}

func turnResponse(stop aap.StopReason, stored []store.StoredMessage) aap.TurnResponse {
	resp := aap.TurnResponse{StopReason: stop, Messages: make([]aap.Message, len(stored))}
	for i, m := range stored {
		resp.Messages[i] = m.Message
	}
	return resp
}
