package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/aapd/aapd/aap"
)

// TurnStatus is the state of a turn's record.
type TurnStatus string

// Turn statuses. Every status but running is final.
const (
	TurnRunning     TurnStatus = "running"
	TurnCompleted   TurnStatus = "completed"
	TurnFailed      TurnStatus = "failed"
	TurnInterrupted TurnStatus = "interrupted"
	TurnCancelled   TurnStatus = "cancelled"
	// TurnQueued is a background turn waiting for a worker. It holds its
	// session as a running turn does (the database keeps it "running");
	// only its record says queued, until a worker begins it.
	TurnQueued TurnStatus = "queued"
)

// Ended reports whether the turn has ended: it is neither running nor
// queued.
func (s TurnStatus) Ended() bool { return s != TurnRunning && s != TurnQueued }

// ErrOutcomeUnknown: a write was sent but its answer was lost (the
// connection broke while it committed): it may or may not have landed.
// Every write of a turn can be asked again (TurnClaimed) or retried as it
// is: it is idempotent by construction.
var ErrOutcomeUnknown = errors.New("the write may or may not have committed")

// Turn is the record of one POST /sessions/:id/turns.
type Turn struct {
	TenantID   string
	SessionID  string
	ID         string
	Status     TurnStatus
	Stream     aap.StreamMode
	StopReason aap.StopReason
	// ErrorType and Error say why a turn failed: an aap.TurnError's type
	// and message ("" for a turn recorded before types were kept).
	ErrorType      string
	Error          string
	InputTokens    int64
	OutputTokens   int64
	IdempotencyKey string
	CreatedAt      time.Time
	FinishedAt     *time.Time
	// Background is true for a turn nobody waits on (docs/background.md):
	// queued when every worker is busy, resumed when its process dies.
	Background bool
	// Attempts counts the workers that began the turn: 0 while it is
	// queued, 1 once it runs, one more at each resumption. The turn's
	// writes carry it (TurnStepParams.Attempt), so that a worker taken
	// over writes nothing more.
	Attempts int
	// Labels are what a door's client set on the turn that AAP has no
	// member for (TurnBeginParams.Labels); nil for none.
	Labels map[string]string
}

// Ref names the turn.
func (t Turn) Ref() TurnRef {
	return TurnRef{TenantID: t.TenantID, SessionID: t.SessionID, TurnID: t.ID}
}

// NewTurnID returns an opaque, time-ordered turn id.
func NewTurnID() string { return "turn_" + mustV7() }

const turnColumns = `tenant_id::text, session_id, id, status, stream, coalesce(stop_reason, ''), coalesce(error_type, ''), coalesce(error, ''),
	input_tokens, output_tokens, coalesce(idempotency_key, ''), created_at, finished_at, background, attempts, labels`

func scanTurn(row interface{ Scan(...any) error }, extra ...any) (Turn, error) {
	var (
		t      Turn
		labels []byte
	)
	dst := []any{&t.TenantID, &t.SessionID, &t.ID, &t.Status, &t.Stream, &t.StopReason, &t.ErrorType, &t.Error,
		&t.InputTokens, &t.OutputTokens, &t.IdempotencyKey, &t.CreatedAt, &t.FinishedAt, &t.Background, &t.Attempts, &labels}
	err := row.Scan(append(dst, extra...)...)
	if t.Status == TurnRunning && t.Attempts == 0 {
		t.Status = TurnQueued
	}
	if err == nil {
		err = unmarshalAll(field{"labels", labels, &t.Labels})
	}
	return t, interpretError(err)
}

// TurnPlan is what a new turn changes in its session before the model runs.
type TurnPlan struct {
	// SetAgentTools replaces the enabled server tools with AgentTools.
	SetAgentTools bool
	AgentTools    []aap.ServerToolRef
	// SetOptions replaces the client-set options with Options and
	// SecretOptions (the caller merges by key).
	SetOptions    bool
	Options       map[string]string
	SecretOptions map[string]string
	// SetClientTools replaces the client tools with ClientTools.
	SetClientTools bool
	ClientTools    []aap.ToolSpec
	// Messages are appended to both histories: answers to pending tool
	// calls, the user's message.
	Messages []NewMessage
	// Pending replaces the session's pending tool calls.
	Pending []aap.PendingToolCall
	// Permissions are the permissions the turn answers calls with,
	// recorded on the turn (tool_permission messages are stored nowhere
	// else).
	Permissions []TurnPermission
}

// TurnPermission is a permission a turn was started with.
type TurnPermission struct {
	ToolCallID string `json:"toolCallId"`
	Granted    bool   `json:"granted"`
	// ForSession is true when the turn also trusted the call's tool for
	// the rest of the session.
	ForSession bool `json:"forSession,omitempty"`
}

// TurnBeginParams starts a turn.
type TurnBeginParams struct {
	TenantID  string
	SessionID string
	// TurnID is the new turn's id (NewTurnID), chosen by the caller so that
	// a claim whose commit went unanswered can be looked for (TurnClaimed).
	TurnID string
	Stream aap.StreamMode
	// Owner is the instance id of the process that will run the turn.
	Owner int32
	// SessionOwner confines the turn to a session of this end user ("" for
	// any): another's session is ErrNotFound, found in the claim's own
	// read, at no extra round trip.
	SessionOwner string
	// Lease is how long the claim holds without a heartbeat.
	Lease time.Duration
	// IdempotencyKey, when set, makes a retry with the same key and request
	// hash return the first turn instead of starting another.
	IdempotencyKey string
	RequestHash    []byte
	// CachedVersion and CachedUpTo describe the compacted history the caller
	// already holds: its compaction version and its last seq. When they are
	// still current, only the messages after CachedUpTo are read.
	CachedVersion int64
	CachedUpTo    int64
	// Known is the session as this process last wrote it (created it, or
	// ended a turn on it), if it remembers it. While the session's row is
	// still as that write left it, the claim reads nothing: it is one round
	// trip, and the caller's history (CachedVersion, CachedUpTo) is
	// current. Otherwise the claim reads the session as it is, as without
	// Known.
	Known *KnownSession
	// Prepare decides, from the session as it is inside the claiming
	// transaction, what the turn changes. An error aborts the turn and
	// changes nothing. It may be called twice: with Known's session, then,
	// if the row has changed since, with the session as read.
	Prepare func(Session) (TurnPlan, error)
	// AsyncCommit lets the claim's commit return before its WAL is on disk
	// (synchronous_commit off), saving a disk flush's wait per turn. Set it
	// only when nothing of the turn reaches its client before a later,
	// synchronous commit of the turn (its end): Postgres flushes WAL in
	// order, so that commit makes the claim durable too, and a crash before
	// it can lose the claim only while no client has been told of it.
	AsyncCommit bool
	// Background makes the turn a background turn: its claim also puts it
	// in the durable queue (turn_queue), from which another process
	// resumes it if this one dies (TurnAdopt).
	Background bool
	// Queued claims the session for a background turn that no worker runs
	// yet: the claim has no owner and no lease, and the turn's attempts are
	// 0, until a worker adopts it. MaxQueued, when above 0, refuses it with
	// a *QueueFullError once the tenant has that many turns waiting.
	Queued    bool
	MaxQueued int
	// Create, when set, creates the session the turn is claimed on, with
	// SessionID as its id, in the claim's own transaction
	// (turnBeginCreate): a session created for its first turn (AAP v1's
	// PUT /session) exists with that turn or not at all. Its TenantID is
	// the claim's.
	Create *SessionCreateParams
	// Labels are stored with the turn (Turn.Labels): what a door's client
	// set on it that AAP has no member for.
	Labels map[string]string
}

// KnownSession is a session as a write of this process left it: its
// creation, or the end of one of its turns.
type KnownSession struct {
	// Session, LastSeq and CompactionVersion are the row as that write
	// left it.
	Session           Session
	LastSeq           int64
	CompactionVersion int64
	// Version is the write's version: what SessionCreate or TurnFinish
	// returned.
	Version SessionVersion
}

// SessionVersion identifies one write of a session's row: the transaction
// that made it (the row's xmin, which every write changes) and the
// updated_at it set (so that a transaction id reused after wraparound
// cannot pass for it). The zero value matches no row.
type SessionVersion struct {
	xmin      string
	updatedAt time.Time
}

// IsZero reports whether v identifies no write.
func (v SessionVersion) IsZero() bool { return v.xmin == "" }

// TurnBegun is a turn that holds its session.
type TurnBegun struct {
	Turn Turn
	// Session is the session after the plan was applied.
	Session Session
	// Appended are the plan's messages as stored.
	Appended []StoredMessage
	// LastSeq is the session's last seq once Appended are stored.
	LastSeq int64
	// History is the compacted history before Appended: whole when
	// HistoryWhole, else only what follows the caller's CachedUpTo.
	History      []StoredMessage
	HistoryWhole bool
	// CompactionVersion is the version History belongs to.
	CompactionVersion int64
	// Interrupted is the id of a dead turn whose claim this turn took over.
	Interrupted string
	// Replay is true when the idempotency key matched an earlier turn: Turn
	// is that turn, and nothing was changed.
	Replay bool
}

// TurnBegin claims the session for a new turn, atomically: it fails with a
// *TurnRunningError while another live turn holds the session, records a
// turn whose process died as interrupted, applies the caller's plan, and
// stores the incoming messages, all in one transaction. The claim is a
// lease on the session row; no connection is held once this returns.
//
// With p.Known still current, the transaction is one round trip: its first
// statement claims the session only if the row is as Known says, and the
// rest write the turn (turnBeginKnown); an idempotency key is written with
// the turn, unique in its session, so a key used before voids the
// transaction. Otherwise, or when the key was used before, it takes two:
// read under lock (with the key's earlier turn), then write and commit
// (turnBeginRead).
//
// When the commit's answer is lost, the error wraps ErrOutcomeUnknown:
// TurnClaimed tells whether the claim landed, and if it did, the TurnBegun
// returned alongside the error is what it stored.
func (s *Store) TurnBegin(ctx context.Context, p *TurnBeginParams) (*TurnBegun, error) {
	out, err := s.turnBegin(ctx, p)
	if err != nil {
		return out, fmt.Errorf("begin turn on session %s: %w", p.SessionID, err)
	}
	return out, nil
}

func (s *Store) turnBegin(ctx context.Context, p *TurnBeginParams) (*TurnBegun, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, interpretError(err)
	}
	defer conn.Release()
	if p.Create != nil {
		return s.turnBeginCreate(ctx, conn, p)
	}
	if p.Known != nil && !p.Known.Version.IsZero() && !p.Queued {
		out, claimed, err := s.turnBeginKnown(ctx, conn, p)
		if claimed || err != nil {
			return out, err
		}
		// The session changed since this process last wrote it, or the
		// idempotency key names an earlier turn.
	}
	return s.turnBeginRead(ctx, conn, p, nil)
}

// claimInTx runs a claim (turnBeginRead) inside a transaction its caller
// began on the connection (a schedule's tick, schedulefire.go): no BEGIN is
// sent; a refusal (the session busy, the plan refused, the queue full)
// leaves the transaction open for the caller to write on or roll back;
// then's statements are written with the claim, before its COMMIT. On
// any other error the caller rolls back.
type claimInTx struct {
	then []batchStmt
}

// claimSetSQL is what a claim writes to the session's row: $1 tenant, $2
// session, $3 agent tools, $4 options, $5 sealed secret options, $6 client
// tools, $7 pending calls, $8 the turn, $9 the instance, $10 the lease in
// milliseconds, $11 the last seq. The answers collected for the pending calls
// (SessionAnswer) are cleared: the turn carries them, or closes the calls.
const claimSetSQL = `UPDATE sessions SET agent_tools = $3, options = $4, secret_options = $5, client_tools = $6,
			pending_tool_calls = $7, active_turn_id = $8, lease_owner = $9,
			lease_expires_at = now() + $10 * interval '1 millisecond', last_seq = $11, updated_at = now(),
			pending_answers = NULL
		WHERE tenant_id = $1 AND id = $2`

// claimWrite is a claim's writes, planned against one state of the session.
type claimWrite struct {
	sess    Session // after the plan
	setArgs []any   // claimSetSQL's arguments
	rows    messageRows
	// firstSeq is the seq of the plan's first message; lastSeq the
	// session's last seq after them.
	firstSeq, lastSeq int64
	// permissions is the plan's, recorded on the turn.
	permissions []TurnPermission
}

// planClaim runs the caller's Prepare against sess, whose last seq is
// lastSeq, and makes the claim's writes.
func (s *Store) planClaim(p *TurnBeginParams, sess *Session, lastSeq int64) (*claimWrite, error) {
	plan, err := p.Prepare(*sess)
	if err != nil {
		return nil, err
	}
	// The caller's session stays as it is; the claim's copy takes the plan.
	w := &claimWrite{sess: *sess, firstSeq: lastSeq + 1, lastSeq: lastSeq + int64(len(plan.Messages)), permissions: plan.Permissions}
	next := &w.sess
	applyPlan(next, plan)
	sealed, err := s.sealer.sealJSON(next.SecretOptions)
	if err != nil {
		return nil, fmt.Errorf("seal secret options: %w", err)
	}
	if w.rows, err = newMessageRows(lastSeq+1, plan.Messages); err != nil {
		return nil, err
	}
	// A queued turn's claim has no owner and no lease: no worker runs it.
	var owner, lease any = p.Owner, p.Lease.Milliseconds()
	if p.Queued {
		owner, lease = nil, nil
	}
	w.setArgs = []any{p.TenantID, p.SessionID, jsonOrNull(next.AgentTools), jsonObject(next.Options), sealed,
		jsonOrNull(next.ClientTools), jsonList(next.Pending), p.TurnID, owner, lease, w.lastSeq}
	next.ActiveTurnID = p.TurnID
	return w, nil
}

// queueTurn queues the claim's turn record and messages, and returns the
// index of the statement that returns the turn.
func (w *claimWrite) queueTurn(b *pgx.Batch, p *TurnBeginParams) (turnStmt int) {
	turnStmt = b.Len()
	var hash []byte
	if p.IdempotencyKey != "" {
		hash = p.RequestHash
	}
	attempts := 1
	if p.Queued {
		attempts = 0
	}
	b.Queue(`INSERT INTO turns (tenant_id, session_id, id, status, stream, owner, idempotency_key, request_hash, first_seq, background, attempts, permissions, labels)
		VALUES ($1, $2, $3, 'running', $4, $5, nullif($6, ''), $7, $8, $9, $10, $11, $12)
		RETURNING `+turnColumns,
		p.TenantID, p.SessionID, p.TurnID, p.Stream, w.setArgs[8], p.IdempotencyKey, hash, w.firstSeq, p.Background, attempts, jsonOrNull(w.permissions),
		jsonMapOrNull(p.Labels))
	if p.Background {
		b.Queue(`INSERT INTO turn_queue (tenant_id, session_id, turn_id) VALUES ($1, $2, $3)`, p.TenantID, p.SessionID, p.TurnID)
	}
	if len(w.rows.seqs) > 0 {
		full, fullArgs := w.rows.insert(p.TenantID, p.SessionID, &p.TurnID)
		compacted, compactedArgs := w.rows.insertCompacted(p.TenantID, p.SessionID)
		b.Queue(full, fullArgs...)
		b.Queue(compacted, compactedArgs...)
	}
	if len(w.rows.clientIDs) > 0 {
		ids, idArgs := w.rows.insertClientIDs(p.TenantID, p.SessionID)
		b.Queue(ids, idArgs...)
	}
	return turnStmt
}

// begun sets out to what the claim stores, as TurnBegin returns it;
// out.Turn keeps it should the commit's answer be lost.
func (w *claimWrite) begun(p *TurnBeginParams, out *TurnBegun) {
	out.Session, out.Appended, out.LastSeq = w.sess, w.rows.stored, w.lastSeq
	out.Turn = Turn{TenantID: p.TenantID, SessionID: p.SessionID, ID: p.TurnID, Status: TurnRunning,
		Stream: p.Stream, IdempotencyKey: p.IdempotencyKey, CreatedAt: time.Now(), Background: p.Background, Attempts: 1, Labels: p.Labels}
	if p.Queued {
		out.Turn.Status, out.Turn.Attempts = TurnQueued, 0
	}
}

// turnBeginKnown claims the session in one round trip if its row is as
// p.Known says (and it has not ended: a session ended while a turn of
// this process ran is known without its end): BEGIN, a guard that writes
// the claim only then and
// otherwise fails with division_by_zero, the turn and its messages,
// COMMIT. claimed is false when nothing was written: the guard refused, or
// a unique index did — the idempotency key's, for a key used before (the
// read under lock then replays its turn), or any other, which the read
// path meets and reports again.
func (s *Store) turnBeginKnown(ctx context.Context, conn *pgxpool.Conn, p *TurnBeginParams) (out *TurnBegun, claimed bool, err error) {
	k := p.Known
	w, err := s.planClaim(p, &k.Session, k.LastSeq)
	if err != nil {
		// Planned again against the session as read, which says whether
		// the request is wrong or the known session was stale.
		return nil, false, nil
	}
	b := &pgx.Batch{}
	queueBegin(b, p.TenantID)
	queueAsyncCommit(b, p)
	b.Queue(`WITH claim AS (
			`+claimSetSQL+`
			  AND xmin = $12::text::xid AND updated_at = $13 AND active_turn_id IS NULL AND ($14 = '' OR owner = $14)
			  AND ended_at IS NULL
			RETURNING 1
		)
		SELECT 1 / (SELECT count(*) FROM claim)`,
		append(w.setArgs, k.Version.xmin, k.Version.updatedAt, p.SessionOwner)...)
	turnStmt := w.queueTurn(b, p)
	b.Queue("COMMIT")
	out = &TurnBegun{CompactionVersion: k.CompactionVersion}
	w.begun(p, out)
	err = sendClaim(ctx, conn, b, turnStmt, out)
	var pgErr *pgconn.PgError
	switch {
	case err == nil:
		return out, true, nil
	case errors.As(err, &pgErr) && (pgErr.Code == "22012" || pgErr.Code == "23505"):
		return nil, false, nil
	case errors.Is(err, ErrOutcomeUnknown):
		return out, true, err
	}
	return nil, true, err
}

// turnBeginRead claims the session in two round trips: it reads the
// session under lock, with the idempotency key's turn and the compacted
// history the caller does not hold, then writes and commits.
func (s *Store) turnBeginRead(ctx context.Context, conn *pgxpool.Conn, p *TurnBeginParams, in *claimInTx) (*TurnBegun, error) {
	rollback := func() { _, _ = conn.Exec(context.WithoutCancel(ctx), "ROLLBACK") }
	if in != nil {
		rollback = func() {}
	}

	// Round trip 1: lock the session, look for the idempotency key, read
	// the compacted history the caller does not hold yet.
	read := &pgx.Batch{}
	if in == nil {
		queueBegin(read, p.TenantID)
	}
	read.Queue(`SELECT `+sessionColumns+`, last_seq, compaction_version, lease_expires_at, lease_owner, `+activeBackgroundSQL+`
		FROM sessions WHERE tenant_id = $1 AND id = $2 AND ($3 = '' OR owner = $3) FOR UPDATE`,
		p.TenantID, p.SessionID, p.SessionOwner)
	if p.IdempotencyKey != "" {
		read.Queue(`SELECT `+turnColumns+`, request_hash FROM turns
			WHERE tenant_id = $1 AND session_id = $2 AND idempotency_key = $3`, p.TenantID, p.SessionID, p.IdempotencyKey)
	}
	read.Queue(`SELECT seq, coalesce(source_seq, 0), message::text, extra::text FROM compacted_messages
		WHERE tenant_id = $1 AND session_id = $2
		  AND seq > (SELECT CASE WHEN compaction_version = $3 THEN $4::bigint ELSE 0 END
		             FROM sessions WHERE tenant_id = $1 AND id = $2)
		ORDER BY seq`, p.TenantID, p.SessionID, p.CachedVersion, p.CachedUpTo)
	if p.Queued && p.MaxQueued > 0 {
		queueQueuedCount(read, p.TenantID)
	}

	var (
		out          = &TurnBegun{}
		lastSeq      int64
		leaseExpires *time.Time
		leaseOwner   *int32
		background   bool
		prev         Turn
		prevHash     []byte
		prevErr      error
		queued       int
	)
	br := conn.SendBatch(ctx, read)
	var err error
	for i := 0; in == nil && i < beginLen && err == nil; i++ {
		_, err = br.Exec()
	}
	if err == nil {
		out.Session, err = s.scanSessionWith(br.QueryRow(), &lastSeq, &out.CompactionVersion, &leaseExpires, &leaseOwner, &background)
	}
	if err == nil && p.IdempotencyKey != "" {
		prev, prevErr = scanTurn(br.QueryRow(), &prevHash)
		if prevErr != nil && !errors.Is(prevErr, ErrNotFound) {
			err = prevErr
		}
	}
	if err == nil {
		var rows pgx.Rows
		if rows, err = br.Query(); err == nil {
			out.History, err = scanHistory(rows)
		}
	}
	if err == nil && p.Queued && p.MaxQueued > 0 {
		if _, err = br.Exec(); err == nil {
			err = br.QueryRow().Scan(&queued)
		}
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		rollback()
		return nil, interpretError(err)
	}
	// The cached history was current, and only what follows it was read,
	// unless a compaction moved the version: then all of it was.
	out.HistoryWhole = p.CachedUpTo == 0 || out.CompactionVersion != p.CachedVersion

	// With the session locked, a retry racing its original sees it.
	if p.IdempotencyKey != "" && prevErr == nil {
		rollback()
		if !bytes.Equal(prevHash, p.RequestHash) {
			return nil, ErrIdempotencyMismatch
		}
		return &TurnBegun{Turn: prev, Replay: true}, nil
	}
	if out.Session.ActiveTurnID != "" && background {
		// A background turn's claim is never taken over by another turn:
		// its process, dead or not, is replaced by another (TurnAdopt).
		rollback()
		return nil, &TurnRunningError{TurnID: out.Session.ActiveTurnID}
	}
	if out.Session.ActiveTurnID != "" {
		// A round trip more, only when a turn holds the session.
		expired, dead, err := claimState(ctx, conn, leaseExpires, leaseOwner)
		if err != nil {
			rollback()
			return nil, err
		}
		if !expired && !dead {
			rollback()
			return nil, &TurnRunningError{TurnID: out.Session.ActiveTurnID}
		}
		out.Interrupted = out.Session.ActiveTurnID
	}
	if p.Queued && p.MaxQueued > 0 && queued >= p.MaxQueued {
		rollback()
		return nil, &QueueFullError{Limit: p.MaxQueued}
	}
	w, err := s.planClaim(p, &out.Session, lastSeq)
	if err != nil {
		rollback()
		return nil, err
	}

	// Round trip 2: write and commit.
	write := &pgx.Batch{}
	queueAsyncCommit(write, p)
	if out.Interrupted != "" {
		if err := queueInterrupt(write, TurnRef{p.TenantID, p.SessionID, out.Interrupted}); err != nil {
			rollback()
			return nil, err
		}
	}
	write.Queue(claimSetSQL, w.setArgs...)
	turnStmt := w.queueTurn(write, p)
	scans := map[int]func(pgx.Row) error{turnStmt: func(row pgx.Row) error {
		t, err := scanTurn(row)
		if err == nil {
			out.Turn = t
		}
		return err
	}}
	if in != nil {
		for _, st := range in.then {
			queueStmt(write, scans, st)
		}
	}
	write.Queue("COMMIT")
	w.begun(p, out)
	if err := sendTx(ctx, conn, write, scans); err != nil {
		if errors.Is(err, ErrOutcomeUnknown) {
			return out, err
		}
		return nil, err
	}
	return out, nil
}

// queueAsyncCommit makes the claim's transaction commit without waiting
// for its WAL to reach disk, when p.AsyncCommit allows it.
func queueAsyncCommit(b *pgx.Batch, p *TurnBeginParams) {
	if p.AsyncCommit {
		b.Queue("SET LOCAL synchronous_commit TO off")
	}
}

// sendClaim sends a claim's writes, ending with COMMIT, and reads the turn
// record into out.Turn (sendTx).
func sendClaim(ctx context.Context, conn *pgxpool.Conn, b *pgx.Batch, turnStmt int, out *TurnBegun) error {
	return sendTx(ctx, conn, b, map[int]func(pgx.Row) error{turnStmt: func(row pgx.Row) error {
		t, err := scanTurn(row)
		if err == nil {
			out.Turn = t
		}
		return err
	}})
}

func applyPlan(sess *Session, plan TurnPlan) {
	if plan.SetAgentTools {
		sess.AgentTools = plan.AgentTools
	}
	if plan.SetOptions {
		sess.Options, sess.SecretOptions = plan.Options, plan.SecretOptions
	}
	if plan.SetClientTools {
		sess.ClientTools = plan.ClientTools
	}
	sess.Pending = plan.Pending
}

// TurnClaimed reports whether a turn exists: after a TurnBegin whose
// outcome is unknown, whether its claim landed.
func (s *Store) TurnClaimed(ctx context.Context, ref TurnRef) (bool, error) {
	var n int
	err := s.tenant(ref.TenantID).QueryRow(ctx, `SELECT count(*) FROM turns WHERE tenant_id = $1 AND session_id = $2 AND id = $3`,
		ref.TenantID, ref.SessionID, ref.TurnID).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("look for turn %s: %w", ref.TurnID, interpretError(err))
	}
	return n > 0, nil
}

// TurnStepParams commits one step of a running turn.
type TurnStepParams struct {
	Ref TurnRef
	// Step is the step's number, from 1, unique in its turn: a step whose
	// number the turn has reached already is not written again.
	Step int
	// FirstSeq is the seq of the first message: the session's last seq
	// after the turn's previous write, plus one.
	FirstSeq int64
	// Messages are appended to both histories.
	Messages []NewMessage
	// Pending replaces the session's pending tool calls.
	Pending []aap.PendingToolCall
	// Lease renews the claim.
	Lease time.Duration
	// Attempt is the turn's attempt that writes (Turn.Attempts when its
	// worker began it; 0 is taken as 1): a worker whose turn was resumed by
	// another since writes nothing.
	Attempt int
	// InputTokens and OutputTokens are the turn's usage so far, kept with
	// the step so that a resumed turn counts on from them.
	InputTokens  int64
	OutputTokens int64
}

// TurnCommitStep appends a step's messages and sets the pending tool calls
// in one transaction, one round trip (turnWrite), if the turn still holds
// its session (ErrClaimLost if not: nothing is written). Committing a step
// again after it landed changes nothing and succeeds: a retry after a lost
// answer is safe.
func (s *Store) TurnCommitStep(ctx context.Context, p TurnStepParams) error {
	rows, err := newMessageRows(p.FirstSeq, p.Messages)
	if err != nil {
		return err
	}
	guard := `
		WITH claim AS (
			UPDATE sessions SET last_seq = $4, pending_tool_calls = $5, updated_at = now(),
				lease_expires_at = now() + $6 * interval '1 millisecond'
			WHERE tenant_id = $1 AND id = $2 AND active_turn_id = $3
			RETURNING xmin, updated_at
		), turn AS (
			UPDATE turns SET step = $7, input_tokens = $9, output_tokens = $10
			WHERE tenant_id = $1 AND session_id = $2 AND id = $3 AND status = 'running' AND step < $7 AND attempts = $8
			  AND EXISTS (SELECT 1 FROM claim)
			RETURNING 1
		)
		` + guardResultSQL
	attempt := max(p.Attempt, 1)
	_, err = s.turnWrite(ctx, p.Ref, p.Step, attempt, rows, true, nil, guard, p.Ref.TenantID, p.Ref.SessionID, p.Ref.TurnID,
		p.FirstSeq+int64(len(p.Messages))-1, jsonList(p.Pending), p.Lease.Milliseconds(), p.Step, attempt, p.InputTokens, p.OutputTokens)
	if err != nil {
		return fmt.Errorf("commit step %d of turn %s: %w", p.Step, p.Ref.TurnID, err)
	}
	return nil
}

// turnWrite runs one of a turn's writes — a step, or its finish — as a
// transaction sent in one batch (one round trip, one commit): guard, a
// statement that updates the session and the turn, and fails with
// division_by_zero when the turn may not write (it no longer holds its
// session, or this step landed already), then the step's messages,
// appended to both histories with multi-row VALUES. On Citus
// (docs/citus.md) each statement is routed to the tenant's shard and the
// transaction commits there in one phase; one statement with the inserts
// in modifying CTEs would be planned in pieces and commit in two.
//
// When the guard refuses, the turn's record says why: the step landed
// already (a retry after a lost answer: success), or the claim is lost
// (ErrClaimLost). keepsClaim tells whether the write keeps the claim (a
// step: landed, it must still be held) or releases it (the finish). It
// returns the version of the session's row the write made (guardResultSQL),
// zero when it had landed before. The statements then follow the inserts,
// in the same transaction.
func (s *Store) turnWrite(ctx context.Context, ref TurnRef, step, attempt int, rows messageRows, keepsClaim bool, then []batchStmt, guard string, args ...any) (SessionVersion, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return SessionVersion{}, writeError(err)
	}
	defer conn.Release()
	b := &pgx.Batch{}
	queueBegin(b, ref.TenantID)
	guardStmt := b.Len()
	b.Queue(guard, args...)
	if len(rows.seqs) > 0 {
		full, fullArgs := rows.insert(ref.TenantID, ref.SessionID, &ref.TurnID)
		compacted, compactedArgs := rows.insertCompacted(ref.TenantID, ref.SessionID)
		b.Queue(full, fullArgs...)
		b.Queue(compacted, compactedArgs...)
	}
	var version SessionVersion
	scans := map[int]func(pgx.Row) error{guardStmt: func(row pgx.Row) error {
		var one int
		return row.Scan(&version.xmin, &version.updatedAt, &one)
	}}
	for _, st := range then {
		queueStmt(b, scans, st)
	}
	b.Queue("COMMIT")
	err = sendTx(ctx, conn, b, scans)
	var pgErr *pgconn.PgError
	switch {
	case err == nil:
		return version, nil
	case errors.Is(err, ErrOutcomeUnknown) || !errors.As(err, &pgErr) || pgErr.Code != "22012":
		return SessionVersion{}, err
	}
	// The guard refused: did this step land already, or is the claim lost?
	// A step landed by another attempt (the turn was resumed elsewhere) is
	// not this one's.
	var held bool
	var landed, attempts int
	check := &pgx.Batch{}
	queueBegin(check, ref.TenantID)
	check.Queue(`
		SELECT coalesce((SELECT active_turn_id = $3 FROM sessions WHERE tenant_id = $1 AND id = $2), false),
			coalesce((SELECT step FROM turns WHERE tenant_id = $1 AND session_id = $2 AND id = $3), -1),
			coalesce((SELECT attempts FROM turns WHERE tenant_id = $1 AND session_id = $2 AND id = $3), -1)`,
		ref.TenantID, ref.SessionID, ref.TurnID)
	check.Queue("COMMIT")
	err = sendTx(ctx, conn, check, map[int]func(pgx.Row) error{beginLen: func(row pgx.Row) error {
		return row.Scan(&held, &landed, &attempts)
	}})
	switch {
	case err != nil:
		return SessionVersion{}, writeError(err)
	case landed >= step && attempts == attempt && (held || !keepsClaim):
		return SessionVersion{}, nil
	}
	return SessionVersion{}, ErrClaimLost
}

// guardResultSQL ends a turn write's guard (turnWrite): it answers the
// version of the session's row the write made, from the guard's claim CTE,
// and fails with division_by_zero when its turn CTE updated no turn.
const guardResultSQL = `SELECT (SELECT xmin::text FROM claim), (SELECT updated_at FROM claim), 1 / (SELECT count(*) FROM turn)`

// refused reports whether err is the server refusing a statement of a
// transaction, which voids it. A server that ends the connection (a
// shutdown, a crash: FATAL or PANIC, or a connection error code) may do so
// after the COMMIT ran, its answer unsent: that is not a refusal, and
// neither is any error that is not the server's.
func refused(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	switch {
	case pgErr.Severity == "FATAL", pgErr.Severity == "PANIC",
		strings.HasPrefix(pgErr.Code, "08"), strings.HasPrefix(pgErr.Code, "57P"):
		return false
	}
	return true
}

// writeError interprets an error of one of a turn's writes: a lost answer
// is ErrOutcomeUnknown (retrying the write is safe).
func writeError(err error) error {
	var pgErr *pgconn.PgError
	if errors.Is(err, ErrClaimLost) || errors.As(err, &pgErr) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return interpretError(err)
	}
	err = interpretError(err)
	if errors.Is(err, ErrUnavailable) {
		return fmt.Errorf("%w: %w", ErrOutcomeUnknown, err)
	}
	return err
}

// TurnFinishParams ends a turn: its last step, its record, its whole event
// log and the release of its session, in one transaction.
type TurnFinishParams struct {
	Ref TurnRef
	// Step numbers this write like a step (see TurnStepParams): the number
	// after the turn's last committed step.
	Step int
	// FirstSeq, Messages and Pending are the turn's last step, as in
	// TurnStepParams; Messages may be empty.
	FirstSeq   int64
	Messages   []NewMessage
	Pending    []aap.PendingToolCall
	Status     TurnStatus
	StopReason aap.StopReason
	// ErrorType and Error say why the turn failed (aap.TurnError).
	ErrorType    string
	Error        string
	InputTokens  int64
	OutputTokens int64
	// Attempt is the turn's attempt that writes, as in TurnStepParams.
	Attempt int
	// ContextTokens are the input tokens the provider reported for the
	// turn's last model call, which saw the compacted history up to
	// ContextUpTo; zero when the provider reported none.
	ContextTokens int64
	ContextUpTo   int64
	// Events is the turn's whole event log, turn_start to turn_stop: it
	// replaces the batches recorded while the turn ran.
	Events []aap.Event
}

// TurnFinish records how a turn ended with its last step and releases its
// session, in one transaction (one round trip, one commit: turnWrite). It fails with
// ErrClaimLost if the turn no longer holds its session (it was taken over,
// cancelled by a deletion); finishing again after it landed changes nothing
// and succeeds. It returns the version of the session's row it wrote (see
// TurnBeginParams.Known), zero for a finish that had landed already.
func (s *Store) TurnFinish(ctx context.Context, p TurnFinishParams) (SessionVersion, error) {
	rows, err := newMessageRows(p.FirstSeq, p.Messages)
	if err != nil {
		return SessionVersion{}, err
	}
	log, err := encodeEvents(p.Events)
	if err != nil {
		return SessionVersion{}, err
	}
	guard := `
		WITH claim AS (
			UPDATE sessions SET active_turn_id = NULL, lease_owner = NULL, lease_expires_at = NULL,
				last_seq = $4, pending_tool_calls = $5, updated_at = now(),
				reported_tokens = CASE WHEN $6 > 0 THEN $6 ELSE reported_tokens END,
				reported_upto_seq = CASE WHEN $6 > 0 THEN $7 ELSE reported_upto_seq END
			WHERE tenant_id = $1 AND id = $2 AND active_turn_id = $3
			RETURNING xmin, updated_at, agent_name
		), turn AS (
			UPDATE turns SET status = $8, stop_reason = nullif($9, ''), error = nullif($10, ''), error_type = nullif($15, ''),
				input_tokens = $11, output_tokens = $12, finished_at = now(), step = $13, events = $14::json,
				pending = $5::json
			WHERE tenant_id = $1 AND session_id = $2 AND id = $3 AND status = 'running' AND step < $13 AND attempts = $16
			  AND EXISTS (SELECT 1 FROM claim)
			RETURNING created_at
		), usage AS (
			` + usageEndSQL + `
		), batches AS (
			DELETE FROM turn_event_batches WHERE tenant_id = $1 AND session_id = $2 AND turn_id = $3
			  AND EXISTS (SELECT 1 FROM turn)
		), queued AS (
			DELETE FROM turn_queue WHERE tenant_id = $1 AND session_id = $2 AND turn_id = $3
			  AND EXISTS (SELECT 1 FROM turn)
		)
		` + guardResultSQL
	attempt := max(p.Attempt, 1)
	// The turn's webhook event, in the same transaction (webhookoutbox.go).
	outbox, queued, err := s.turnEndOutbox(p)
	if err != nil {
		return SessionVersion{}, err
	}
	version, err := s.turnWrite(ctx, p.Ref, p.Step, attempt, rows, false, []batchStmt{outbox}, guard, p.Ref.TenantID, p.Ref.SessionID, p.Ref.TurnID,
		p.FirstSeq+int64(len(p.Messages))-1, jsonList(p.Pending), p.ContextTokens, p.ContextUpTo,
		p.Status, p.StopReason, PgText(p.Error), p.InputTokens, p.OutputTokens, p.Step, log, p.ErrorType, attempt)
	if err != nil {
		return SessionVersion{}, fmt.Errorf("finish turn %s: %w", p.Ref.TurnID, err)
	}
	if *queued {
		s.webhooksQueuedFor(p.Ref.TenantID)
	}
	return version, nil
}

// PgText makes a text storable in a Postgres text column: NUL characters
// (which Postgres cannot store) become U+FFFD, and so do bytes that are not
// UTF-8. A model's, a tool's or a client's words can end up in an error
// message; none of them may keep a record from being written.
func PgText(s string) string {
	if strings.IndexByte(s, 0) < 0 && utf8.ValidString(s) {
		return s
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}

// TurnsHeartbeat renews the claims of running turns, all in one round
// trip, and reports which still hold their session and which were asked to stop
// (see TurnRequestCancel). A turn missing from held has lost its session.
//
// Only a lease set more than a sixth of the lease ago is written: the
// runner beats every third of the lease, so a lease skipped now is renewed
// at the next beat with half of it still to run, and one missed beat
// leaves a sixth. A turn shorter than that (most are) is never rewritten
// after its claim, which spares the database a row version per running
// turn and beat, and keeps the session as the turn's end left it for the
// next claim's single round trip.
//
// owner is the instance the beating process runs its turns as: a turn
// resumed by another process since (TurnAdopt) is no longer held.
func (s *Store) TurnsHeartbeat(ctx context.Context, refs []TurnRef, owner int32, lease time.Duration) (held map[string]bool, cancel map[string]bool, err error) {
	// Statements per tenant, all in one batch: on Citus (docs/citus.md)
	// each goes to the tenant's shard, where one statement over every
	// tenant would be a two-phase commit on every worker, every few
	// seconds.
	type group struct{ sessions, turns []string }
	groups := map[string]*group{}
	var order []string
	for _, r := range refs {
		g := groups[r.TenantID]
		if g == nil {
			g = &group{}
			groups[r.TenantID] = g
			order = append(order, r.TenantID)
		}
		g.sessions, g.turns = append(g.sessions, r.SessionID), append(g.turns, r.TurnID)
	}
	b := &pgx.Batch{}
	for _, tenant := range order {
		g := groups[tenant]
		b.Queue(`UPDATE sessions s SET lease_expires_at = now() + $4 * interval '1 millisecond'
			FROM unnest($2::text[], $3::text[]) AS h(session_id, turn_id)
			WHERE s.tenant_id = $1 AND s.id = h.session_id AND s.active_turn_id = h.turn_id AND s.lease_owner = $5
			  AND s.lease_expires_at < now() + $4 * 5 / 6 * interval '1 millisecond'`, tenant, g.sessions, g.turns, lease.Milliseconds(), owner)
		b.Queue(`SELECT s.active_turn_id FROM sessions s, unnest($2::text[], $3::text[]) AS h(session_id, turn_id)
			WHERE s.tenant_id = $1 AND s.id = h.session_id AND s.active_turn_id = h.turn_id AND s.lease_owner = $4`, tenant, g.sessions, g.turns, owner)
		b.Queue(`SELECT id FROM turns WHERE tenant_id = $1 AND session_id = ANY($2) AND id = ANY($3) AND cancel_requested`,
			tenant, g.sessions, g.turns)
	}
	held, cancel = map[string]bool{}, map[string]bool{}
	br := s.chores.SendBatch(ctx, b)
	defer br.Close()
	collect := func(into map[string]bool) error {
		rows, err := br.Query()
		if err != nil {
			return err
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
		for _, id := range ids {
			into[id] = true
		}
		return err
	}
	for range order {
		if _, err := br.Exec(); err != nil {
			return nil, nil, fmt.Errorf("heartbeat %d turns: %w", len(refs), interpretError(err))
		}
		if err := collect(held); err != nil {
			return nil, nil, fmt.Errorf("heartbeat %d turns: %w", len(refs), interpretError(err))
		}
		if err := collect(cancel); err != nil {
			return nil, nil, fmt.Errorf("heartbeat %d turns: %w", len(refs), interpretError(err))
		}
	}
	for id := range cancel {
		if !held[id] {
			delete(cancel, id)
		}
	}
	return held, cancel, nil
}

// TurnGet loads a turn of a session of the tenant.
func (s *Store) TurnGet(ctx context.Context, tenantID, sessionID, turnID string) (Turn, error) {
	return s.TurnGetOwned(ctx, tenantID, "", sessionID, turnID)
}

// TurnGetOwned loads a turn of a session of the tenant owned by owner (""
// for any owner); ErrNotFound for a turn of another's session.
func (s *Store) TurnGetOwned(ctx context.Context, tenantID, owner, sessionID, turnID string) (Turn, error) {
	t, err := scanTurn(s.tenant(tenantID).QueryRow(ctx, `SELECT `+turnColumns+` FROM turns
		WHERE tenant_id = $1 AND session_id = $2 AND id = $3
		  AND ($4 = '' OR EXISTS (SELECT 1 FROM sessions s WHERE s.tenant_id = $1 AND s.id = $2 AND s.owner = $4))`,
		tenantID, sessionID, turnID, owner))
	if err != nil {
		return Turn{}, fmt.Errorf("load turn %s: %w", turnID, err)
	}
	return t, nil
}

// TurnMessages returns the messages the agent and the server wrote in a
// turn (model output, server tool results, denials, closed tool calls), in
// order: the body of a stream "none" response replayed for an idempotent
// retry. Those of them the tenant's retention trimmed are left out, as
// every read of the full history leaves them out (historytrim.go): the
// session's rows of the trimmed prefix a fork still reads are the fork's,
// not the session's, and a turn the trim cut in two answers with its
// tail.
func (s *Store) TurnMessages(ctx context.Context, tenantID, sessionID, turnID string) ([]StoredMessage, error) {
	rows, err := s.tenant(tenantID).Query(ctx, `SELECT seq, seq, message::text, extra::text FROM messages
		WHERE tenant_id = $1 AND session_id = $2 AND turn_id = $3 AND origin <> 'client'
		  AND seq > `+trimmedThroughSQL+`
		  AND seq >= coalesce((SELECT first_seq FROM turns WHERE tenant_id = $1 AND session_id = $2 AND id = $3), 0)
		ORDER BY seq`, tenantID, sessionID, turnID)
	if err != nil {
		return nil, fmt.Errorf("load messages of turn %s: %w", turnID, interpretError(err))
	}
	out, err := scanHistory(rows)
	if err != nil {
		return nil, fmt.Errorf("load messages of turn %s: %w", turnID, err)
	}
	return out, nil
}

// TurnListParams selects a page of a session's turns.
type TurnListParams struct {
	TenantID  string
	SessionID string
	// After is the cursor of the previous page ("" for the first).
	After string
	Limit int
}

// TurnPage is a page of turns, newest first.
type TurnPage struct {
	Turns []Turn
	Next  string
}

// noTurnCursor sorts after every turn id: the first page's cursor, so that
// the query keeps one shape whose bound is an index condition, also under a
// generic plan.
const noTurnCursor = "turn_~"

// turnListSQL pages a session's turns: $1 tenant, $2 session, $3 the
// cursor, $4 the limit.
const turnListSQL = `SELECT ` + turnColumns + ` FROM turns
		WHERE tenant_id = $1 AND session_id = $2 AND id < $3
		ORDER BY id DESC LIMIT $4`

// TurnList pages through a session's turns, newest first, by keyset on the
// time-ordered turn id (stable while turns are added).
func (s *Store) TurnList(ctx context.Context, p TurnListParams) (TurnPage, error) {
	after, err := decodeCursor(p.After, "turn_")
	if err != nil {
		return TurnPage{}, err
	}
	if after == "" {
		after = noTurnCursor
	}
	rows, err := s.tenant(p.TenantID).Query(ctx, turnListSQL, p.TenantID, p.SessionID, after, p.Limit+1)
	if err != nil {
		return TurnPage{}, fmt.Errorf("list turns: %w", interpretError(err))
	}
	defer rows.Close()
	var page TurnPage
	for rows.Next() {
		t, err := scanTurn(rows)
		if err != nil {
			return TurnPage{}, fmt.Errorf("list turns: %w", err)
		}
		page.Turns = append(page.Turns, t)
	}
	if err := rows.Err(); err != nil {
		return TurnPage{}, fmt.Errorf("list turns: %w", interpretError(err))
	}
	if len(page.Turns) > p.Limit {
		page.Turns = page.Turns[:p.Limit]
		page.Next = encodeCursor(page.Turns[p.Limit-1].ID)
	}
	return page, nil
}

// legacyTurnErrorMessage stands for the message of a turn recorded before
// error types were kept: its text may hold internals, and is not shown.
const legacyTurnErrorMessage = "the turn failed; the server's log has the details"

// TurnError says why the turn failed, as clients see it: nil unless it
// stopped with stop reason "error". A turn recorded before error types were
// kept gets one from its status, with a generic message.
func (t Turn) TurnError() *aap.TurnError {
	if t.StopReason != aap.StopError {
		return nil
	}
	if t.ErrorType != "" {
		return &aap.TurnError{Type: t.ErrorType, Message: t.Error}
	}
	if t.Status == TurnInterrupted {
		return &aap.TurnError{Type: aap.TurnErrorInterrupted, Message: interruptedError}
	}
	return &aap.TurnError{Type: aap.TurnErrorInternal, Message: legacyTurnErrorMessage}
}
