package agents

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/store"
)

// CreateParams is a new session together with its first turn: what AAP
// v1's PUT /session asks for in one request, where AAP v3 takes two.
type CreateParams struct {
	TenantID string
	// Owner is the end user creating the session with a token; empty for
	// an API key.
	Owner string
	// Session is the session to create: its agent, client tools and seed
	// history, without the first turn's message.
	Session aap.CreateSessionRequest
	// First is the first turn: its message and stream mode.
	First aap.TurnRequest
	// IdempotencyKey, when set, makes a retry with the same key and
	// RequestHash replay both the session and its first turn.
	IdempotencyKey string
	RequestHash    []byte
	// RequestID is the id of the request, for the worker's log lines.
	RequestID string
	// Labels are stored with the first turn (StartParams.Labels).
	Labels map[string]string
	// ToolChoice forces the first turn's first model call to call a tool
	// (StartParams.ToolChoice).
	ToolChoice *ToolChoice
}

// CreateAndStart creates a session and starts its first turn, which then
// runs like any other (Start). The whole request is validated against the
// agent before anything is stored, seed and first message as one history.
// The session is created in its first turn's claim (StartParams.Create):
// a request refused (the tenant's limits, busy workers) or cut short (the
// process or its connection dying before the commit) leaves nothing, and
// never a session with its seed but without its turn. A retry with the
// same idempotency key replays the session's first turn.
func (r *Runner) CreateAndStart(ctx context.Context, p CreateParams) (*Handle, error) {
	if p.Session.Agent.Name == "" {
		return nil, &aap.Error{Field: "agent.name", Msg: "required"}
	}
	agent, ok := r.cfg.Agents.Get(p.Session.Agent.Name)
	if !ok {
		names := r.cfg.Agents.Names()
		for i, n := range names {
			names[i] = strconv.Quote(n)
		}
		return nil, &aap.Error{Field: "agent.name", Msg: fmt.Sprintf("unknown agent %q (this server has %s)",
			p.Session.Agent.Name, strings.Join(names, ", "))}
	}
	whole := p.Session
	whole.Messages = append(slices.Clip(p.Session.Messages), p.First.Messages...)
	if err := aap.ValidateCreateSession(whole, agent.Info); err != nil {
		return nil, err
	}
	if err := aap.ValidateTurn(p.First, agent.Info.Name, p.Session.Agent.Tools, agent.Info); err != nil {
		return nil, err
	}
	plain, secret := agent.SplitOptions(p.Session.Agent.Options)
	sp := StartParams{
		TenantID: p.TenantID, SessionID: store.NewSessionID(), Owner: p.Owner, Request: p.First,
		IdempotencyKey: p.IdempotencyKey, RequestHash: p.RequestHash, RequestID: p.RequestID, Labels: p.Labels,
		ToolChoice: p.ToolChoice,
		Create: &store.SessionCreateParams{
			TenantID: p.TenantID, Owner: p.Owner, AgentName: agent.Info.Name,
			AgentTools: p.Session.Agent.Tools, Options: plain, SecretOptions: secret,
			ClientTools: p.Session.Tools, Messages: p.Session.Messages,
			Pending:        aap.PendingFromHistory(p.Session.Messages, p.Session.Tools),
			IdempotencyKey: p.IdempotencyKey, RequestHash: p.RequestHash,
		},
	}
	h, err := r.Start(ctx, sp)
	var used *store.SessionKeyUsedError
	if errors.As(err, &used) {
		// The key's first request created its session with its turn: the
		// turn's own key replays it.
		sp.SessionID, sp.Create = used.SessionID, nil
		return r.Start(ctx, sp)
	}
	return h, err
}

// CreateSession stores a new session (store.Store.SessionCreate). The
// process remembers it as it remembers a session at the end of a turn, so
// that the session's first turn here claims it in one round trip.
func (r *Runner) CreateSession(ctx context.Context, p store.SessionCreateParams) (store.Session, bool, error) {
	sess, replayed, err := r.store.SessionCreate(ctx, p)
	if err != nil || replayed || sess.Version.IsZero() {
		return sess, replayed, err
	}
	history := make([]Message, len(p.Messages))
	for i, m := range p.Messages {
		history[i] = Message{Message: m}
	}
	seeded := int64(len(p.Messages))
	r.cache.put(cacheKey(sess.TenantID, sess.ID), 0, seeded, history,
		&store.KnownSession{Session: sess, LastSeq: seeded, Version: sess.Version})
	return sess, false, nil
}

// DeleteSession deletes a session of the tenant (of the end user owner, if
// not "") with its histories and turns, and stops the turn running on it:
// here at once, elsewhere through a notification (and, failing that, that
// process's next heartbeat). store.ErrNotFound if there is no such session.
func (r *Runner) DeleteSession(ctx context.Context, tenantID, owner, id string) error {
	active, err := r.store.SessionDeleteOwned(ctx, tenantID, owner, id)
	if err != nil {
		return err
	}
	r.cache.drop(cacheKey(tenantID, id))
	if active != "" && !r.Stop(active) {
		if err := r.store.Notify(ctx, store.CancelChannel, active); err != nil {
			r.log.WarnContext(ctx, "notify cancel", "turn", active, "err", err)
		}
	}
	return nil
}
