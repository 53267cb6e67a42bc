package v1

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/agents"
	"github.com/aapd/aapd/auth"
	"github.com/aapd/aapd/httpapi"
	"github.com/aapd/aapd/logctx"
)

// createRequest is the body of PUT /v1/session in AAP v3's terms: the
// session to create, and the stream mode of its first turn.
type createRequest struct {
	aap.CreateSessionRequest
	Stream aap.StreamMode
}

// UnmarshalJSON reads the body as AAP v3's POST /sessions body (its rules
// and errors) plus the turn's stream mode.
func (c *createRequest) UnmarshalJSON(data []byte) error {
	if err := json.Unmarshal(data, &c.CreateSessionRequest); err != nil {
		return err
	}
	var mode struct {
		Stream json.RawMessage `json:"stream"`
	}
	if err := json.Unmarshal(data, &mode); err != nil || len(mode.Stream) == 0 || isNull(mode.Stream) {
		return nil
	}
	if err := json.Unmarshal(mode.Stream, &c.Stream); err != nil {
		return fmt.Errorf("stream: must be of type string, not %s", mode.Stream)
	}
	return nil
}

// createSession is PUT /v1/session: create the session from the seed
// messages and run its first turn, the last of them, which must be a user
// message. The answer is the turn's, as for POST /v1/session/:id, with the
// session's id: in the JSON body (201), or in session_start, the first
// event of the stream (200).
func (d *Door) createSession(w http.ResponseWriter, r *http.Request) error {
	body, err := d.edge.ReadBody(w, r)
	if err != nil {
		return err
	}
	key, hash, err := d.edge.Idempotency(r, body)
	if err != nil {
		return err
	}
	v3, err := toV3Body(body)
	if err != nil {
		return err
	}
	var req createRequest
	if err := d.edge.Decode(v3, &req); err != nil {
		return err
	}
	if err := checkMode(req.Stream); err != nil {
		return err
	}
	n := len(req.Messages)
	switch {
	case n == 0:
		return &aap.Error{Field: "messages", Msg: "required: the conversation to seed the session with, whose last message, a user message, is the first turn"}
	case req.Messages[n-1].Role != aap.RoleUser:
		return &aap.Error{Field: fmt.Sprintf("messages[%d].role", n-1), Msg: fmt.Sprintf("the last message must be a user message (it is the first turn), not %q", req.Messages[n-1].Role)}
	}
	seed := req.CreateSessionRequest
	seed.Messages = req.Messages[:n-1]
	p, _ := auth.FromContext(r.Context())
	h, err := d.cfg.Runner.CreateAndStart(r.Context(), agents.CreateParams{
		TenantID: p.TenantID, Owner: p.Owner(), Session: seed,
		First:          aap.TurnRequest{Stream: req.Stream, Messages: req.Messages[n-1:]},
		IdempotencyKey: key, RequestHash: hash, RequestID: httpapi.RequestID(r.Context()),
	})
	if err != nil {
		return err
	}
	id := h.Turn.SessionID
	logctx.FromContext(r.Context()).SetSession(id)
	d.edge.Started(w, r, h)
	w.Header().Set("Location", Prefix+"/session/"+id)
	if h.Turn.Stream == aap.StreamNone {
		resp, err := h.Response(r.Context())
		if err != nil {
			return err
		}
		return writeJSON(w, http.StatusCreated, agentResponse(id, resp))
	}
	start, err := json.Marshal(SessionStart{SessionID: id})
	if err != nil {
		return err
	}
	return d.edge.StreamTurn(w, r, h.Events, httpapi.StreamOptions{Prelude: &httpapi.Prelude{Event: EventSessionStart, Data: start}})
}

// postTurn is POST /v1/session/:id: a turn, exactly as AAP v3's POST
// /sessions/:id/turns runs it, its tools written with inputSchema.
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
	v3, err := toV3Body(body)
	if err != nil {
		return err
	}
	var req aap.TurnRequest
	if err := d.edge.Decode(v3, &req); err != nil {
		return err
	}
	if err := checkMode(req.Stream); err != nil {
		return err
	}
	p, _ := auth.FromContext(r.Context())
	h, err := d.cfg.Runner.Start(r.Context(), agents.StartParams{
		TenantID: p.TenantID, SessionID: id, Owner: p.Owner(), Request: req,
		IdempotencyKey: key, RequestHash: hash, RequestID: httpapi.RequestID(r.Context()),
	})
	if err != nil {
		return err
	}
	d.edge.Started(w, r, h)
	// A replay answers in the mode of the original turn.
	if h.Turn.Stream == aap.StreamNone {
		resp, err := h.Response(r.Context())
		if err != nil {
			return err
		}
		return writeJSON(w, http.StatusOK, agentResponse("", resp))
	}
	return d.edge.StreamTurn(w, r, h.Events, httpapi.StreamOptions{})
}

// checkMode refuses a stream mode that no agent has, before anything runs.
func checkMode(m aap.StreamMode) error {
	switch m {
	case "", aap.StreamNone, aap.StreamDelta, aap.StreamMessage:
		return nil
	}
	return &aap.Error{Field: "stream", Msg: fmt.Sprintf(`unknown stream mode %q (want "none", "delta" or "message")`, m)}
}

func agentResponse(sessionID string, resp aap.TurnResponse) AgentResponse {
	out := AgentResponse{SessionID: sessionID, StopReason: resp.StopReason, Messages: resp.Messages}
	if out.Messages == nil {
		out.Messages = []aap.Message{}
	}
	return out
}
