package agents

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aapd/aapd/aap"
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
	// Workers bounds the turns running at once in this process.
	Workers int
	// Lease is how long a claim holds without a heartbeat; heartbeats come
	// every third of it.
	Lease time.Duration
	// CommitRetry is how long a step keeps retrying while the database is
	// unavailable before the turn fails.
	CommitRetry time.Duration
	Logger      *slog.Logger
}

// Runner is the worker pool that runs turns. A turn runs on a context of
// the runner's, not the request's: a client that goes away does not stop it.
type Runner struct {
	cfg   RunnerConfig
	store *store.Store
	log   *slog.Logger
	slots chan struct{}

	mu       sync.Mutex
	running  map[string]*activeTurn // by turn id
	stopping atomic.Bool
	wg       sync.WaitGroup
	wakeups  wakeups
}

type activeTurn struct {
	stream *Stream
	cancel context.CancelCauseFunc
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
	return &Runner{
		cfg: cfg, store: cfg.Store, log: cfg.Logger,
		slots:   make(chan struct{}, cfg.Workers),
		running: map[string]*activeTurn{},
	}
}

// StartParams is a turn to start.
type StartParams struct {
	TenantID       string
	SessionID      string
	Request        aap.TurnRequest
	IdempotencyKey string
	RequestHash    []byte
}

// Handle is a started turn.
type Handle struct {
	Turn store.Turn
	// Events carries the turn's events, from turn_start to turn_stop.
	Events EventSource
	// Replay is true when an idempotency key matched an earlier turn: Events
	// replays that turn (following it if it still runs) and nothing new ran.
	Replay bool
}

// Start claims the session and starts the turn in a worker. It returns once
// the turn's incoming messages are stored: *aap.Error for a request that
// breaks a protocol rule, *store.TurnRunningError while another turn runs,
// store.ErrNotFound for an unknown session, ErrOverloaded when every worker
// is busy.
func (r *Runner) Start(ctx context.Context, p StartParams) (*Handle, error) {
	if r.stopping.Load() {
		return nil, ErrShutdown
	}
	select {
	case r.slots <- struct{}{}:
	default:
		return nil, ErrOverloaded
	}
	release := func() { <-r.slots }

	var agent *Agent
	params := store.TurnBeginParams{
		TenantID: p.TenantID, SessionID: p.SessionID, Stream: p.Request.Mode(),
		Owner: r.cfg.Owner(), Lease: r.cfg.Lease,
		IdempotencyKey: p.IdempotencyKey, RequestHash: p.RequestHash,
		Prepare: func(sess store.Session) (store.TurnPlan, error) {
			var ok bool
			if agent, ok = r.cfg.Agents.Get(sess.AgentName); !ok {
				return store.TurnPlan{}, fmt.Errorf("%w: %q", ErrUnknownAgent, sess.AgentName)
			}
			return planTurn(agent, sess, p.Request)
		},
	}
	begun, err := r.store.TurnBegin(ctx, params)
	if errors.Is(err, store.ErrConflict) && p.IdempotencyKey != "" {
		// A retry raced its original: the original's turn now exists.
		begun, err = r.store.TurnBegin(ctx, params)
	}
	if err != nil {
		release()
		return nil, err
	}
	if begun.Interrupted != "" {
		r.log.Info("took over the session of a dead turn", "session", p.SessionID, "interrupted_turn", begun.Interrupted)
	}
	ref := store.TurnRef{TenantID: p.TenantID, SessionID: p.SessionID, TurnID: begun.Turn.ID}
	if begun.Replay {
		release()
		return &Handle{Turn: begun.Turn, Events: r.Follow(ref), Replay: true}, nil
	}

	history, err := r.store.History(ctx, store.HistoryParams{
		TenantID: p.TenantID, SessionID: p.SessionID, Type: aap.HistoryCompacted})
	if err != nil {
		release()
		r.finish(context.WithoutCancel(ctx), &turnRun{turn: begun.Turn}, store.TurnFailed, aap.StopError, err,
			[]store.TurnEvent{{Seq: 1, Event: aap.TurnStart()}, {Seq: 2, Event: aap.TurnStop(aap.StopError)}})
		return nil, err
	}
	run := &turnRun{
		runner: r, agent: agent, turn: begun.Turn, session: begun.Session,
		history: make([]Message, len(history)), stream: newStream(), recorder: newRecorder(r.store, ref),
	}
	for i, m := range history {
		run.history[i] = Message{Message: m.Message, Extra: m.Extra}
		run.lastSeq = m.Seq
	}
	run.emit(aap.TurnStart())

	turnCtx, cancel := context.WithCancelCause(context.Background())
	r.mu.Lock()
	r.running[begun.Turn.ID] = &activeTurn{stream: run.stream, cancel: cancel}
	r.mu.Unlock()
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer release()
		defer cancel(nil)
		r.execute(turnCtx, run)
	}()
	return &Handle{Turn: begun.Turn, Events: run.stream}, nil
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

// execute runs a turn to its end: the loop, then its record, then the
// turn_stop event, in that order, so that a client seeing turn_stop can send
// its next turn at once.
func (r *Runner) execute(ctx context.Context, run *turnRun) {
	defer func() {
		r.mu.Lock()
		delete(r.running, run.turn.ID)
		r.mu.Unlock()
	}()
	// The heartbeat and the recorder live as long as the loop.
	helpers, stopHelpers := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		r.heartbeat(helpers, run)
	}()
	go func() {
		defer wg.Done()
		run.recorder.run(helpers)
	}()

	stop, err := run.run(ctx)
	stopHelpers()
	wg.Wait()

	status := store.TurnCompleted
	cause := context.Cause(ctx)
	switch {
	case err == nil:
	case errors.Is(cause, ErrCancelled):
		status, stop, err = store.TurnCancelled, aap.StopEndTurn, nil
	case errors.Is(cause, ErrShutdown), errors.Is(err, store.ErrClaimLost), errors.Is(cause, store.ErrClaimLost):
		status, stop = store.TurnInterrupted, aap.StopError
	default:
		status = store.TurnFailed
	}
	if err != nil {
		r.log.Warn("turn ended with an error", "session", run.turn.SessionID, "turn", run.turn.ID, "status", status, "err", err)
	}
	// The final events, turn_stop included, are recorded with the turn's
	// end; only then is turn_stop sent, so a client that sees it can send
	// its next turn at once.
	stopEvent := aap.TurnStop(stop)
	events := append(run.recorder.take(), store.TurnEvent{Seq: run.stream.Len() + 1, Event: stopEvent})
	r.finish(context.WithoutCancel(ctx), run, status, stop, err, events)
	run.stream.append(stopEvent)
	if status == store.TurnCompleted {
		r.compactAfterTurn(ctx, run)
	}
}

// finish records a turn's end and releases its session, retrying while the
// database is unavailable.
func (r *Runner) finish(ctx context.Context, run *turnRun, status store.TurnStatus, stop aap.StopReason, err error, events []store.TurnEvent) {
	turn := run.turn
	p := store.TurnFinishParams{
		TenantID: turn.TenantID, SessionID: turn.SessionID, TurnID: turn.ID,
		Status: status, StopReason: stop, InputTokens: run.usage.InputTokens, OutputTokens: run.usage.OutputTokens,
		ContextTokens: run.contextTokens, ContextUpTo: run.contextUpTo,
		Events: events,
	}
	if err != nil {
		p.Error = err.Error()
	}
	ferr := r.retry(ctx, func() error { return r.store.TurnFinish(ctx, p) })
	if ferr != nil {
		// The lease will expire and the next turn will record this one as
		// interrupted.
		r.log.Error("record turn end", "turn", turn.ID, "err", ferr)
	}
}

// commitStep stores a step, retrying while the database is unavailable.
func (r *Runner) commitStep(ctx context.Context, p store.TurnStepParams) ([]store.StoredMessage, error) {
	p.Lease = r.cfg.Lease
	var stored []store.StoredMessage
	err := r.retry(ctx, func() error {
		var err error
		stored, err = r.store.TurnCommitStep(ctx, p)
		return err
	})
	return stored, err
}

// retry calls fn until it succeeds, fails with an error other than
// store.ErrUnavailable, or CommitRetry has passed.
func (r *Runner) retry(ctx context.Context, fn func() error) error {
	deadline := time.Now().Add(r.cfg.CommitRetry)
	backoff := 100 * time.Millisecond
	for {
		err := fn()
		if err == nil || !errors.Is(err, store.ErrUnavailable) || time.Now().After(deadline) {
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

// heartbeat renews the turn's claim until ctx ends; a turn that lost its
// claim (its session was deleted, or it was taken over) is stopped.
func (r *Runner) heartbeat(ctx context.Context, run *turnRun) {
	t := time.NewTicker(r.cfg.Lease / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		cancelled, err := r.store.TurnHeartbeat(ctx, run.recorder.ref, r.cfg.Lease)
		if errors.Is(err, store.ErrClaimLost) {
			r.cancelTurn(run.turn.ID, store.ErrClaimLost)
			return
		}
		if cancelled {
			// The cancel notification was missed; the flag is not.
			r.cancelTurn(run.turn.ID, ErrCancelled)
		}
		if err != nil && ctx.Err() == nil {
			r.log.Warn("turn heartbeat", "turn", run.turn.ID, "err", err)
		}
	}
}

// cancelTurn stops a turn running in this process; it reports whether
// there was one.
func (r *Runner) cancelTurn(turnID string, cause error) bool {
	r.mu.Lock()
	a, ok := r.running[turnID]
	r.mu.Unlock()
	if ok {
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
// "error" and are recorded as interrupted.
func (r *Runner) Shutdown(ctx context.Context) error {
	r.stopping.Store(true)
	done := make(chan struct{})
	go func() {
		r.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
	}
	r.mu.Lock()
	n := len(r.running)
	for _, a := range r.running {
		a.cancel(ErrShutdown)
	}
	r.mu.Unlock()
	<-done
	return fmt.Errorf("interrupted %d turns still running after the drain timeout", n)
}

// Running reports how many turns run in this process.
func (r *Runner) Running() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.running)
}
