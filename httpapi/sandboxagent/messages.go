package sandboxagent

import (
	"math"
	"net/http"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/agents"
	"github.com/aapd/aapd/httpapi"
	"github.com/aapd/aapd/store"
)

// messageRequest is a MessageRequest.
type messageRequest struct {
	Message *string `json:"message"`
}

// postMessage is POST /v1/sessions/{session_id}/messages: the message is a
// user message, and a turn runs it (204 once the turn holds the session;
// it runs on whatever the client does next). A turn already running is a
// 409, an ended session a 409; pending calls the message does not answer
// are closed, as AAP closes them.
func (d *Door) postMessage(w http.ResponseWriter, r *http.Request) error {
	if _, _, _, err := d.startMessage(w, r); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// postMessageStream is POST /v1/sessions/{session_id}/messages/stream: the
// same turn, and its events as Server-Sent Events, from the user's message
// to the turn's end — whose last event is one the SDK takes as the end of
// a turn (turn.completed, error, permission.requested, question.requested;
// then session.ended if the session was ended meanwhile).
func (d *Door) postMessageStream(w http.ResponseWriter, r *http.Request) error {
	raw, err := includeRaw(r)
	if err != nil {
		return err
	}
	sess, name, h, err := d.startMessage(w, r)
	if err != nil {
		return err
	}
	return d.streamTurn(w, r, d.newReader(sess, name, raw), h.Turn.ID)
}

// startMessage starts the turn of a message.
func (d *Door) startMessage(w http.ResponseWriter, r *http.Request) (store.Session, string, *agents.Handle, error) {
	sess, name, err := d.session(r)
	if err != nil {
		return store.Session{}, "", nil, err
	}
	body, err := d.edge.ReadBody(w, r)
	if err != nil {
		return store.Session{}, "", nil, err
	}
	var req messageRequest
	if err := d.edge.Decode(body, &req); err != nil {
		return store.Session{}, "", nil, err
	}
	if req.Message == nil || *req.Message == "" {
		return store.Session{}, "", nil, &aap.Error{Field: "message", Msg: "required: the user's message, non-empty text"}
	}
	h, err := d.cfg.Runner.Start(r.Context(), agents.StartParams{
		TenantID: sess.TenantID, SessionID: sess.ID, Owner: httpapi.OwnerOf(r), RequestID: httpapi.RequestID(r.Context()),
		Request: aap.TurnRequest{Stream: d.streamMode(sess), Messages: []aap.Message{aap.UserMessage(*req.Message)}},
	})
	if err != nil {
		return store.Session{}, "", nil, err
	}
	d.edge.Started(w, r, h)
	return sess, name, h, nil
}

// streamMode is how a turn of the session records its events: deltas when
// its agent streams them, whole messages otherwise.
func (d *Door) streamMode(sess store.Session) aap.StreamMode {
	if a, ok := d.cfg.Agents.Get(sess.AgentName); ok && !a.Info.SupportsStream(aap.StreamDelta) {
		if a.Info.SupportsStream(aap.StreamMessage) {
			return aap.StreamMessage
		}
		return aap.StreamNone
	}
	return aap.StreamDelta
}

// streamTurn writes the events of a turn that has just started: the
// reader is put at the end of what precedes it (every earlier turn has
// ended), then follows the log until the turn's end.
func (d *Door) streamTurn(w http.ResponseWriter, r *http.Request, rd *logReader, turnID string) error {
	if _, err := rd.seek(r.Context(), math.MaxInt64); err != nil {
		return err
	}
	out, ctx, done := d.edge.OpenStream(w, r)
	defer done()
	first := int64(-1)
	return d.follow(ctx, out, rd, func(events []UniversalEvent) []UniversalEvent {
		if first < 0 {
			if s, ok := rd.started[turnID]; ok {
				first = s
			}
		}
		var keep []UniversalEvent
		for _, e := range events {
			if first > 0 && e.Sequence >= first {
				keep = append(keep, e)
			}
		}
		return keep
	}, func() bool { return rd.turnEnded(turnID) })
}
