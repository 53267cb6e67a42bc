// Package agui is aapd's AG-UI front door: POST /ag-ui/agents/{agent} takes
// an AG-UI RunAgentInput and answers with AG-UI events over Server-Sent
// Events, as the official @ag-ui/client HttpAgent expects.
//
// It is a translator over the turn pipeline and nothing more. A run is one
// AAP turn: the thread names a session (created on the thread's first run),
// the thread's messages that the session has not stored become the turn's
// messages (or, on the first run, its seed), the client's tools become its
// client tools, and the turn's AAP events become AG-UI events
// (translate.go). The rules of turns — claims, pending tool calls,
// validation — are the pipeline's (agents.Runner), as are the errors a run
// is refused with before it starts, which httpapi renders as problems.
// docs/protocols.md describes the door for its users.
package agui

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/mux"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/agents"
	"github.com/aapd/aapd/auth"
	"github.com/aapd/aapd/httpapi"
	"github.com/aapd/aapd/logctx"
	"github.com/aapd/aapd/store"
)

// Response headers naming where a run lives in aapd, for clients that also
// speak AAP (RUN_FINISHED's result says the same).
const (
	SessionIDHeader = "Aapd-Session-Id"
	TurnIDHeader    = "Aapd-Turn-Id"
)

// previousRunWait is how long a run waits for the previous run of its
// thread, still ending, before it is refused as running (409). A client
// that aborts a run and at once sends the next one — what an AG-UI chat's
// stop button then a new message do — finds its thread free, not busy,
// whichever replica each request reaches: a run of this process is waited
// for by its end, one of another replica polled every previousRunPoll.
const (
	previousRunWait = 5 * time.Second
	previousRunPoll = 50 * time.Millisecond
)

// Config configures a Handler.
type Config struct {
	Store  *store.Store
	Agents *agents.Registry
	Runner *agents.Runner
}

// Handler serves AG-UI runs.
type Handler struct {
	cfg  Config
	edge httpapi.Edge
	// live maps the turn of every run this process streams to a channel
	// closed once its end has been read, so that the thread's next run can
	// wait for it (previousRunWait).
	live sync.Map
}

// New returns a Handler; it serves once mounted (httpapi.Config.Doors).
func New(cfg Config) *Handler { return &Handler{cfg: cfg} }

// Path is where AG-UI runs are posted.
const Path = "/ag-ui/agents/{agent}"

// Mount registers the door's one route: a run changes its thread's session,
// so it needs sessions:write.
func (h *Handler) Mount(r *mux.Router, e httpapi.Edge) {
	h.edge = e
	r.Handle(Path, e.Guard(auth.ScopeSessionsWrite, h.Run)).Methods(http.MethodPost)
}

// Run is POST /ag-ui/agents/{agent}. It returns an error, for the server
// to answer as a problem, when the run is refused before it starts; once
// the stream has started every failure is a RUN_ERROR event.
func (h *Handler) Run(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	p, _ := auth.FromContext(ctx)
	body, err := h.edge.ReadBody(w, r)
	if err != nil {
		return err
	}
	in, err := decodeInput(body)
	if err != nil {
		return err
	}
	name := mux.Vars(r)["agent"]
	agent, ok := h.cfg.Agents.Get(name)
	if !ok {
		return &aap.Error{Field: "agent", Msg: fmt.Sprintf("unknown agent %q in the path (this server has %s)", name, strings.Join(quoted(h.cfg.Agents.Names()), ", "))}
	}
	mode, err := streamMode(agent.Info)
	if err != nil {
		return err
	}
	overrides, err := agentOverrides(in.ForwardedProps)
	if err != nil {
		return err
	}
	tools, err := clientTools(in.Tools)
	if err != nil {
		return err
	}

	var (
		sess   store.Session
		handle *agents.Handle
	)
	for attempt := 0; ; attempt++ {
		sess, handle, err = h.start(ctx, runParams{
			tenant: p.TenantID, owner: p.Owner(), in: in, agent: agent, mode: mode, overrides: overrides, tools: tools})
		// A run that raced another to create the thread's session runs on
		// the session the other created.
		if !errors.Is(err, store.ErrConflict) || attempt > 0 {
			break
		}
	}
	if err != nil {
		return err
	}
	logctx.FromContext(ctx).SetSession(sess.ID)
	logctx.FromContext(ctx).SetTurn(handle.Turn.ID)
	return h.stream(w, r, in, sess, handle)
}

// runParams is a run to start.
type runParams struct {
	tenant, owner string
	in            RunAgentInput
	agent         *agents.Agent
	mode          aap.StreamMode
	overrides     *aap.AgentOverrides
	tools         []aap.ToolSpec
}

// start finds or creates the thread's session and starts the run's turn.
func (h *Handler) start(ctx context.Context, rp runParams) (store.Session, *agents.Handle, error) {
	sess, fresh, err := h.thread(ctx, rp.tenant, rp.owner, rp.in.ThreadID, rp.agent.Info.Name)
	if err != nil {
		return store.Session{}, nil, err
	}
	stored := map[string]bool{}
	if !fresh {
		var ids []string
		for _, m := range rp.in.Messages {
			if !issued(m.ID) {
				ids = append(ids, m.ID)
			}
		}
		if stored, err = h.cfg.Store.MessageIDsStored(ctx, rp.tenant, sess.ID, ids); err != nil {
			return store.Session{}, nil, err
		}
	}
	pl, err := planRun(rp.in, stored, fresh)
	if err != nil {
		return store.Session{}, nil, err
	}
	req := aap.TurnRequest{Agent: rp.overrides, Stream: rp.mode, Messages: pl.turn, Tools: rp.tools}
	if len(rp.tools) == 0 && (fresh || len(sess.ClientTools) == 0) {
		req.Tools = nil // nothing to declare, nothing to take back
	}
	if fresh {
		if sess, err = h.create(ctx, rp, pl, req); err != nil {
			return store.Session{}, nil, err
		}
	}
	sp := agents.StartParams{
		TenantID: rp.tenant, SessionID: sess.ID, Owner: rp.owner, Request: req, MessageIDs: pl.turnIDs,
		RequestID: logctx.FromContext(ctx).RequestID(),
	}
	handle, err := h.cfg.Runner.Start(ctx, sp)
	var running *store.TurnRunningError
	if errors.As(err, &running) && h.waitPrevious(ctx, store.TurnRef{TenantID: rp.tenant, SessionID: sess.ID, TurnID: running.TurnID}) {
		handle, err = h.cfg.Runner.Start(ctx, sp)
	}
	return sess, handle, inputError(err, pl.turnFields)
}

// thread returns the session a thread names: a session id of the tenant's
// (visible to the caller), or the session created for the thread id. fresh
// reports a thread with no session yet.
func (h *Handler) thread(ctx context.Context, tenant, owner, threadID, agentName string) (sess store.Session, fresh bool, err error) {
	if store.ValidID("sess_", threadID) {
		sess, err = h.cfg.Store.SessionGetOwned(ctx, tenant, owner, threadID)
	} else {
		sess, err = h.cfg.Store.SessionGetByThread(ctx, tenant, owner, threadID)
		if errors.Is(err, store.ErrNotFound) {
			return store.Session{}, true, nil
		}
	}
	if err != nil {
		return store.Session{}, false, err
	}
	if sess.AgentName != agentName {
		return store.Session{}, false, &aap.Error{Field: "threadId", Msg: fmt.Sprintf(
			"thread %q is a conversation with agent %q, not %q: run it at /ag-ui/agents/%s", threadID, sess.AgentName, agentName, sess.AgentName)}
	}
	return sess, false, nil
}

// create makes the session of a thread's first run: the thread's messages
// before the turn's are its seed. The run is checked first, as the turn
// will check it, so that a run refused leaves no session behind.
func (h *Handler) create(ctx context.Context, rp runParams, pl plan, req aap.TurnRequest) (store.Session, error) {
	cfg := aap.AgentConfig{Name: rp.agent.Info.Name}
	if rp.overrides != nil {
		cfg.Tools, cfg.Options = rp.overrides.Tools, rp.overrides.Options
	}
	if err := aap.ValidateCreateSession(aap.CreateSessionRequest{Agent: cfg, Messages: pl.seed, Tools: rp.tools}, rp.agent.Info); err != nil {
		return store.Session{}, inputError(err, pl.seedFields)
	}
	if err := aap.ValidateTurn(req, cfg.Name, cfg.Tools, rp.agent.Info); err != nil {
		return store.Session{}, inputError(err, pl.turnFields)
	}
	plain, secret := rp.agent.SplitOptions(cfg.Options)
	sess, _, err := h.cfg.Runner.CreateSession(ctx, store.SessionCreateParams{
		TenantID: rp.tenant, Owner: rp.owner, AgentName: cfg.Name, AgentTools: cfg.Tools,
		Options: plain, SecretOptions: secret, ClientTools: rp.tools,
		Messages: pl.seed, MessageIDs: pl.seedIDs, Pending: aap.PendingFromHistory(pl.seed, rp.tools),
		ThreadID: rp.in.ThreadID,
	})
	return sess, err
}

// waitPrevious waits, for previousRunWait at most, for the end of the run
// whose turn holds the session, in whichever process runs it, and reports
// whether it ended. A turn whose record is gone has ended too: a database
// crash took it with its claim, or the session was deleted (the run, sent
// again, then learns so).
func (h *Handler) waitPrevious(ctx context.Context, ref store.TurnRef) bool {
	t := time.NewTimer(previousRunWait)
	defer t.Stop()
	if v, ok := h.live.Load(ref.TurnID); ok {
		select {
		case <-v.(chan struct{}):
			return true
		case <-t.C:
		case <-ctx.Done():
		}
		return false
	}
	for {
		select {
		case <-t.C:
			return false
		case <-ctx.Done():
			return false
		case <-time.After(previousRunPoll):
		}
		turn, err := h.cfg.Store.TurnGet(ctx, ref.TenantID, ref.SessionID, ref.TurnID)
		switch {
		case errors.Is(err, store.ErrNotFound):
			return true
		case err != nil:
			return false
		case turn.Status.Ended():
			return true
		}
	}
}

// streamMode picks how the turn streams: deltas if the agent can, whole
// messages otherwise.
func streamMode(info aap.AgentInfo) (aap.StreamMode, error) {
	switch {
	case info.SupportsStream(aap.StreamDelta):
		return aap.StreamDelta, nil
	case info.SupportsStream(aap.StreamMessage):
		return aap.StreamMessage, nil
	}
	return "", &aap.Error{Field: "agent", Msg: fmt.Sprintf("agent %q does not stream, and AG-UI runs are streams", info.Name)}
}

func quoted(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = fmt.Sprintf("%q", n)
	}
	return out
}
