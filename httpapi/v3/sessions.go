package v3

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/auth"
	"github.com/aapd/aapd/httpapi"
	"github.com/aapd/aapd/logctx"
	"github.com/aapd/aapd/store"
	"github.com/aapd/aapd/transfer"
)

// createSession is POST /sessions: validate everything, then store.
func (d *Door) createSession(w http.ResponseWriter, r *http.Request) error {
	body, err := d.edge.ReadBody(w, r)
	if err != nil {
		return err
	}
	key, hash, err := d.edge.Idempotency(r, body)
	if err != nil {
		return err
	}
	var req aap.CreateSessionRequest
	if err := d.edge.Decode(body, &req); err != nil {
		return err
	}
	if req.Agent.Name == "" {
		return &aap.Error{Field: "agent.name", Msg: "required"}
	}
	agent, ok := d.cfg.Agents.Get(req.Agent.Name)
	if !ok {
		return &aap.Error{Field: "agent.name", Msg: fmt.Sprintf("unknown agent %q (this server has %s)",
			req.Agent.Name, strings.Join(quote(d.cfg.Agents.Names()), ", "))}
	}
	if err := aap.ValidateCreateSession(req, agent.Info); err != nil {
		return err
	}
	plain, secret := agent.SplitOptions(req.Agent.Options)
	sess, replayed, err := d.cfg.Runner.CreateSession(r.Context(), store.SessionCreateParams{
		TenantID:       httpapi.TenantOf(r),
		Owner:          httpapi.OwnerOf(r),
		AgentName:      agent.Info.Name,
		AgentTools:     req.Agent.Tools,
		Options:        plain,
		SecretOptions:  secret,
		ClientTools:    req.Tools,
		Messages:       req.Messages,
		Pending:        aap.PendingFromHistory(req.Messages, req.Tools),
		IdempotencyKey: key,
		RequestHash:    hash,
	})
	if err != nil {
		return err
	}
	if replayed {
		w.Header().Set(httpapi.ReplayedHeader, "true")
	}
	w.Header().Set("Location", "/sessions/"+sess.ID)
	logctx.FromContext(r.Context()).SetSession(sess.ID)
	return httpapi.WriteJSON(w, http.StatusCreated, aap.CreateSessionResponse{SessionID: sess.ID})
}

// getSession is GET /sessions/:id.
func (d *Door) getSession(w http.ResponseWriter, r *http.Request) error {
	id, err := sessionID(r)
	if err != nil {
		return err
	}
	sess, err := d.cfg.Store.SessionGetOwned(r.Context(), httpapi.TenantOf(r), httpapi.OwnerOf(r), id)
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, sessionRecord(sess))
}

// listSessions is GET /sessions: newest first, paged by an opaque cursor.
// ?owner= (extension) lists one end user's sessions; an end user's listing
// is always of their own, and asking for another's is an empty one.
func (d *Door) listSessions(w http.ResponseWriter, r *http.Request) error {
	q, err := httpapi.Query(r)
	if err != nil {
		return err
	}
	limit, err := pageLimit(q)
	if err != nil {
		return err
	}
	owner := httpapi.OwnerOf(r)
	if asked, ok := q["owner"]; ok {
		if len(asked) != 1 || !auth.ValidOwner(asked[0]) {
			return &aap.Error{Field: "owner", Msg: "must be one end user's subject (a token's sub: 1 to 255 bytes, no control characters)"}
		}
		if owner != "" && asked[0] != owner {
			return httpapi.WriteJSON(w, http.StatusOK, SessionList{Sessions: []SessionRecord{}})
		}
		owner = asked[0]
	}
	page, err := d.cfg.Store.SessionList(r.Context(), store.SessionListParams{
		TenantID: httpapi.TenantOf(r), Owner: owner, After: q.Get("after"), Limit: limit,
	})
	if errors.Is(err, store.ErrBadCursor) {
		return badCursor()
	}
	if err != nil {
		return err
	}
	out := SessionList{Sessions: make([]SessionRecord, len(page.Sessions)), Next: page.Next}
	for i, sess := range page.Sessions {
		out.Sessions[i] = sessionRecord(sess)
	}
	return httpapi.WriteJSON(w, http.StatusOK, out)
}

// deleteSession is DELETE /sessions/:id. A turn running on the session is
// stopped; nothing of the session is left.
func (d *Door) deleteSession(w http.ResponseWriter, r *http.Request) error {
	id, err := sessionID(r)
	if err != nil {
		return err
	}
	if err := d.cfg.Runner.DeleteSession(r.Context(), httpapi.TenantOf(r), httpapi.OwnerOf(r), id); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// SessionRecord is a session as GET /sessions/:id and the list show it:
// its AAP shape, with extensions: the end user who owns it (docs/tenancy.md;
// absent for a session created with an API key), and what a dashboard
// shows without a call per session (docs/protocols.md): when it was created
// and last changed, and its status.
type SessionRecord struct {
	aap.SessionInfo
	Owner     string    `json:"owner,omitempty"`
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
	// Status is running, requires_action or idle (store.Session.Status).
	Status string `json:"status"`
	// Pending are the tool calls the session waits on the client for, so
	// that a client that lost its state can rebuild it (docs/protocols.md);
	// absent when there are none.
	Pending []PendingCall `json:"pending,omitempty"`
	// ForkedFrom names the session this one was forked from and its point
	// (docs/lifecycle.md); absent for a session that is not a fork.
	ForkedFrom *transfer.ForkedFrom `json:"forkedFrom,omitempty"`
}

// Awaiting values of PendingCall: what the client must send for the call.
const (
	// AwaitingResult: a client tool call, answered with a tool message.
	AwaitingResult = "result"
	// AwaitingPermission: an untrusted server tool call, answered with a
	// tool_permission message.
	AwaitingPermission = "permission"
)

// PendingCall is a tool call the session waits on the client for.
type PendingCall struct {
	ToolCallID string          `json:"toolCallId"`
	Name       string          `json:"name"`
	Input      json.RawMessage `json:"input"`
	// Awaiting is AwaitingResult or AwaitingPermission.
	Awaiting string `json:"awaiting"`
}

func pendingCalls(sess store.Session) []PendingCall {
	var out []PendingCall
	for _, p := range sess.AwaitingClient() {
		c := PendingCall{ToolCallID: p.ToolCallID, Name: p.Name, Input: p.Input, Awaiting: AwaitingResult}
		if len(c.Input) == 0 || string(c.Input) == "null" {
			c.Input = json.RawMessage(`{}`)
		}
		if p.Server {
			c.Awaiting = AwaitingPermission
		}
		out = append(out, c)
	}
	return out
}

// SessionList is the body of GET /sessions: aap.SessionList of records.
type SessionList struct {
	Sessions []SessionRecord `json:"sessions"`
	Next     string          `json:"next,omitempty"`
}

func sessionRecord(sess store.Session) SessionRecord {
	rec := SessionRecord{SessionInfo: sess.RedactedInfo(), Owner: sess.Owner,
		CreatedAt: sess.CreatedAt.UTC(), UpdatedAt: sess.UpdatedAt.UTC(), Status: sess.Status(), Pending: pendingCalls(sess)}
	if f := sess.ForkedFrom; f != nil {
		rec.ForkedFrom = &transfer.ForkedFrom{SessionID: f.SessionID, At: transfer.ForkAt{Message: f.Messages}}
	}
	return rec
}

// pageLimit reads the optional ?limit= of a list: DefaultPageLimit when
// absent, at most MaxPageLimit.
func pageLimit(q url.Values) (int, error) {
	v := q.Get("limit")
	if v == "" {
		return DefaultPageLimit, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > MaxPageLimit {
		return 0, &aap.Error{Field: "limit", Msg: fmt.Sprintf("must be a whole number from 1 to %d", MaxPageLimit)}
	}
	return n, nil
}

func badCursor() error {
	return &aap.Error{Field: "after", Msg: `not a cursor this server issued: pass the "next" value of a previous page`}
}

func quote(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = strconv.Quote(n)
	}
	return out
}
