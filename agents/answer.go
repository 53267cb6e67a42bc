package agents

import (
	"context"
	"fmt"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/store"
)

// AnswerParams is one answer to a pending tool call of a session
// (Runner.Answer).
type AnswerParams struct {
	TenantID string
	// Owner confines the answer to a session of this end user ("" for
	// any): another's session is store.ErrNotFound.
	Owner     string
	SessionID string
	// Answer is a tool message (the result of a client tool's call) or a
	// tool_permission message (the permission of a server tool's call).
	Answer aap.Message
	// TrustTool, with a granted permission, also trusts the call's tool
	// for the rest of the session: its next calls run without asking.
	TrustTool bool
	// Stream is the stream mode of the turn the last answer starts.
	Stream    aap.StreamMode
	RequestID string
}

// Answer records one answer to the tool calls a session waits on. AAP
// answers all of them in one turn; a client that answers them one at a
// time (the sandbox-agent door's permission and question replies) has each
// kept on the session (store.Store.SessionAnswer) until the last, which
// starts the turn carrying them all — exactly the turn an AAP client would
// have sent, trust included — and returns its Handle. An answer that
// leaves calls unanswered returns a nil Handle.
//
// store.ErrNotPending: the session does not wait on the client for that
// call; *aap.Error: an answer of the wrong kind for its call;
// store.ErrSessionEnded, store.ErrNotFound; then Start's errors.
func (r *Runner) Answer(ctx context.Context, p AnswerParams) (*Handle, error) {
	trust := p.TrustTool && p.Answer.Role == aap.RoleToolPermission && p.Answer.Granted
	sess, answers, err := r.store.SessionAnswer(ctx, store.SessionAnswerParams{
		TenantID: p.TenantID, Owner: p.Owner, SessionID: p.SessionID,
		Answer: store.PendingAnswer{Message: p.Answer, TrustTool: trust},
		Check:  func(sess store.Session, _ []store.PendingAnswer) error { return checkAnswer(sess, p.Answer) },
	})
	if err != nil {
		return nil, err
	}
	awaiting := sess.AwaitingClient()
	if len(answers) < len(awaiting) {
		return nil, nil
	}
	names := make(map[string]string, len(awaiting))
	for _, c := range awaiting {
		names[c.ToolCallID] = c.Name
	}
	req := aap.TurnRequest{Stream: p.Stream}
	trusted := map[string]bool{}
	for _, a := range answers {
		req.Messages = append(req.Messages, a.Message)
		if a.TrustTool {
			trusted[names[a.Message.ToolCallID]] = true
		}
	}
	if len(trusted) > 0 {
		tools := make([]aap.ServerToolRef, len(sess.AgentTools))
		for i, t := range sess.AgentTools {
			tools[i] = aap.ServerToolRef{Name: t.Name, Trust: t.Trust || trusted[t.Name]}
		}
		req.Agent = &aap.AgentOverrides{Tools: tools}
	}
	return r.Start(ctx, StartParams{
		TenantID: p.TenantID, SessionID: p.SessionID, Owner: p.Owner, Request: req, RequestID: p.RequestID,
	})
}

// checkAnswer holds an answer to the session's state: it must answer a
// call the session waits on the client for, with the kind of message that
// call takes.
func checkAnswer(sess store.Session, m aap.Message) error {
	if sess.EndedAt != nil {
		return store.ErrSessionEnded
	}
	for _, c := range sess.AwaitingClient() {
		if c.ToolCallID != m.ToolCallID {
			continue
		}
		switch {
		case c.Server && m.Role != aap.RoleToolPermission:
			return &aap.Error{Field: "toolCallId", Msg: fmt.Sprintf("tool call %q of server tool %q awaits a permission, not a result", c.ToolCallID, c.Name)}
		case !c.Server && m.Role != aap.RoleTool:
			return &aap.Error{Field: "toolCallId", Msg: fmt.Sprintf("tool call %q of client tool %q awaits its result, not a permission", c.ToolCallID, c.Name)}
		}
		return nil
	}
	return fmt.Errorf("tool call %q: %w", m.ToolCallID, store.ErrNotPending)
}

// EndSession ends a session (store.Store.SessionEnd): no turn runs on it
// again, through any door. A turn running on it is cancelled, as
// POST /sessions/:id/turns/:turnId/cancel cancels it: here at once,
// elsewhere through its process. store.ErrNotFound for no such session.
func (r *Runner) EndSession(ctx context.Context, tenantID, owner, id string) error {
	active, _, err := r.store.SessionEnd(ctx, tenantID, owner, id)
	if err != nil {
		return err
	}
	r.cache.drop(cacheKey(tenantID, id))
	if active != "" {
		if _, err := r.store.TurnRequestCancel(ctx, store.TurnRef{TenantID: tenantID, SessionID: id, TurnID: active}); err != nil {
			return err
		}
		r.Cancel(active)
	}
	return nil
}
