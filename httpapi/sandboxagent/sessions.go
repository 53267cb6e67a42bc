package sandboxagent

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"unicode"
	"unicode/utf8"

	"github.com/gorilla/mux"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/agents"
	"github.com/aapd/aapd/httpapi"
	"github.com/aapd/aapd/logctx"
	"github.com/aapd/aapd/store"
)

// Labels of a session created here (store.Session.Labels): what the
// client set that AAP has no member for, shown back by the listing.
const (
	labelAgentMode      = "agentMode"
	labelPermissionMode = "permissionMode"
	labelVariant        = "variant"
)

// Permission modes: bypass trusts every server tool of the agent for the
// session; default keeps AAP's rule (a call of an untrusted tool waits for
// the user's permission).
const (
	permissionDefault = "default"
	permissionBypass  = "bypass"
)

// maxNameLength bounds the id a client gives a session.
const maxNameLength = 256

// Listing sizes: GET /v1/sessions answers with the caller's newest
// sessions, DefaultListLimit of them unless ?limit= asks fewer.
const (
	DefaultListLimit = 100
	MaxListLimit     = 100
)

// session resolves the route's {session_id}: an aapd session id (sess_…)
// names that session, however it was created (over AAP v3 too); any other
// id names the session the caller created under it (its thread id, as an
// AG-UI thread names one: an end user's "s1" is not another's, nor the API
// keys'). Another tenant's session, or another end user's, is a 404.
func (d *Door) session(r *http.Request) (store.Session, string, error) {
	name := mux.Vars(r)["session_id"]
	tenant, owner := httpapi.TenantOf(r), httpapi.OwnerOf(r)
	var (
		sess store.Session
		err  error
	)
	switch {
	case store.ValidID("sess_", name):
		sess, err = d.cfg.Store.SessionGetOwned(r.Context(), tenant, owner, name)
	case validName(name) == nil:
		sess, err = d.cfg.Store.SessionGetByThread(r.Context(), tenant, owner, name)
	default:
		err = store.ErrNotFound
	}
	if errors.Is(err, store.ErrNotFound) {
		return store.Session{}, "", httpapi.NotFound("no session %q", name)
	}
	if err != nil {
		return store.Session{}, "", err
	}
	logctx.FromContext(r.Context()).SetSession(sess.ID)
	return sess, name, nil
}

// validName checks an id a client gives a new session.
func validName(name string) error {
	switch {
	case name == "" || len(name) > maxNameLength:
		return fmt.Errorf("must be 1 to %d bytes", maxNameLength)
	case len(name) > 5 && name[:5] == "sess_":
		return errors.New(`ids starting with "sess_" are aapd's session ids: choose another`)
	case !utf8.ValidString(name):
		// Ranged over, its bad bytes would read as U+FFFD, printable; as
		// text, PostgreSQL refuses them (a 500).
		return errors.New("must be UTF-8 text")
	}
	for _, c := range name {
		if !unicode.IsPrint(c) {
			return errors.New("must be printable text")
		}
	}
	return nil
}

// createRequest is a CreateSessionRequest.
type createRequest struct {
	Agent          *string `json:"agent"`
	AgentMode      *string `json:"agentMode"`
	AgentVersion   *string `json:"agentVersion"`
	Model          *string `json:"model"`
	PermissionMode *string `json:"permissionMode"`
	Variant        *string `json:"variant"`
}

// createSession is POST /v1/sessions/{session_id}: a new session of an
// aapd agent, named by the client's id among the caller's sessions (409
// session_already_exists when taken). It enables every server tool of the
// agent (trusted with permissionMode bypass) and declares the question
// tool (agents.QuestionTool) when the agent takes client tools.
func (d *Door) createSession(w http.ResponseWriter, r *http.Request) error {
	name := mux.Vars(r)["session_id"]
	if err := validName(name); err != nil {
		return &aap.Error{Field: "session_id", Msg: err.Error()}
	}
	body, err := d.edge.ReadBody(w, r)
	if err != nil {
		return err
	}
	var req createRequest
	if err := d.edge.Decode(body, &req); err != nil {
		return err
	}
	if req.Agent == nil || *req.Agent == "" {
		return &aap.Error{Field: "agent", Msg: "required: an agent of GET /v1/agents"}
	}
	a, ok := d.cfg.Agents.Get(*req.Agent)
	if !ok {
		return problem(http.StatusBadRequest, slugUnsupportedAgent, "unknown agent %q: this server runs %q", *req.Agent, d.cfg.Agents.Names())
	}
	labels := map[string]string{labelAgentMode: "default", labelPermissionMode: permissionDefault}
	if v := deref(req.AgentMode); v != "" {
		labels[labelAgentMode] = v
	}
	switch v := deref(req.PermissionMode); v {
	case "", permissionDefault, permissionBypass:
		if v != "" {
			labels[labelPermissionMode] = v
		}
	default:
		return problem(http.StatusBadRequest, slugModeNotSupported, "permissionMode %q is not supported: %q (AAP's rule: untrusted tools ask) or %q (every tool of the agent trusted)", v, permissionDefault, permissionBypass)
	}
	if v := deref(req.Variant); v != "" {
		labels[labelVariant] = v
	}
	options, err := modelOption(a, deref(req.Model))
	if err != nil {
		return err
	}
	cfg := aap.AgentConfig{Name: a.Info.Name, Options: options}
	for _, t := range a.Info.Tools {
		cfg.Tools = append(cfg.Tools, aap.ServerToolRef{Name: t.Name, Trust: labels[labelPermissionMode] == permissionBypass})
	}
	var tools []aap.ToolSpec
	if a.Info.AcceptsClientTools() {
		tools = []aap.ToolSpec{agents.QuestionTool()}
	}
	if err := aap.ValidateCreateSession(aap.CreateSessionRequest{Agent: cfg, Tools: tools}, a.Info); err != nil {
		return err
	}
	plain, secret := a.SplitOptions(cfg.Options)
	sess, _, err := d.cfg.Runner.CreateSession(r.Context(), store.SessionCreateParams{
		TenantID: httpapi.TenantOf(r), Owner: httpapi.OwnerOf(r), AgentName: a.Info.Name, AgentTools: cfg.Tools,
		Options: plain, SecretOptions: secret, ClientTools: tools, ThreadID: name, Labels: labels,
	})
	if errors.Is(err, store.ErrConflict) {
		return problem(http.StatusConflict, slugSessionExists, "session %q exists already", name)
	}
	if err != nil {
		return err
	}
	logctx.FromContext(r.Context()).SetSession(sess.ID)
	return writeJSON(w, map[string]any{"healthy": true, "nativeSessionId": sess.ID})
}

// modelOption returns the options that make a session run model: the
// agent's model option set to it. A model the agent cannot run is a 400.
func modelOption(a *agents.Agent, model string) (map[string]string, error) {
	if model == "" {
		return nil, nil
	}
	models, _ := modelsOf(a)
	o, hasOption := a.Info.Option(a.ModelOption)
	switch {
	case hasOption && a.ModelOption != "" && (o.Type != aap.OptionSelect || slices.Contains(models, model)):
		return map[string]string{a.ModelOption: model}, nil
	case slices.Contains(models, model):
		return nil, nil // the one model it runs
	}
	return nil, &aap.Error{Field: "model", Msg: fmt.Sprintf("agent %q runs %q, not %q", a.Info.Name, models, model)}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// sessionInfo is a SessionInfo.
type sessionInfo struct {
	SessionID       string `json:"sessionId"`
	Agent           string `json:"agent"`
	AgentMode       string `json:"agentMode"`
	PermissionMode  string `json:"permissionMode"`
	Ended           bool   `json:"ended"`
	EventCount      int64  `json:"eventCount"`
	Model           string `json:"model,omitempty"`
	NativeSessionID string `json:"nativeSessionId"`
	Variant         string `json:"variant,omitempty"`
}

// listSessions is GET /v1/sessions: the caller's newest sessions (an API
// key's: the tenant's; an end user's: their own), DefaultListLimit of them
// or ?limit= (1 to MaxListLimit) — never an unbounded read. Sessions made
// over other doors are listed by their aapd id.
func (d *Door) listSessions(w http.ResponseWriter, r *http.Request) error {
	q, err := httpapi.Query(r)
	if err != nil {
		return err
	}
	limit := DefaultListLimit
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxListLimit {
			return &aap.Error{Field: "limit", Msg: fmt.Sprintf("must be a whole number from 1 to %d", MaxListLimit)}
		}
		limit = n
	}
	owner := httpapi.OwnerOf(r)
	page, err := d.cfg.Store.SessionList(r.Context(), store.SessionListParams{TenantID: httpapi.TenantOf(r), Owner: owner, Limit: limit})
	if err != nil {
		return err
	}
	out := struct {
		Sessions []sessionInfo `json:"sessions"`
	}{Sessions: []sessionInfo{}}
	for _, sess := range page.Sessions {
		name := sess.ID
		// A name addresses the session only among its owner's.
		if sess.ThreadID != "" && sess.Owner == owner {
			name = sess.ThreadID
		}
		n, err := d.eventCount(r.Context(), sess, name)
		if err != nil {
			return err
		}
		out.Sessions = append(out.Sessions, d.info(sess, name, n))
	}
	return writeJSON(w, out)
}

// info is a session as the listing shows it.
func (d *Door) info(sess store.Session, name string, events int64) sessionInfo {
	info := sessionInfo{
		SessionID: name, Agent: sess.AgentName, Ended: sess.EndedAt != nil, EventCount: events, NativeSessionID: sess.ID,
		AgentMode: labelOr(sess, labelAgentMode, "default"), PermissionMode: labelOr(sess, labelPermissionMode, permissionDefault),
		Variant: sess.Labels[labelVariant],
	}
	if a, ok := d.cfg.Agents.Get(sess.AgentName); ok {
		_, info.Model = modelsOf(a)
		if v := sess.Options[a.ModelOption]; a.ModelOption != "" && v != "" {
			info.Model = v
		}
	}
	return info
}

func labelOr(sess store.Session, name, def string) string {
	if v := sess.Labels[name]; v != "" {
		return v
	}
	return def
}

// eventCount counts a session's events: the index tells most of it, and
// the turns it lacks are read (and indexed).
func (d *Door) eventCount(ctx context.Context, sess store.Session, name string) (int64, error) {
	r := d.newReader(sess, name, false)
	if _, err := r.seek(ctx, math.MaxInt64); err != nil {
		return 0, err
	}
	for {
		_, done, err := r.pull(ctx)
		if err != nil {
			return 0, err
		}
		if done {
			return r.next - 1, nil
		}
	}
}
