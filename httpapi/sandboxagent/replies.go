package sandboxagent

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/gorilla/mux"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/agents"
	"github.com/aapd/aapd/httpapi"
	"github.com/aapd/aapd/store"
)

// Permission replies (PermissionReply).
const (
	replyOnce   = "once"
	replyAlways = "always"
	replyReject = "reject"
)

// replyPermission is POST .../permissions/{permission_id}/reply: the
// user's answer to a call of a server tool that waits for permission (the
// permission id is the call's id). once grants the call; always grants it
// and trusts its tool for the rest of the session; reject denies it. The
// answer is a tool_permission (agents.Runner.Answer): once every call the
// session waits on is answered, the turn that carries the answers runs.
func (d *Door) replyPermission(w http.ResponseWriter, r *http.Request) error {
	sess, _, err := d.session(r)
	if err != nil {
		return err
	}
	id := mux.Vars(r)["permission_id"]
	if !awaits(sess, id, true) {
		return httpapi.NotFound("session %s waits for no permission %q", sess.ID, id)
	}
	body, err := d.edge.ReadBody(w, r)
	if err != nil {
		return err
	}
	var req struct {
		Reply *string `json:"reply"`
	}
	if err := d.edge.Decode(body, &req); err != nil {
		return err
	}
	m := aap.Message{Role: aap.RoleToolPermission, ToolCallID: id}
	switch deref(req.Reply) {
	case replyOnce, replyAlways:
		m.Granted = true
	case replyReject:
	default:
		return &aap.Error{Field: "reply", Msg: fmt.Sprintf("must be %q, %q or %q", replyOnce, replyAlways, replyReject)}
	}
	return d.answer(w, r, sess, m, deref(req.Reply) == replyAlways)
}

// replyQuestion is POST .../questions/{question_id}/reply: the user's
// answer to a call of the question tool (agents.QuestionTool; the question
// id is the call's id), which becomes the call's result: each question's
// chosen answers joined with ", ", questions with "; ".
func (d *Door) replyQuestion(w http.ResponseWriter, r *http.Request) error {
	sess, id, err := d.question(r)
	if err != nil {
		return err
	}
	body, err := d.edge.ReadBody(w, r)
	if err != nil {
		return err
	}
	var req struct {
		Answers [][]string `json:"answers"`
	}
	if err := d.edge.Decode(body, &req); err != nil {
		return err
	}
	var picked []string
	for _, a := range req.Answers {
		if joined := strings.Join(a, ", "); joined != "" {
			picked = append(picked, joined)
		}
	}
	if len(picked) == 0 {
		return &aap.Error{Field: "answers", Msg: "pick or write at least one answer (to decline, reject the question)"}
	}
	return d.answer(w, r, sess, aap.ToolMessage(id, strings.Join(picked, "; ")), false)
}

// rejectQuestion is POST .../questions/{question_id}/reject: the call's
// result is an error, agents.QuestionDeclinedText.
func (d *Door) rejectQuestion(w http.ResponseWriter, r *http.Request) error {
	sess, id, err := d.question(r)
	if err != nil {
		return err
	}
	return d.answer(w, r, sess, aap.ToolMessage(id, agents.QuestionDeclinedText), false)
}

// question resolves the session and the pending question of the route.
func (d *Door) question(r *http.Request) (store.Session, string, error) {
	sess, _, err := d.session(r)
	if err != nil {
		return store.Session{}, "", err
	}
	id := mux.Vars(r)["question_id"]
	if !awaits(sess, id, false) {
		return store.Session{}, "", httpapi.NotFound("session %s waits for no answer to question %q", sess.ID, id)
	}
	return sess, id, nil
}

// awaits reports whether the session waits on the client for the call:
// a permission of a server tool's call, or the answer to a question.
func awaits(sess store.Session, id string, permission bool) bool {
	for _, c := range sess.AwaitingClient() {
		if c.ToolCallID == id {
			return c.Server == permission && (permission || c.Name == agents.QuestionToolName)
		}
	}
	return false
}

// answer records one answer (agents.Runner.Answer); the last one starts
// the turn (named in Aapd-Turn-Id). 204 either way.
func (d *Door) answer(w http.ResponseWriter, r *http.Request, sess store.Session, m aap.Message, trust bool) error {
	h, err := d.cfg.Runner.Answer(r.Context(), agents.AnswerParams{
		TenantID: sess.TenantID, Owner: httpapi.OwnerOf(r), SessionID: sess.ID, Answer: m, TrustTool: trust,
		Stream: d.streamMode(sess), RequestID: httpapi.RequestID(r.Context()),
	})
	if err != nil {
		return err
	}
	if h != nil {
		d.edge.Started(w, r, h)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// terminate is POST /v1/sessions/{session_id}/terminate: the session ends
// (agents.Runner.EndSession) — a running turn is cancelled, no turn runs
// on it again (a message is a 409), its log ends with session.ended
// (reason terminated, by the daemon). Terminating it again changes
// nothing.
func (d *Door) terminate(w http.ResponseWriter, r *http.Request) error {
	sess, _, err := d.session(r)
	if err != nil {
		return err
	}
	if err := d.cfg.Runner.EndSession(r.Context(), sess.TenantID, httpapi.OwnerOf(r), sess.ID); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
