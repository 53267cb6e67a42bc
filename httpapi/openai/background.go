package openai

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/gorilla/mux"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/agents"
	"github.com/aapd/aapd/httpapi"
	"github.com/aapd/aapd/store"
)

// Background responses are aapd's background turns (docs/background.md):
// answered at once, queued while every worker is busy, resumed if their
// process dies; read with GET /responses/{id} (streamed with ?stream=true,
// from ?starting_after=N), cancelled with POST /responses/{id}/cancel.

// cancelWait is how long a cancel waits for the turn to stop.
const cancelWait = 10 * time.Second

// started is the response of a background turn as it starts.
func (d *Door) started(h *agents.Handle, sess store.Session, in *turnInput) *Response {
	resp := newResponse(sess.ID, h.Turn, in.agent.Info.Name)
	in.describe(resp)
	resp.Background = true
	if h.Turn.Status == store.TurnQueued {
		resp.Status = statusQueued
	}
	return resp
}

// startNewBackground creates a session for a background response and
// starts its turn; a turn refused leaves no session behind.
func (d *Door) startNewBackground(r *http.Request, in *turnInput, create aap.CreateSessionRequest, first aap.TurnRequest, key string, hash []byte) (*agents.Handle, store.Session, error) {
	a := in.agent
	whole := create
	whole.Messages = append(slices.Clip(create.Messages), first.Messages...)
	if err := aap.ValidateCreateSession(whole, a.Info); err != nil {
		return nil, store.Session{}, err
	}
	if err := aap.ValidateTurn(first, a.Info.Name, create.Agent.Tools, a.Info); err != nil {
		return nil, store.Session{}, err
	}
	plain, secret := a.SplitOptions(create.Agent.Options)
	sess, replayed, err := d.cfg.Runner.CreateSession(r.Context(), store.SessionCreateParams{
		TenantID: httpapi.TenantOf(r), Owner: httpapi.OwnerOf(r), AgentName: a.Info.Name, AgentTools: create.Agent.Tools,
		Options: plain, SecretOptions: secret, ClientTools: create.Tools, Messages: create.Messages,
		Pending: aap.PendingFromHistory(create.Messages, create.Tools), IdempotencyKey: key, RequestHash: hash,
	})
	if err != nil {
		return nil, store.Session{}, err
	}
	sess.Owner, sess.AgentName, sess.ClientTools = httpapi.OwnerOf(r), a.Info.Name, create.Tools
	h, err := d.cfg.Runner.StartBackground(r.Context(), agents.StartParams{
		TenantID: sess.TenantID, SessionID: sess.ID, Owner: sess.Owner, Request: first,
		IdempotencyKey: key, RequestHash: hash, RequestID: httpapi.RequestID(r.Context()), Labels: in.labels(),
		ToolChoice: in.choice,
	})
	if err != nil && !replayed && r.Context().Err() == nil {
		d.forget(r, sess)
	}
	if err != nil {
		return nil, store.Session{}, err
	}
	return h, sess, nil
}

// response resolves the route's response: its session and its turn.
func (d *Door) response(r *http.Request) (store.Session, store.Turn, error) {
	id := mux.Vars(r)["response_id"]
	sessionID, turnID, ok := parseResponseID(id)
	if !ok {
		return store.Session{}, store.Turn{}, notFound("response_id", "no response %q", id)
	}
	sess, err := d.session(r, sessionID, "response_id")
	if err != nil {
		return store.Session{}, store.Turn{}, notFound("response_id", "no response %q", id)
	}
	turn, err := d.cfg.Store.TurnGet(r.Context(), sess.TenantID, sess.ID, turnID)
	if errors.Is(err, store.ErrNotFound) {
		return store.Session{}, store.Turn{}, notFound("response_id", "no response %q", id)
	}
	return sess, turn, err
}

// getResponse is GET /responses/{id}: the response of a turn as it is —
// or, with ?stream=true, its events from the start (after
// ?starting_after=N) to its end, numbered as they were first streamed.
func (d *Door) getResponse(w http.ResponseWriter, r *http.Request) error {
	sess, turn, err := d.response(r)
	if err != nil {
		return err
	}
	q, err := httpapi.Query(r)
	if err != nil {
		return err
	}
	stream := q.Get("stream") == "true"
	if !stream && r.ContentLength != 0 {
		// openai-go's GetStreaming asks in a JSON body: {"stream": true}.
		body, err := d.edge.ReadBody(w, r)
		if err != nil {
			return err
		}
		var asked struct {
			Stream bool `json:"stream"`
		}
		stream = json.Unmarshal(body, &asked) == nil && asked.Stream
	}
	if stream {
		after := -1
		if v := q.Get("starting_after"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return invalid("starting_after", "must be a sequence number")
			}
			after = n
		}
		return d.resume(w, r, sess, turn, after)
	}
	resp, err := d.stored(r.Context(), sess, turn)
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, resp)
}

// stored is a turn's response as the store has it.
func (d *Door) stored(ctx context.Context, sess store.Session, turn store.Turn) (*Response, error) {
	resp := newResponse(sess.ID, turn, sess.AgentName)
	switch turn.Status {
	case store.TurnQueued:
		resp.Status = statusQueued
		return resp, nil
	case store.TurnRunning:
		return resp, nil
	}
	produced, err := d.cfg.Store.TurnMessages(ctx, sess.TenantID, sess.ID, turn.ID)
	if err != nil {
		return nil, err
	}
	agent, _ := d.cfg.Agents.Get(sess.AgentName)
	var turnErr *aap.TurnError
	if turn.Error != "" {
		turnErr = &aap.TurnError{Type: turn.ErrorType, Message: turn.Error}
	}
	resp.finish(turn.StopReason, turn.Status, turnErr, agents.Usage{InputTokens: turn.InputTokens, OutputTokens: turn.OutputTokens},
		outputOf(sess, agent, sess.ClientTools, produced, turn.StopReason))
	if turn.FinishedAt != nil {
		at := turn.FinishedAt.Unix()
		resp.CompletedAt = &at
	}
	return resp, nil
}

// resume streams a turn's response from its start, leaving out the
// events up to after.
func (d *Door) resume(w http.ResponseWriter, r *http.Request, sess store.Session, turn store.Turn, after int) error {
	agent, _ := d.cfg.Agents.Get(sess.AgentName)
	resp := newResponse(sess.ID, turn, sess.AgentName)
	// The agent's first message of the turn names the items, as it did
	// when the turn was first streamed.
	produced, err := d.cfg.Store.TurnMessages(r.Context(), sess.TenantID, sess.ID, turn.ID)
	if err != nil {
		return err
	}
	var next int64
	for _, m := range produced {
		if m.Message.Role == aap.RoleAssistant {
			next = m.Seq
			break
		}
	}
	st := newStreamer(resp, newTranslator(withTools(sess, sess.ClientTools), agent), next)
	out, ctx, done := d.edge.OpenStream(w, r)
	defer done()
	skip := func(events []streamEvent) []streamEvent {
		var keep []streamEvent
		for _, e := range events {
			if e["sequence_number"].(int) > after {
				keep = append(keep, e)
			}
		}
		return keep
	}
	st.filter = skip
	if d.write(out, skip(st.start())) != nil {
		return nil
	}
	return d.follow(ctx, out, st, d.cfg.Runner.Follow(turn.Ref()), 0, func(ctx context.Context) (*Response, error) {
		t, err := d.cfg.Store.TurnGet(ctx, turn.TenantID, turn.SessionID, turn.ID)
		if err != nil {
			return nil, err
		}
		return d.stored(ctx, sess, t)
	})
}

// cancelResponse is POST /responses/{id}/cancel: the turn is cancelled
// (what it produced is kept), and the response answered as it ended; one
// that has ended already is answered as it is.
func (d *Door) cancelResponse(w http.ResponseWriter, r *http.Request) error {
	sess, t, err := d.response(r)
	if err != nil {
		return err
	}
	t, err = d.cfg.Runner.CancelTurn(r.Context(), t, cancelWait)
	if r.Context().Err() != nil {
		return nil // the client has gone
	}
	if err != nil {
		return err
	}
	resp, err := d.stored(r.Context(), sess, t)
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, resp)
}

// deleteResponse is DELETE /responses/{id}. A session's history is
// append-only, so a response is deleted only with its session: when it is
// the session's only response and the session is no conversation (one
// response made it). Otherwise a 400: delete the conversation.
func (d *Door) deleteResponse(w http.ResponseWriter, r *http.Request) error {
	sess, t, err := d.response(r)
	if err != nil {
		return err
	}
	page, err := d.cfg.Store.TurnList(r.Context(), store.TurnListParams{TenantID: sess.TenantID, SessionID: sess.ID, Limit: 2})
	if err != nil {
		return err
	}
	if _, conversation := sess.Labels[labelMetadata]; conversation || len(page.Turns) != 1 {
		return unsupported("response_id", "aapd keeps a conversation's history append-only: response %s is deleted only with its conversation (%s)", responseID(sess.ID, t.ID), sess.ID)
	}
	if err := d.cfg.Runner.DeleteSession(r.Context(), sess.TenantID, httpapi.OwnerOf(r), sess.ID); err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, map[string]any{"id": responseID(sess.ID, t.ID), "object": "response.deleted", "deleted": true})
}

// listInputItems is GET /responses/{id}/input_items: what the client sent
// in the turn, as items, paged as a conversation's items are (with
// trimmed_through as they have it: a turn's input inside the trimmed
// prefix is gone with it).
func (d *Door) listInputItems(w http.ResponseWriter, r *http.Request) error {
	sess, t, err := d.response(r)
	if err != nil {
		return err
	}
	msgs, err := d.cfg.Store.TurnClientMessages(r.Context(), sess.TenantID, sess.ID, t.ID)
	if err != nil {
		return err
	}
	agent, _ := d.cfg.Agents.Get(sess.AgentName)
	tr := newTranslator(sess, agent)
	return d.writePage(w, r, tr.items(msgs, nil), sess.HistoryTrimmedThrough)
}
