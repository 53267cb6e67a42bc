package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/agents"
	"github.com/aapd/aapd/httpapi"
	"github.com/aapd/aapd/logctx"
	"github.com/aapd/aapd/store"
)

// Options an agent may declare to take what a request sets: instructions
// (added to the agent's system prompt where it puts {{instructions}}) and
// max_output_tokens, each for one response (a response that sets none
// has the option's default). An agent without them refuses instructions
// and takes max_output_tokens without bounding anything by it.
const (
	optionInstructions    = "instructions"
	optionMaxOutputTokens = "max_output_tokens"
)

// createRequest is the body of POST /responses. Temperature, top_p,
// reasoning, text, truncation and user are accepted, kept and returned,
// and have no effect: the agent decides them. Members it does not name
// (include, …) are accepted and ignored.
type createRequest struct {
	Model              string            `json:"model"`
	Input              json.RawMessage   `json:"input"`
	Instructions       *string           `json:"instructions"`
	Conversation       json.RawMessage   `json:"conversation"`
	PreviousResponseID *string           `json:"previous_response_id"`
	Store              *bool             `json:"store"`
	Metadata           map[string]string `json:"metadata"`
	MaxOutputTokens    *int64            `json:"max_output_tokens"`
	Tools              *[]toolParam      `json:"tools"`
	ToolChoice         json.RawMessage   `json:"tool_choice"`
	ParallelToolCalls  *bool             `json:"parallel_tool_calls"`
	Stream             *bool             `json:"stream"`
	Background         *bool             `json:"background"`
	Temperature        *float64          `json:"temperature"`
	TopP               *float64          `json:"top_p"`
	Text               json.RawMessage   `json:"text"`
	Truncation         *string           `json:"truncation"`
	Reasoning          json.RawMessage   `json:"reasoning"`
	User               *string           `json:"user"`
}

// toolParam is a tool of a request: aapd takes functions.
type toolParam struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description *string         `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
}

// turnInput is what a request asks of a turn, decoded and checked.
type turnInput struct {
	req      createRequest
	agent    *agents.Agent
	messages []aap.Message
	tools    []aap.ToolSpec // nil: the session's stay
	options  map[string]string
	convID   string
	prev     string // previous_response_id
	store    bool
	stream   bool
	// background runs the turn as a background turn (docs/background.md),
	// answered at once.
	background bool
	// forked is set once the turn runs on a fork of the previous
	// response's session (it was not that session's latest).
	forked bool
	// choice is the call tool_choice forces (nil: none), and choiceParam
	// the parameter that forced it, named when the agent refuses it.
	choice      *agents.ToolChoice
	choiceParam string
}

// mode is the stream mode of the input's turn on agent a.
func (in *turnInput) mode(a *agents.Agent) aap.StreamMode {
	if in.stream {
		return streamMode(a, aap.StreamDelta)
	}
	return streamMode(a, aap.StreamNone)
}

// decode reads and checks a request's body.
func (d *Door) decode(body []byte) (*turnInput, error) {
	in := &turnInput{store: true}
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&in.req); err != nil {
		return nil, invalid("", "the body must be a JSON object of a response's parameters: %v", err)
	}
	req := &in.req
	if req.Store != nil {
		in.store = *req.Store
	}
	in.stream = req.Stream != nil && *req.Stream
	in.background = req.Background != nil && *req.Background
	if in.background && !in.store {
		return nil, invalid("background", "a background response is kept until read: it cannot be store false")
	}
	if len(req.Conversation) > 0 && string(req.Conversation) != "null" {
		var ref conversationRef
		if err := json.Unmarshal(req.Conversation, &in.convID); err != nil {
			if err := json.Unmarshal(req.Conversation, &ref); err != nil || ref.ID == "" {
				return nil, invalid("conversation", "must be a conversation id or {\"id\": …}")
			}
			in.convID = ref.ID
		}
	}
	if req.PreviousResponseID != nil {
		in.prev = *req.PreviousResponseID
	}
	switch {
	case in.convID != "" && in.prev != "":
		return nil, invalid("previous_response_id", "a response continues a conversation or a previous response, not both")
	case !in.store && (in.convID != "" || in.prev != ""):
		return nil, unsupported("store", "a response that keeps nothing (store false) cannot continue a conversation or a response: send the whole input instead")
	case req.Model == "" && in.convID == "" && in.prev == "":
		return nil, invalid("model", "required: the name of an aapd agent (%s)", d.agentNames())
	}
	if req.Model != "" {
		a, ok := d.cfg.Agents.Get(req.Model)
		if !ok {
			p := httpapi.NewProblem(http.StatusNotFound, "openai/model-not-found", "Not found",
				"the model %q does not exist: a model is an aapd agent (%s)", req.Model, d.agentNames())
			p.Field = "model"
			return nil, p
		}
		in.agent = a
	}
	if _, err := checkMetadata("metadata", req.Metadata); err != nil {
		return nil, err
	}
	items, err := inputItems(req.Input)
	if err != nil {
		return nil, err
	}
	if in.messages, err = toMessages("input", items); err != nil {
		return nil, err
	}
	if len(in.messages) == 0 {
		return nil, invalid("input", "required: the user's message, or the outputs of the function calls the response waits on")
	}
	if req.Tools != nil {
		in.tools = []aap.ToolSpec{}
		for i, t := range *req.Tools {
			spec, err := functionTool(i, t)
			if err != nil {
				return nil, err
			}
			in.tools = append(in.tools, spec)
		}
	}
	if err := in.toolChoice(req.ToolChoice); err != nil {
		return nil, err
	}
	return in, nil
}

// inputItems reads input: a string (a user message) or items.
func inputItems(raw json.RawMessage) ([]inputItem, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		text, _ := json.Marshal(s)
		return []inputItem{{Role: "user", Content: text}}, nil
	}
	var items []inputItem
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, invalid("input", "must be a string or a list of items: %v", err)
	}
	return items, nil
}

// functionTool is a function tool as an AAP client tool.
func functionTool(i int, t toolParam) (aap.ToolSpec, error) {
	field := "tools[" + strconv.Itoa(i) + "]"
	if t.Type != "function" {
		return aap.ToolSpec{}, unsupported(field+".type", "aapd takes function tools (its own tools are the agent's, shown as mcp_call items), not %q", t.Type)
	}
	if !aap.ValidToolName(t.Name) {
		return aap.ToolSpec{}, invalid(field+".name", "must be %s", aap.ToolNameRule)
	}
	spec := aap.ToolSpec{Name: t.Name, Parameters: t.Parameters}
	if t.Description != nil {
		spec.Description = *t.Description
	}
	if len(bytes.TrimSpace(spec.Parameters)) == 0 || string(spec.Parameters) == "null" {
		spec.Parameters = json.RawMessage(`{"type":"object","properties":{}}`)
	}
	var obj map[string]any
	if err := json.Unmarshal(spec.Parameters, &obj); err != nil {
		return aap.ToolSpec{}, invalid(field+".parameters", "must be a JSON Schema object")
	}
	return spec, nil
}

// toolChoice reads tool_choice: "auto" (the default), "none" (no function
// is offered to the model), allowed_tools (only the functions listed are
// offered), and the choices that force a call — "required", a function
// ({"type":"function","name":…}), allowed_tools in mode "required" — which
// set in.choice for the pipeline (agents.StartParams.ToolChoice) and
// in.choiceParam for its refusal by an agent that cannot force one.
func (in *turnInput) toolChoice(raw json.RawMessage) error {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		switch s {
		case "auto":
		case "none":
			in.tools = []aap.ToolSpec{}
		case "required":
			in.choice, in.choiceParam = &agents.ToolChoice{}, "tool_choice"
		default:
			return invalid("tool_choice", `must be "auto", "none", "required" or an object, not %q`, s)
		}
		return nil
	}
	var obj struct {
		Type  string `json:"type"`
		Name  string `json:"name"`
		Mode  string `json:"mode"`
		Tools []struct {
			Type string `json:"type"`
			Name string `json:"name"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil {
		return invalid("tool_choice", "must be a string or an object: %v", err)
	}
	switch obj.Type {
	case "function":
		if !aap.ValidToolName(obj.Name) {
			return invalid("tool_choice.name", "must be %s", aap.ToolNameRule)
		}
		in.choice, in.choiceParam = &agents.ToolChoice{Name: obj.Name}, "tool_choice"
		return nil
	case "allowed_tools":
	default:
		return unsupported("tool_choice.type", `aapd's tool choices are "auto", "none", "required", a function and allowed_tools (its own tools are the agent's), not %q`, obj.Type)
	}
	allowed := []string{}
	for i, t := range obj.Tools {
		if t.Type != "function" {
			return unsupported("tool_choice.tools["+strconv.Itoa(i)+"].type", "aapd's allowed tools are functions (its own tools are the agent's), not %q", t.Type)
		}
		allowed = append(allowed, t.Name)
	}
	switch obj.Mode {
	case "auto":
	case "required":
		in.choice, in.choiceParam = &agents.ToolChoice{Only: allowed}, "tool_choice.mode"
	default:
		return invalid("tool_choice.mode", `must be "auto" or "required", not %q`, obj.Mode)
	}
	offered := []aap.ToolSpec{}
	for _, t := range in.tools {
		if slices.Contains(allowed, t.Name) {
			offered = append(offered, t)
		}
	}
	in.tools = offered
	return nil
}

// refusal is the door's answer to a turn the pipeline refused: a tool
// choice the agent cannot honour is named as the request named it.
func (in *turnInput) refusal(err error) error {
	var tc *agents.ToolChoiceError
	switch {
	case !errors.As(err, &tc):
		return err
	case tc.Unsupported:
		return unsupported(in.choiceParam, "this tool_choice forces a call, which agent %q cannot: its model decides whether it calls a tool (docs/protocols.md names the agents that can)", tc.Agent)
	}
	return invalid(in.choiceParam, "%s", tc.Msg)
}

func (d *Door) agentNames() string {
	var b bytes.Buffer
	for i, n := range d.cfg.Agents.Names() {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Quote(n))
	}
	return b.String()
}

// options are the agent options a request sets: its instructions and
// max_output_tokens, where the agent declares options for them.
func (in *turnInput) optionsFor(a *agents.Agent) (map[string]string, error) {
	var opts map[string]string
	set := func(name, v string) {
		if opts == nil {
			opts = map[string]string{}
		}
		opts[name] = v
	}
	// Instructions hold for one response, as OpenAI's do: a response
	// without them sets the option back to the agent's default, so that
	// the previous response's are not carried over.
	switch o, takes := a.Info.Option(optionInstructions); {
	case in.req.Instructions != nil && *in.req.Instructions != "" && !takes:
		return nil, unsupported("instructions", "agent %q takes no instructions: its system prompt is its own (an agent takes them by declaring the option %q)", a.Info.Name, optionInstructions)
	case takes && in.req.Instructions != nil && *in.req.Instructions != "":
		set(optionInstructions, *in.req.Instructions)
	case takes:
		set(optionInstructions, o.Default)
	}
	if o, ok := a.Info.Option(optionMaxOutputTokens); ok {
		if in.req.MaxOutputTokens != nil {
			set(optionMaxOutputTokens, strconv.FormatInt(*in.req.MaxOutputTokens, 10))
		} else {
			set(optionMaxOutputTokens, o.Default)
		}
	}
	return opts, nil
}

// request is the AAP turn request of the input.
func (in *turnInput) request(a *agents.Agent, msgs []aap.Message, mode aap.StreamMode) (aap.TurnRequest, error) {
	opts, err := in.optionsFor(a)
	if err != nil {
		return aap.TurnRequest{}, err
	}
	req := aap.TurnRequest{Stream: mode, Messages: msgs, Tools: in.tools}
	if opts != nil {
		req.Agent = &aap.AgentOverrides{Options: opts}
	}
	return req, nil
}

// streamMode is the mode a turn of the agent records its events in: the
// one asked for if the agent supports it, else the nearest.
func streamMode(a *agents.Agent, want aap.StreamMode) aap.StreamMode {
	for _, m := range []aap.StreamMode{want, aap.StreamNone, aap.StreamMessage, aap.StreamDelta} {
		if a.Info.SupportsStream(m) {
			return m
		}
	}
	return want
}

// createResponse is POST /responses: a turn of the agent the model names,
// on the conversation named, on the session of the previous response, or
// on a new session (deleted once answered when store is false).
func (d *Door) createResponse(w http.ResponseWriter, r *http.Request) error {
	body, err := d.edge.ReadBody(w, r)
	if err != nil {
		return err
	}
	in, err := d.decode(body)
	if err != nil {
		return err
	}
	key, hash, err := d.edge.Idempotency(r, body)
	if err != nil {
		return err
	}
	if key == "" && in.prev != "" {
		// Continuing one response with one input is one request: a retry
		// of it replays the turn the first started (previous).
		key = derivedKey(hash)
	}
	var (
		h    *agents.Handle
		sess store.Session
	)
	if in.convID == "" && in.prev == "" {
		h, sess, err = d.startNew(r, in, key, hash)
	} else {
		h, sess, err = d.startOn(r, in, key, hash)
	}
	if err != nil {
		return in.refusal(err)
	}
	d.edge.Started(w, r, h)
	if !in.store {
		defer d.forget(r, sess)
	}
	if in.stream {
		return d.streamResponse(w, r, h, sess, in)
	}
	if in.background {
		return httpapi.WriteJSON(w, http.StatusOK, d.started(h, sess, in))
	}
	resp, err := d.respond(r.Context(), h, sess, in)
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, resp)
}

// forget deletes the session of a response not stored, once answered.
func (d *Door) forget(r *http.Request, sess store.Session) {
	err := d.cfg.Runner.DeleteSession(context.WithoutCancel(r.Context()), sess.TenantID, sess.Owner, sess.ID)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		d.edge.Logger().WarnContext(r.Context(), "delete the session of a response not stored", "session", sess.ID, "err", err)
	}
}

// startNew creates a session for the input and starts its turn: the input
// but its last user message (or its last function outputs) seeds it.
func (d *Door) startNew(r *http.Request, in *turnInput, key string, hash []byte) (*agents.Handle, store.Session, error) {
	a := in.agent
	msgs := in.messages
	n := len(msgs)
	switch last := msgs[n-1].Role; last {
	case aap.RoleUser:
		n--
	case aap.RoleTool, aap.RoleToolPermission:
		for n > 0 && (msgs[n-1].Role == aap.RoleTool || msgs[n-1].Role == aap.RoleToolPermission) {
			n--
		}
	default:
		return nil, store.Session{}, invalid("input", "the input must end with a user message or function_call_output items: there is nothing for the agent to answer")
	}
	req, err := in.request(a, msgs[n:], in.mode(a))
	if err != nil {
		return nil, store.Session{}, err
	}
	first := req
	first.Agent, first.Tools = nil, nil
	cfg := aap.AgentConfig{Name: a.Info.Name, Tools: serverTools(a)}
	if req.Agent != nil {
		cfg.Options = req.Agent.Options
	}
	if in.background {
		return d.startNewBackground(r, in, aap.CreateSessionRequest{Agent: cfg, Messages: msgs[:n], Tools: in.tools}, first, key, hash)
	}
	h, err := d.cfg.Runner.CreateAndStart(r.Context(), agents.CreateParams{
		TenantID: httpapi.TenantOf(r), Owner: httpapi.OwnerOf(r),
		Session: aap.CreateSessionRequest{Agent: cfg, Messages: msgs[:n], Tools: in.tools},
		First:   first, IdempotencyKey: key, RequestHash: hash, RequestID: httpapi.RequestID(r.Context()),
		Labels: in.labels(), ToolChoice: in.choice,
	})
	if err != nil {
		return nil, store.Session{}, err
	}
	logctx.FromContext(r.Context()).SetSession(h.Turn.SessionID)
	sess := store.Session{TenantID: h.Turn.TenantID, ID: h.Turn.SessionID, Owner: httpapi.OwnerOf(r), AgentName: a.Info.Name,
		ClientTools: in.tools, CreatedAt: h.Turn.CreatedAt}
	return h, sess, nil
}

// startOn starts the input's turn on the conversation named, or on the
// session of the previous response — its latest.
func (d *Door) startOn(r *http.Request, in *turnInput, key string, hash []byte) (*agents.Handle, store.Session, error) {
	if in.convID != "" && in.agent != nil {
		h, sess, err := d.startOnConversation(r, in, key, hash)
		if !errors.Is(err, errAgentUnset) {
			return h, sess, err
		}
	}
	var (
		sess store.Session
		err  error
	)
	if in.convID != "" {
		sess, err = d.session(r, in.convID, "conversation")
	} else {
		sess, err = d.previous(r, in, key)
	}
	if err != nil {
		return nil, store.Session{}, err
	}
	switch {
	case in.agent == nil:
	case sess.Labels[labelAgent] == agentUnset && in.agent.Info.Name != sess.AgentName:
		err := d.cfg.Store.SessionRebind(r.Context(), sess.TenantID, httpapi.OwnerOf(r), sess.ID, in.agent.Info.Name,
			serverTools(in.agent), map[string]string{labelAgent: "set"})
		if errors.Is(err, store.ErrSessionUsed) {
			return nil, store.Session{}, invalid("model", "conversation %s runs agent %q, not %q", sess.ID, sess.AgentName, in.agent.Info.Name)
		}
		if err != nil {
			return nil, store.Session{}, err
		}
		sess.AgentName = in.agent.Info.Name
	case in.agent.Info.Name != sess.AgentName:
		return nil, store.Session{}, keepsAgent(sess, in.agent)
	}
	a, ok := d.cfg.Agents.Get(sess.AgentName)
	if !ok {
		return nil, store.Session{}, fmt.Errorf("%w: %q", agents.ErrUnknownAgent, sess.AgentName)
	}
	in.agent = a
	req, err := in.request(a, in.messages, in.mode(a))
	if err != nil {
		return nil, store.Session{}, err
	}
	h, err := d.starter(in)(r.Context(), in.startParams(r, sess.TenantID, sess.ID, req, key, hash))
	if err != nil && in.forked {
		// The fork was made for this turn only.
		d.forget(r, sess)
	}
	if err != nil {
		return nil, store.Session{}, err
	}
	if in.tools != nil {
		sess.ClientTools = in.tools
	}
	return h, sess, nil
}

// errAgentUnset is a conversation's refusal of a model while it has no
// agent of its own yet (created without a model): startOn binds it first.
var errAgentUnset = errors.New("the conversation's agent is not set")

// startOnConversation starts the input's turn on the conversation named,
// with the model the request names, without reading the conversation
// first: the claim checks that it runs that agent (StartParams.Check),
// and the handle returns it as the claim left it. errAgentUnset when the
// conversation has no agent of its own yet.
func (d *Door) startOnConversation(r *http.Request, in *turnInput, key string, hash []byte) (*agents.Handle, store.Session, error) {
	id, a := in.convID, in.agent
	if !store.ValidID("sess_", id) {
		return nil, store.Session{}, notFound("conversation", "no conversation %q", id)
	}
	req, err := in.request(a, in.messages, in.mode(a))
	if err != nil {
		return nil, store.Session{}, err
	}
	p := in.startParams(r, httpapi.TenantOf(r), id, req, key, hash)
	p.Check = func(sess store.Session) error { return keepsAgent(sess, a) }
	h, err := d.starter(in)(r.Context(), p)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, store.Session{}, notFound("conversation", "no conversation %q", id)
	case err != nil:
		return nil, store.Session{}, err
	}
	logctx.FromContext(r.Context()).SetSession(id)
	if !h.Replay {
		return h, h.Session, nil
	}
	// A replay's turn was checked when it ran; the handle has no session.
	sess, err := d.session(r, id, "conversation")
	if err != nil {
		return nil, store.Session{}, err
	}
	if in.tools != nil {
		sess.ClientTools = in.tools
	}
	return h, sess, nil
}

// keepsAgent refuses a turn with agent a on a conversation that runs
// another: a conversation keeps its agent, but for one created without a
// model (errAgentUnset).
func keepsAgent(sess store.Session, a *agents.Agent) error {
	switch {
	case sess.AgentName == a.Info.Name:
		return nil
	case sess.Labels[labelAgent] == agentUnset:
		return errAgentUnset
	}
	return invalid("model", "conversation %s runs agent %q, not %q: a conversation keeps its agent", sess.ID, sess.AgentName, a.Info.Name)
}

// startParams are the runner's parameters of the input's turn on a
// session.
func (in *turnInput) startParams(r *http.Request, tenantID, sessionID string, req aap.TurnRequest, key string, hash []byte) agents.StartParams {
	return agents.StartParams{
		TenantID: tenantID, SessionID: sessionID, Owner: httpapi.OwnerOf(r), Request: req,
		IdempotencyKey: key, RequestHash: hash, RequestID: httpapi.RequestID(r.Context()), Labels: in.labels(),
		ToolChoice: in.choice,
	}
}

// starter is the runner's call that starts the input's turn: awaited
// (Run) when answered whole, streamed (Start), or in the background.
func (d *Door) starter(in *turnInput) func(context.Context, agents.StartParams) (*agents.Handle, error) {
	switch {
	case in.background:
		return d.cfg.Runner.StartBackground
	case in.stream:
		return d.cfg.Runner.Start
	}
	return d.cfg.Runner.Run
}

// previous resolves previous_response_id: the session of that response
// when it is the session's latest, or when the turn after it is this
// request's (a retry, told by its key); otherwise a fork of the session
// at that response's end (store.SessionFork), on which the turn runs.
func (d *Door) previous(r *http.Request, in *turnInput, key string) (store.Session, error) {
	id := in.prev
	sessionID, turnID, ok := parseResponseID(id)
	if !ok {
		return store.Session{}, notFound("previous_response_id", "no response %q", id)
	}
	sess, err := d.session(r, sessionID, "previous_response_id")
	if err != nil {
		return store.Session{}, notFound("previous_response_id", "no response %q", id)
	}
	page, err := d.cfg.Store.TurnList(r.Context(), store.TurnListParams{TenantID: sess.TenantID, SessionID: sess.ID, Limit: 1})
	if err != nil {
		return store.Session{}, err
	}
	if len(page.Turns) == 0 {
		return store.Session{}, notFound("previous_response_id", "no response %q", id)
	}
	if page.Turns[0].ID == turnID {
		return sess, nil
	}
	if _, err := d.cfg.Store.TurnGet(r.Context(), sess.TenantID, sess.ID, turnID); err != nil {
		return store.Session{}, notFound("previous_response_id", "no response %q", id)
	}
	if key != "" {
		switch _, err := d.cfg.Store.TurnGetByKey(r.Context(), sess.TenantID, sess.ID, key); {
		case err == nil:
			return sess, nil // the turn replays
		case !errors.Is(err, store.ErrNotFound):
			return store.Session{}, err
		}
	}
	fork, err := d.cfg.Store.SessionFork(r.Context(), store.SessionForkParams{
		TenantID: sess.TenantID, Owner: httpapi.OwnerOf(r), SessionID: sess.ID, Point: store.ForkPoint{TurnID: turnID},
		NewOwner: sess.Owner,
	})
	var conflict *store.PointConflictError
	if errors.As(err, &conflict) {
		p := httpapi.NewProblem(http.StatusConflict, slugNotLatest, "Conflict",
			"response %s is not the latest of its conversation, and the conversation cannot be continued from it: %s", id, conflict.Msg)
		p.Field = "previous_response_id"
		return store.Session{}, p
	}
	if err != nil {
		return store.Session{}, err
	}
	in.forked = true
	logctx.FromContext(r.Context()).SetSession(fork.ID)
	return fork, nil
}

// derivedKey is the idempotency key of a request that sent none, from
// the hash of its body and route.
func derivedKey(hash []byte) string { return fmt.Sprintf("openai-body-%x", hash[:16]) }

// respond waits for the turn's end and returns its response object.
func (d *Door) respond(ctx context.Context, h *agents.Handle, sess store.Session, in *turnInput) (*Response, error) {
	res, err := h.Result(ctx)
	if err != nil {
		return nil, err
	}
	resp := newResponse(sess.ID, h.Turn, in.agent.Info.Name)
	in.describe(resp)
	status := store.TurnCompleted
	if res.StopReason == aap.StopError {
		status = store.TurnFailed
	}
	resp.finish(res.StopReason, status, res.Error, res.Usage, outputOf(sess, in.agent, sess.ClientTools, res.Produced, res.StopReason))
	return resp, nil
}

// asked is what the request set that its response returns.
func (in *turnInput) asked() asked {
	req := in.req
	a := asked{Instructions: req.Instructions, MaxOutputTokens: req.MaxOutputTokens, Metadata: req.Metadata,
		ParallelToolCalls: req.ParallelToolCalls, PreviousResponseID: in.prev, Conversation: in.convID, NotStored: !in.store,
		Temperature: req.Temperature, TopP: req.TopP, User: req.User}
	if req.Tools != nil {
		a.Tools = *req.Tools
	}
	set := func(raw json.RawMessage) json.RawMessage {
		if len(raw) == 0 || string(raw) == "null" {
			return nil
		}
		return raw
	}
	a.ToolChoice, a.Text, a.Reasoning = set(req.ToolChoice), set(req.Text), set(req.Reasoning)
	if req.Truncation != nil {
		a.Truncation = *req.Truncation
	}
	return a
}

// labels are the turn's labels: what the request asked, kept so that
// the response is read later as it was answered (labelResponse).
func (in *turnInput) labels() map[string]string {
	b, err := json.Marshal(in.asked())
	if err != nil || string(b) == "{}" {
		return nil
	}
	return map[string]string{labelResponse: string(b)}
}

// describe sets what the request asked on its response object.
func (in *turnInput) describe(resp *Response) {
	a := in.asked()
	a.apply(resp)
}
