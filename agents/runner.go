package agents

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/logctx"
	"github.com/aapd/aapd/store"
)

// Reasons a running turn is stopped before it ends by itself.
var (
	// ErrCancelled: the client cancelled the turn.
	ErrCancelled = errors.New("turn cancelled")
	// ErrShutdown: the server shut down before the turn could finish.
	ErrShutdown = errors.New("server shutting down")
	// ErrOverloaded: every worker is busy; retry shortly.
	ErrOverloaded = errors.New("all turn workers are busy")
	// ErrUnknownAgent: the session's agent is no longer served here.
	ErrUnknownAgent = errors.New("the session's agent is not served by this server")
)

// RunnerConfig configures a Runner.
type RunnerConfig struct {
	Store  *store.Store
	Agents *Registry
	// Owner returns this process's instance id, recorded on the claims of
	// the turns it runs.
	Owner func() int32
	// Workers bounds the turns running at once in this process; a tenant
	// below its fair share may overcommit it, up to twice (admission.go).
	Workers int
	// MaxRunningTurns returns how many turns the tenant may run at once in
	// this process (0: no limit). Nil means no tenant has a limit.
	MaxRunningTurns func(ctx context.Context, tenantID string) int
	// Lease is how long a claim holds without a heartbeat; heartbeats come
	// every third of it.
	Lease time.Duration
	// CommitRetry is how long a step keeps retrying while the database is
	// unavailable before the turn fails.
	CommitRetry time.Duration
	Logger      *slog.Logger
	// TracerProvider traces turns (trace.go); nil for none.
	TracerProvider trace.TracerProvider
	// Metrics are the turns' metrics (metrics.go); nil: metrics of its own,
	// registered nowhere. They serve one runner: it adds its history
	// cache's gauges to their registry.
	Metrics *Metrics
	// HistoryCacheBytes bounds the memory kept for the decoded histories of
	// recently active sessions (historycache.go), which spares their next
	// turns reading and decoding them; 0: DefaultHistoryCacheBytes.
	HistoryCacheBytes int64
	// MaxQueuedTurns returns how many background turns the tenant may have
	// waiting for a worker, across every process (0: no limit). Nil means
	// no tenant has a limit.
	MaxQueuedTurns func(ctx context.Context, tenantID string) int
	// MaxAttempts bounds the workers that may begin a background turn: one
	// whose process stopped that many times fails with attempts_exhausted
	// (background.go); 0: DefaultMaxAttempts.
	MaxAttempts int
}

// Runner is the worker pool that runs turns. A turn is claimed, run and
// ended by a worker of its own, on a context of the runner's, never the
// request's: a client that goes away, even while the claim commits, does
// not stop it.
type Runner struct {
	cfg     RunnerConfig
	store   *store.Store
	log     *slog.Logger
	metrics *Metrics
	admit   *admission
	cache   *historyCache
	// tracer starts the turns' spans (trace.go).
	tracer trace.Tracer

	// life is cancelled when the runner stops for good: at the end of
	// Shutdown's drain. Every worker's context derives from it.
	life    context.Context
	endLife context.CancelCauseFunc

	mu        sync.Mutex
	running   map[string]*activeTurn // by turn id
	stopping  atomic.Bool
	wg        sync.WaitGroup
	heartbeat sync.Once
	beatDone  chan struct{}
	// compacting serializes the compactions of a session (compact.go).
	compacting sessionLocks
	// wakes wakes the followers of a session's log (sessionlog.go).
	wakes sessionWakes
	// freed receives when a worker becomes free or a turn is queued here:
	// the queue's dispatcher looks for background turns to run (Freed).
	freed chan struct{}
}

type activeTurn struct {
	ref    store.TurnRef
	stream *Stream
	cancel context.CancelCauseFunc
	// ending is set once the turn's loop has returned: it is writing its
	// end, and the heartbeat leaves it alone.
	ending atomic.Bool
}

// NewRunner returns a runner; it starts no goroutine until a turn starts.
func NewRunner(cfg RunnerConfig) *Runner {
	if cfg.Workers <= 0 {
		cfg.Workers = 64
	}
	if cfg.Lease <= 0 {
		cfg.Lease = 30 * time.Second
	}
	if cfg.CommitRetry <= 0 {
		cfg.CommitRetry = 30 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	cfg.Logger = logctx.Wrap(cfg.Logger)
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics(nil)
	}
	if cfg.HistoryCacheBytes <= 0 {
		cfg.HistoryCacheBytes = DefaultHistoryCacheBytes
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = DefaultMaxAttempts
	}
	life, end := context.WithCancelCause(context.Background())
	r := &Runner{
		cfg: cfg, store: cfg.Store, log: cfg.Logger, metrics: cfg.Metrics,
		admit: newAdmission(cfg.Workers), cache: newHistoryCache(cfg.HistoryCacheBytes), tracer: newTracer(cfg.TracerProvider),
		life: life, endLife: end,
		running: map[string]*activeTurn{}, beatDone: make(chan struct{}), freed: make(chan struct{}, 1),
	}
	cfg.Metrics.watchHistoryCache(r.cache)
	cfg.Metrics.exportAgents(cfg.Agents)
	return r
}

// StartParams is a turn to start.
type StartParams struct {
	TenantID  string
	SessionID string
	// Owner confines the turn to a session of this end user ("" for any):
	// another's session is store.ErrNotFound.
	Owner   string
	Request aap.TurnRequest
	// MessageIDs are the client's ids of Request.Messages, index by index
	// ("" for none; nil for no ids at all), stored with the messages so that
	// a client that sends its whole thread again (AG-UI) can be told which
	// messages are new (store.Store.MessageIDsStored).
	MessageIDs     []string
	IdempotencyKey string
	RequestHash    []byte
	// Create, when set, is the session to create for the turn, with
	// SessionID as its id: it is created in the claim's transaction, so
	// that it exists with its first turn or not at all
	// (store.TurnBeginParams.Create). A creation key used before is a
	// *store.SessionKeyUsedError (CreateAndStart replays it).
	Create *store.SessionCreateParams
	// Labels are stored with the turn (store.Turn.Labels): what the door's
	// client set on it that AAP has no member for.
	Labels map[string]string
	// ToolChoice, when set, forces the turn's first model call to call a
	// tool (OpenAI's tool_choice "required", a function, or allowed_tools
	// in mode "required"); the calls after it are the model's to decide.
	// An agent whose model cannot force a call (CanForceToolCalls), or a
	// choice naming no tool the turn offers, is refused with a
	// *ToolChoiceError before anything is stored. It is kept with the
	// turn (LabelToolChoice), so a queued background turn is forced too.
	ToolChoice *ToolChoice
	// Check, when set, runs on the session as the claim reads it, before
	// anything is written: an error refuses the turn and is returned as
	// is. A door that would read the session first only to check it (that
	// it runs the agent its request names) checks it here, in the claim's
	// round trip. A replay is not checked: its turn was.
	Check func(store.Session) error

	// requestSpan is the span of the request that started the turn, the
	// turn's span's parent and link (trace.go).
	requestSpan trace.SpanContext
	// RequestID is the id of the request that starts the turn: the
	// worker's log lines carry it (logContext).
	RequestID string

	// awaited is true when the caller tells its client nothing before the
	// turn's end is written (Run): the claim need not wait for the disk
	// (store.TurnBeginParams.AsyncCommit).
	awaited bool
	// background makes it a background turn (StartBackground).
	background bool
}

// Handle is a started turn.
type Handle struct {
	Turn store.Turn
	// Events carries the turn's events, from turn_start to turn_stop.
	Events EventSource
	// Replay is true when an idempotency key matched an earlier turn: Events
	// replays that turn (following it if it still runs) and nothing new ran.
	Replay bool
	// Session is the session as the claim left it: the turn's client
	// tools, its owner, its agent (zero for a replay).
	Session store.Session
	// NextSeq is the seq the agent's first message of the turn takes in
	// the session's full history (0 for a replay): a door that names what
	// it streams by its place in the history names it before it is
	// stored.
	NextSeq int64

	runner *Runner
	run    *turnRun // nil for a replay
}

// Start claims the session and hands the turn to a worker, which runs it
// to its end. It returns once the claim is decided: *aap.Error for a
// request that breaks a protocol rule, *store.TurnRunningError while
// another turn runs, store.ErrNotFound for an unknown session,
// ErrTooManyTurns when the tenant runs as many turns as it may,
// ErrOverFairShare or ErrOverloaded when every worker is busy (see
// admission). The claim is made on the caller's goroutine but not under
// ctx: once sent, it is decided (and a turn claimed is run) whether or not
// the caller is still there to hear it.
func (r *Runner) Start(ctx context.Context, p StartParams) (*Handle, error) {
	return r.start(ctx, p, false)
}

// Run is Start for a caller that waits for the turn's end anyway (a stream
// "none" request): the turn runs on the caller's goroutine, and Run returns
// once its end is written, so Handle.Response answers at once. A turn
// costs one goroutine and its stack fewer this way, and its claim commits
// without waiting for the disk: the client hears of the turn only after
// its end's commit, which, WAL being flushed in order, makes the claim
// durable too.
func (r *Runner) Run(ctx context.Context, p StartParams) (*Handle, error) {
	return r.start(ctx, p, true)
}

func (r *Runner) start(ctx context.Context, p StartParams, inline bool) (*Handle, error) {
	if r.stopping.Load() {
		return nil, ErrShutdown
	}
	p.requestSpan = trace.SpanContextFromContext(ctx)
	p.awaited = inline
	release, err := r.admit.admit(p.TenantID, r.maxRunning(ctx, p.TenantID))
	if err != nil {
		return nil, err
	}
	return r.launch(&p, release, inline)
}

// launch claims the session for an admitted turn and runs it: on the
// caller's goroutine when inline, else in a worker of its own.
func (r *Runner) launch(p *StartParams, release func(), inline bool) (*Handle, error) {
	release = r.freeing(release)
	r.heartbeat.Do(func() { go r.heartbeatLoop() })
	r.wg.Add(1)
	h, t, err := r.begin(p)
	if t == nil {
		release()
		r.wg.Done()
		return h, err
	}
	if inline {
		defer r.wg.Done()
		defer release()
		t.execute(release)
		return h, nil
	}
	go func() {
		defer r.wg.Done()
		defer release()
		t.execute(release)
	}()
	return h, nil
}

// claimedTurn is a turn whose claim landed, not yet run.
type claimedTurn struct {
	runner *Runner
	ctx    context.Context
	cancel context.CancelCauseFunc
	span   trace.Span
	run    *turnRun
	active *activeTurn
}

// begin claims the session for a new turn. A turn to run comes with its
// claimedTurn; a replay has only its handle.
func (r *Runner) begin(p *StartParams) (*Handle, *claimedTurn, error) {
	ref := store.TurnRef{TenantID: p.TenantID, SessionID: p.SessionID, TurnID: store.NewTurnID()}
	life, span := r.startTurnSpan(p, ref)
	run, begun, err := r.claim(life, ref, p)
	traceClaim(span, run, begun, err)
	switch {
	case err != nil:
		span.End()
		return nil, nil, err
	case begun.Replay:
		span.End()
		return &Handle{Turn: begun.Turn, Events: r.Follow(begun.Turn.Ref()), Replay: true, runner: r}, nil, nil
	}
	life = logContext(life, p.RequestID, ref)
	if begun.Interrupted != "" {
		r.log.InfoContext(life, "took over the session of a dead turn", "interrupted_turn", begun.Interrupted)
	}
	t := r.claimed(life, span, run)
	return &Handle{Turn: begun.Turn, Events: r.Follow(ref), Session: begun.Session, NextSeq: begun.LastSeq + 1, runner: r, run: run}, t, nil
}

// claimed makes a turn whose claim landed one of the running turns, ready
// to execute.
func (r *Runner) claimed(life context.Context, span trace.Span, run *turnRun) *claimedTurn {
	ref := run.turn.Ref()
	turnCtx, cancel := context.WithCancelCause(life)
	active := &activeTurn{ref: ref, stream: run.stream, cancel: cancel}
	r.mu.Lock()
	r.running[ref.TurnID] = active
	r.mu.Unlock()
	r.wakeSession(ref.TenantID, ref.SessionID)
	return &claimedTurn{runner: r, ctx: turnCtx, cancel: cancel, span: span, run: run, active: active}
}

// execute runs the claimed turn to its end; release frees its worker slot
// as soon as the end is written.
func (t *claimedTurn) execute(release func()) {
	defer t.span.End() // a turn that ran ended it already (endTurnSpan)
	defer t.cancel(nil)
	t.runner.execute(t.ctx, t.run, t.active, release)
}

// claim claims the session for the turn. A claim whose commit went
// unanswered is looked for until the database answers: if it landed, the
// turn is run like any other.
func (r *Runner) claim(life context.Context, ref store.TurnRef, p *StartParams) (*turnRun, *store.TurnBegun, error) {
	key := cacheKey(ref.TenantID, ref.SessionID)
	cached := r.cache.get(key)
	params, prep := r.beginParams(ref, p)
	params.CachedVersion, params.CachedUpTo, params.Known = cached.version, cached.upTo, cached.known
	begun, err := r.begin1(life, ref, p, params)
	if err != nil || begun.Replay {
		return nil, begun, err
	}
	agent, plan := prep.agent, prep.plan

	history := cached.messages
	if begun.HistoryWhole {
		history = nil
		r.cache.drop(key)
	}
	for _, m := range begun.History {
		history = append(history, Message{Message: m.Message, Extra: m.Extra})
	}
	run := &turnRun{
		runner: r, agent: agent, turn: begun.Turn, session: begun.Session,
		history: history, stream: newStream(), version: begun.CompactionVersion, lastSeq: begun.LastSeq,
		pending: begun.Session.Pending, pendingCommitted: begun.Session.Pending, done: make(chan struct{}),
		force: p.ToolChoice,
	}
	run.recorder = newRecorder(r.store, begun.Turn, run.stream, r.Running, func() { r.cancelTurn(ref.TurnID, store.ErrClaimLost) })
	for i, m := range begun.Appended {
		run.history = append(run.history, Message{Message: m.Message, Extra: m.Extra})
		// The tool messages the server wrote itself (denials, calls the
		// user moved past or whose turn died) are the turn's first
		// results: sent as tool_result events and in a stream "none"
		// answer, so a client that keeps its own copy of the history has
		// them too (docs/protocols.md).
		if plan.Messages[i].Origin != store.OriginClient {
			run.produced = append(run.produced, m.Message)
			run.producedSeqs = append(run.producedSeqs, m.Seq)
			run.emit(aap.ToolResultEvent(m.Message.ToolCallID, m.Message.Content))
		}
	}
	return run, begun, nil
}

// prepared is what a claim's Prepare decided, once it has run: the
// session's agent and the turn's plan.
type prepared struct {
	agent *Agent
	plan  store.TurnPlan
}

// beginParams are the claim of a new turn for p; prep holds what the
// claim's Prepare decides.
func (r *Runner) beginParams(ref store.TurnRef, p *StartParams) (params *store.TurnBeginParams, prep *prepared) {
	prep = &prepared{}
	return &store.TurnBeginParams{
		TenantID: ref.TenantID, SessionID: ref.SessionID, TurnID: ref.TurnID, Stream: p.Request.Mode(),
		Owner: r.cfg.Owner(), Lease: r.cfg.Lease, SessionOwner: p.Owner,
		IdempotencyKey: p.IdempotencyKey, RequestHash: p.RequestHash,
		AsyncCommit: p.awaited, Background: p.background, Create: p.Create, Labels: labelsWith(p.Labels, p.ToolChoice),
		Prepare: func(sess store.Session) (store.TurnPlan, error) {
			if p.Check != nil {
				if err := p.Check(sess); err != nil {
					return store.TurnPlan{}, err
				}
			}
			agent, ok := r.cfg.Agents.Get(sess.AgentName)
			if !ok {
				return store.TurnPlan{}, fmt.Errorf("%w: %q", ErrUnknownAgent, sess.AgentName)
			}
			plan, err := planTurn(agent, &sess, &p.Request, p.MessageIDs)
			if err == nil && p.ToolChoice != nil {
				err = checkToolChoice(agent, p.ToolChoice, &sess, &plan)
			}
			prep.agent, prep.plan = agent, plan
			return plan, err
		},
	}, prep
}

// begin1 writes a claim (store.TurnBegin). A claim whose commit went
// unanswered is looked for while the database answers within CommitRetry:
// if it landed, it is the turn's, like any other. A database that stays
// away that long makes it a 503 (ErrUnavailable), never a request that
// hangs until the database is back; a claim that did land is then left
// to its lease, as a dead process's is, and the client's retry with its
// Idempotency-Key finds its turn.
func (r *Runner) begin1(life context.Context, ref store.TurnRef, p *StartParams, params *store.TurnBeginParams) (*store.TurnBegun, error) {
	begun, err := r.store.TurnBegin(life, params)
	if errors.Is(err, store.ErrOutcomeUnknown) {
		var landed bool
		err = r.retry(life, r.cfg.CommitRetry, func() error {
			var err error
			landed, err = r.store.TurnClaimed(life, ref)
			return err
		})
		switch {
		case err != nil:
		case !landed:
			err = fmt.Errorf("begin turn on session %s: %w", ref.SessionID, store.ErrUnavailable)
		default:
			r.log.InfoContext(logContext(r.life, p.RequestID, ref), "a claim whose commit went unanswered had landed; running its turn")
		}
	}
	return begun, err
}

// liveStream returns the stream of a turn running in this process, if any.
func (r *Runner) liveStream(turnID string) *Stream {
	r.mu.Lock()
	defer r.mu.Unlock()
	if a, ok := r.running[turnID]; ok {
		return a.stream
	}
	return nil
}

// execute runs a turn to its end: the loop, then its end (last step,
// record, whole event log, release) in one write, and only then turn_stop
// is shown, so a client that sees it can send its next turn at once.
func (r *Runner) execute(ctx context.Context, run *turnRun, active *activeTurn, release func()) {
	started := time.Now()
	run.recorder.start(context.WithoutCancel(ctx))
	stop, err := run.run(ctx)
	active.ending.Store(true)
	run.recorder.stop()

	status := store.TurnCompleted
	cause := context.Cause(ctx)
	switch {
	case err == nil:
	case errors.Is(cause, ErrCancelled):
		status, stop, err = store.TurnCancelled, aap.StopEndTurn, nil
	case errors.Is(cause, ErrShutdown) && run.turn.Background:
		// Not interrupted: resumed by another process.
		r.handBack(ctx, run, release)
		return
	case errors.Is(cause, ErrShutdown), errors.Is(err, store.ErrClaimLost), errors.Is(cause, store.ErrClaimLost):
		status, stop = store.TurnInterrupted, aap.StopError
	default:
		status = store.TurnFailed
	}
	if err != nil {
		r.log.WarnContext(ctx, "turn ended with an error", "status", status, "err", err)
	}
	run.stop = stop
	if stop == aap.StopError {
		run.turnErr = turnError(status, cause, err)
		run.emit(aap.TurnStopError(*run.turnErr))
	} else {
		run.emit(aap.TurnStop(stop))
	}
	key := cacheKey(run.turn.TenantID, run.turn.SessionID)
	run.err = r.finish(ctx, run, status, stop)
	endTurnSpan(run, status, err)
	r.metrics.turnEnded(run.agent, status, run.stop, time.Since(started))
	// The turn is over: its worker slot is free, and it leaves the running
	// turns before its answer goes out.
	release()
	r.mu.Lock()
	delete(r.running, run.turn.ID)
	r.mu.Unlock()
	if run.err != nil {
		r.cache.drop(key)
		run.stream.abandon()
		close(run.done)
		return
	}
	run.stream.finish()
	r.cache.put(key, run.version, run.lastSeq, run.history, run.known())
	close(run.done)
	// The answer is out; compacting (perhaps with a model) follows it, in
	// the background: the caller may be the request's own goroutine (Run).
	if status == store.TurnCompleted && r.compactionDue(run) {
		compactCtx := detachedLogContext(r.lifeOf(run), ctx) // the runner's life, not the turn's
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			r.compactAfterTurn(compactCtx, run)
		}()
	}
}

// finish writes a turn's end, retrying until it lands, the turn is found
// to have lost its session, or the runner stops for good. A write the
// database refuses for any other reason is replaced by a bare record of the
// failure, so no turn is left running by its own process.
func (r *Runner) finish(logCtx context.Context, run *turnRun, status store.TurnStatus, stop aap.StopReason) error {
	events, recorded := run.stream.all()
	p := store.TurnFinishParams{
		Ref: run.turn.Ref(), Step: run.step + 1, FirstSeq: run.lastSeq + 1 - int64(len(run.final)),
		Messages: run.final, Pending: run.pending,
		Status: status, StopReason: stop, InputTokens: run.usage.InputTokens, OutputTokens: run.usage.OutputTokens,
		ContextTokens: run.contextTokens, ContextUpTo: run.contextUpTo, Events: events, Attempt: run.turn.Attempts,
	}
	if run.turnErr != nil {
		p.ErrorType, p.Error = run.turnErr.Type, run.turnErr.Message
	}
	life := r.lifeOf(run)
	err := r.retry(life, 0, func() (err error) {
		run.written, err = r.store.TurnFinish(life, p)
		return err
	})
	if err == nil || errors.Is(err, store.ErrClaimLost) || errors.Is(err, store.ErrUnavailable) || r.life.Err() != nil {
		if err != nil {
			r.log.WarnContext(logCtx, "record turn end", "err", err)
		}
		return err
	}
	r.log.ErrorContext(logCtx, "record turn end; recording a bare failure instead", "err", err)
	// Without its last step: the session waits on what it waited on after
	// the last step written.
	p.Messages, p.Pending, p.Status, p.StopReason = nil, run.pendingCommitted, store.TurnFailed, aap.StopError
	run.turnErr = &aap.TurnError{Type: aap.TurnErrorStorage, Message: "the turn's end could not be recorded; what it had committed before is kept"}
	p.ErrorType, p.Error = run.turnErr.Type, run.turnErr.Message
	// What a client may have seen (turn_start at least), then the end.
	shown := max(recorded, 1)
	p.Events = append(events[:shown:shown], aap.TurnStopError(*run.turnErr))
	run.stop = aap.StopError
	if err := r.retry(life, 0, func() (err error) {
		_, err = r.store.TurnFinish(life, p)
		return err
	}); err != nil {
		r.log.ErrorContext(logCtx, "record bare turn failure", "err", err)
		return err
	}
	return errors.New("the turn's end was recorded as a failure")
}

// commitStep stores a step, retrying while the database is unavailable,
// for CommitRetry at most.
func (r *Runner) commitStep(ctx context.Context, p store.TurnStepParams) error {
	p.Lease = r.cfg.Lease
	return r.retry(ctx, r.cfg.CommitRetry, func() error { return r.store.TurnCommitStep(ctx, p) })
}

// retry calls fn until it succeeds or fails with an error other than
// store.ErrUnavailable, ctx ends, or (when limit > 0) limit has passed.
// Every write of a turn may be retried: it is idempotent.
func (r *Runner) retry(ctx context.Context, limit time.Duration, fn func() error) error {
	deadline := time.Now().Add(limit)
	backoff := 50 * time.Millisecond
	for {
		err := fn()
		if err == nil || !errors.Is(err, store.ErrUnavailable) || (limit > 0 && time.Now().After(deadline)) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 2*time.Second)
	}
}

// heartbeatLoop renews the claims of every turn this process runs, all in
// one round trip each third of the lease, until the runner stops. A turn
// that lost its claim (its session was deleted, or it was taken over) is
// stopped; one asked to stop by another process is cancelled.
func (r *Runner) heartbeatLoop() {
	defer close(r.beatDone)
	t := time.NewTicker(r.cfg.Lease / 3)
	defer t.Stop()
	for {
		select {
		case <-r.life.Done():
			return
		case <-t.C:
		}
		r.mu.Lock()
		var refs []store.TurnRef
		for _, a := range r.running {
			if !a.ending.Load() {
				refs = append(refs, a.ref)
			}
		}
		r.mu.Unlock()
		if len(refs) == 0 {
			continue
		}
		held, cancel, err := r.store.TurnsHeartbeat(r.life, refs, r.cfg.Owner(), r.cfg.Lease)
		if err != nil {
			if r.life.Err() == nil {
				r.log.Warn("turn heartbeat", "turns", len(refs), "err", err)
			}
			continue
		}
		for _, ref := range refs {
			switch {
			case !held[ref.TurnID]:
				r.cancelTurn(ref.TurnID, store.ErrClaimLost)
			case cancel[ref.TurnID]:
				// The cancel notification was missed; the flag is not.
				r.cancelTurn(ref.TurnID, ErrCancelled)
			}
		}
	}
}

// cancelTurn stops a turn running in this process; it reports whether
// there was one.
func (r *Runner) cancelTurn(turnID string, cause error) bool {
	r.mu.Lock()
	a, ok := r.running[turnID]
	r.mu.Unlock()
	if ok && !(a.ending.Load() && errors.Is(cause, store.ErrClaimLost)) {
		a.cancel(cause)
	}
	return ok
}

// Cancel stops a turn running in this process at the client's request.
func (r *Runner) Cancel(turnID string) bool { return r.cancelTurn(turnID, ErrCancelled) }

// Stop stops a turn running in this process because its session is gone.
func (r *Runner) Stop(turnID string) bool { return r.cancelTurn(turnID, store.ErrClaimLost) }

// Shutdown stops taking turns and waits for the running ones to finish
// until ctx is done; then it stops the rest, which end with stop reason
// "error" and are recorded as interrupted, and waits for their ends to be
// written for a moment more.
func (r *Runner) Shutdown(ctx context.Context) error {
	r.stopping.Store(true)
	done := make(chan struct{})
	go func() {
		r.wg.Wait()
		close(done)
	}()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		r.mu.Lock()
		n := len(r.running)
		for _, a := range r.running {
			a.cancel(ErrShutdown)
		}
		r.mu.Unlock()
		err = fmt.Errorf("interrupted %d turns still running after the drain timeout", n)
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			err = fmt.Errorf("%w; some could not record their end", err)
		}
	}
	r.endLife(ErrShutdown)
	<-done
	r.heartbeat.Do(func() { close(r.beatDone) })
	<-r.beatDone
	return err
}

// Running reports how many turns run in this process.
func (r *Runner) Running() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.running)
}

// TurnResult is how a turn ended, for a door that shows more of it than
// AAP's stream "none" body: the messages the agent produced with their
// seqs in the session's full history, and the tokens the turn took.
type TurnResult struct {
	aap.TurnResponse
	// Produced are the messages of TurnResponse.Messages as stored.
	Produced []store.StoredMessage
	Usage    Usage
}

// Result waits for the turn to end, as Response does, and returns it with
// its messages' seqs and its usage: from memory for a turn run here, else
// from the database.
func (h *Handle) Result(ctx context.Context) (TurnResult, error) {
	resp, err := h.Response(ctx)
	if err != nil {
		return TurnResult{}, err
	}
	out := TurnResult{TurnResponse: resp}
	if h.run != nil && h.run.err == nil && len(h.run.producedSeqs) == len(resp.Messages) {
		out.Usage = h.run.usage
		out.Produced = make([]store.StoredMessage, len(resp.Messages))
		for i, m := range resp.Messages {
			out.Produced[i] = store.StoredMessage{Seq: h.run.producedSeqs[i], SourceSeq: h.run.producedSeqs[i], Message: m}
		}
		return out, nil
	}
	if out.Produced, err = h.runner.store.TurnMessages(ctx, h.Turn.TenantID, h.Turn.SessionID, h.Turn.ID); err != nil {
		return TurnResult{}, err
	}
	t, err := h.runner.store.TurnGet(ctx, h.Turn.TenantID, h.Turn.SessionID, h.Turn.ID)
	if err != nil {
		return TurnResult{}, err
	}
	out.Usage = Usage{InputTokens: t.InputTokens, OutputTokens: t.OutputTokens}
	return out, nil
}

// Response waits for the turn to end and returns the body of a stream
// "none" response: its stop reason and the messages the agent produced. A
// turn run here answers from memory; a replay, or a turn whose end this
// process could not write, from the database.
func (h *Handle) Response(ctx context.Context) (aap.TurnResponse, error) {
	if h.run != nil {
		select {
		case <-h.run.done: // an ended turn answers whatever ctx says
		default:
			select {
			case <-ctx.Done():
				return aap.TurnResponse{}, ctx.Err()
			case <-h.run.done:
			}
		}
		if h.run.err == nil {
			return aap.TurnResponse{StopReason: h.run.stop, Messages: h.run.produced, Error: h.run.turnErr}, nil
		}
	}
	var (
		last aap.Event
		pos  int
	)
	src := h.runner.Follow(h.Turn.Ref())
	for {
		events, done, err := src.Read(ctx, pos)
		if err != nil {
			return aap.TurnResponse{}, err
		}
		pos += len(events)
		if len(events) > 0 {
			last = events[len(events)-1]
		}
		if done {
			break
		}
	}
	stored, err := h.runner.store.TurnMessages(ctx, h.Turn.TenantID, h.Turn.SessionID, h.Turn.ID)
	if err != nil {
		return aap.TurnResponse{}, err
	}
	resp := aap.TurnResponse{StopReason: last.StopReason, Messages: make([]aap.Message, len(stored)), Error: last.Error}
	for i, m := range stored {
		resp.Messages[i] = m.Message
	}
	return resp, nil
}
