package store

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/aapd/aapd/aap"
)

// Session is a stored session.
type Session struct {
	TenantID  string
	ID        string
	AgentName string
	// AgentTools are the enabled server tools; nil when none.
	AgentTools []aap.ServerToolRef
	// Options are the non-secret option values the client set.
	Options map[string]string
	// SecretOptions are the secret option values the client set, decrypted.
	SecretOptions map[string]string
	// ClientTools are the client-side tools; nil when none were declared.
	ClientTools []aap.ToolSpec
	// Pending are the tool calls the session waits on.
	Pending []aap.PendingToolCall
	// ActiveTurnID is the turn holding the session's claim, if any (the
	// claim may have expired).
	ActiveTurnID string
	// Owner is the end user (a token's subject) the session belongs to;
	// empty for a session created with an API key.
	Owner     string
	CreatedAt time.Time
	UpdatedAt time.Time
	// TurnLive is true while a live turn holds the session's claim: its
	// process is alive and its lease unexpired. Only SessionGetOwned and
	// SessionList fill it.
	TurnLive bool
	// Version is the version of the row SessionCreate wrote (see
	// TurnBeginParams.Known); zero elsewhere, and for a replayed creation.
	Version SessionVersion
	// ForkedFrom names the session this one was forked from (SessionFork),
	// nil for one that is not a fork. Only SessionGetOwned, SessionList
	// and SessionFork fill it.
	ForkedFrom *ForkOrigin
	// HistoryTrimmedThrough is the full history's trimmed prefix: its
	// messages 1 to this seq were dropped by the tenant's retention policy
	// (fullHistoryDays, historytrim.go), and reads of it start after. 0:
	// nothing was dropped.
	HistoryTrimmedThrough int64
	// ThreadID is the client's name for the session
	// (SessionCreateParams.ThreadID); empty for none.
	ThreadID string
	// EndedAt is when the session was ended (SessionEnd); nil while it
	// takes turns.
	EndedAt *time.Time
	// Labels are what a door's client set on the session that AAP has no
	// member for (SessionCreateParams.Labels); nil for none.
	Labels map[string]string
}

// Session statuses, as Status reports them.
const (
	// SessionRunning: a turn is running on the session.
	SessionRunning = "running"
	// SessionRequiresAction: the last turn stopped for tool calls the
	// client must answer (results of client tools, permissions of server
	// tools).
	SessionRequiresAction = "requires_action"
	// SessionIdle: the session waits for a user message.
	SessionIdle = "idle"
)

// Status says what the session is doing: running a turn, waiting on the
// client's answers to tool calls, or idle. A claim whose turn died is not
// running (the next turn takes it over at once).
func (s Session) Status() string {
	switch {
	case s.TurnLive:
		return SessionRunning
	case len(s.AwaitingClient()) > 0:
		return SessionRequiresAction
	}
	return SessionIdle
}

// AwaitingClient returns the pending tool calls the client must answer:
// every pending call but the granted server calls a turn runs (or ran).
func (s Session) AwaitingClient() []aap.PendingToolCall {
	var out []aap.PendingToolCall
	for _, p := range s.Pending {
		if !p.Granted {
			out = append(out, p)
		}
	}
	return out
}

// Info returns the session in its AAP shape, with secrets in the clear:
// callers redact it with aap.SessionInfo.Redact before it leaves the server.
func (s Session) Info() aap.SessionInfo {
	info := aap.SessionInfo{
		SessionID: s.ID,
		Agent:     aap.AgentConfig{Name: s.AgentName, Tools: s.AgentTools},
		Tools:     s.ClientTools,
	}
	if n := len(s.Options) + len(s.SecretOptions); n > 0 {
		info.Agent.Options = make(map[string]string, n)
		for k, v := range s.Options {
			info.Agent.Options[k] = v
		}
		for k, v := range s.SecretOptions {
			info.Agent.Options[k] = v
		}
	}
	return info
}

// RedactedInfo returns the session in its AAP shape as it may leave the
// server: every secret option value replaced by aap.SecretPlaceholder, but
// an empty one, which reveals nothing and reads as "" (so a client can tell
// a secret set to nothing from a secret set). It relies on where each value
// is stored, not on the agent's declaration, so it redacts correctly even
// if the agent's configuration changed since.
func (s Session) RedactedInfo() aap.SessionInfo {
	info := s.Info()
	for k, v := range s.SecretOptions {
		if v != "" {
			info.Agent.Options[k] = aap.SecretPlaceholder
		}
	}
	return info
}

// AllOptions returns the client-set option values, secret ones included.
func (s Session) AllOptions() map[string]string { return s.Info().Agent.Options }

// SessionCreateParams describes a new session.
type SessionCreateParams struct {
	TenantID string
	// Owner is the end user creating the session with a token; empty for
	// an API key.
	Owner         string
	AgentName     string
	AgentTools    []aap.ServerToolRef
	Options       map[string]string
	SecretOptions map[string]string
	ClientTools   []aap.ToolSpec
	// Messages seed both histories.
	Messages []aap.Message
	// MessageIDs are the client's ids of Messages, index by index ("" for
	// none; nil for no ids at all): see NewMessage.ClientID.
	MessageIDs []string
	// ThreadID is the client's name for the session (AG-UI's thread id),
	// unique among the sessions of the tenant with the same owner
	// (SessionGetByThread); empty for none. A session of that thread that
	// exists already fails the creation with ErrConflict.
	ThreadID string
	// Pending are the tool calls the seed leaves unanswered.
	Pending []aap.PendingToolCall
	// Labels are what a door's client set on the session that AAP has no
	// member for (sandbox-agent's agentMode, permissionMode, variant):
	// stored to be shown back, they change nothing of a turn.
	Labels map[string]string
	// IdempotencyKey, when set, makes a retry with the same key and
	// request hash return the session the first request created.
	IdempotencyKey string
	RequestHash    []byte
}

// idempotencyKeyTTL is how long a session-creation key is remembered: at
// least the 24 hours promised in docs/durability.md.
const idempotencyKeyTTL = "7 days"

// NewSessionID returns an opaque, time-ordered session id.
func NewSessionID() string { return "sess_" + mustV7() }

func mustV7() string {
	id, err := uuid.NewV7()
	if err != nil {
		panic(fmt.Sprintf("uuid v7: %v", err)) // only fails if the system's randomness does
	}
	return strings.ReplaceAll(id.String(), "-", "")
}

// SessionCreate stores a new session and its seed history. With an
// idempotency key already used for the same request, it creates nothing and
// returns the first session's id with replayed set; with another request,
// ErrIdempotencyMismatch.
func (s *Store) SessionCreate(ctx context.Context, p SessionCreateParams) (sess Session, replayed bool, err error) {
	for attempt := 0; ; attempt++ {
		sess, replayed, err = s.sessionCreate(ctx, p)
		// Two requests with one new key raced: the loser replays the winner.
		if p.IdempotencyKey == "" || attempt > 0 || !errors.Is(err, ErrConflict) {
			return sess, replayed, err
		}
	}
}

func (s *Store) sessionCreate(ctx context.Context, p SessionCreateParams) (Session, bool, error) {
	sealed, err := s.sealer.sealJSON(p.SecretOptions)
	if err != nil {
		return Session{}, false, fmt.Errorf("seal secret options: %w", err)
	}
	sess := Session{
		TenantID: p.TenantID, ID: NewSessionID(), Owner: p.Owner, AgentName: p.AgentName, AgentTools: p.AgentTools,
		Options: p.Options, SecretOptions: p.SecretOptions, ClientTools: p.ClientTools, Pending: p.Pending,
		ThreadID: p.ThreadID, Labels: p.Labels,
	}
	const insertSession = `
			INSERT INTO sessions (tenant_id, id, agent_name, agent_tools, options, secret_options, client_tools, pending_tool_calls, last_seq, owner, thread_id, labels)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, nullif($10, ''), nullif($11, ''), $12)
			RETURNING created_at, updated_at, xmin::text`
	insertArgs := []any{p.TenantID, sess.ID, p.AgentName, jsonOrNull(p.AgentTools), jsonObject(p.Options), sealed,
		jsonOrNull(p.ClientTools), jsonList(p.Pending), len(p.Messages), p.Owner, p.ThreadID, jsonMapOrNull(p.Labels)}
	if p.IdempotencyKey == "" && len(p.Messages) == 0 {
		// One statement: no transaction to open and commit around it.
		err := s.tenant(p.TenantID).QueryRow(ctx, insertSession, insertArgs...).Scan(&sess.CreatedAt, &sess.UpdatedAt, &sess.Version.xmin)
		if err != nil {
			return Session{}, false, fmt.Errorf("create session: %w", interpretError(err))
		}
		sess.Version.updatedAt = sess.UpdatedAt
		return sess, false, nil
	}
	// Otherwise one transaction, sent as one batch: a key already in use
	// voids it (the key's primary key), and then its first session is
	// looked up.
	msgs := make([]NewMessage, len(p.Messages))
	for i, m := range p.Messages {
		msgs[i] = NewMessage{Message: m, Origin: OriginClient}
		if i < len(p.MessageIDs) {
			msgs[i].ClientID = p.MessageIDs[i]
		}
	}
	rows, err := newMessageRows(1, msgs)
	if err != nil {
		return Session{}, false, err
	}
	idemKey := ownedIdempotencyKey(p.Owner, p.IdempotencyKey)
	b := &pgx.Batch{}
	queueBegin(b, p.TenantID)
	if p.IdempotencyKey != "" {
		b.Queue(`DELETE FROM idempotency_keys WHERE tenant_id = $1 AND created_at < now() - interval '`+idempotencyKeyTTL+`'`, p.TenantID)
	}
	sessStmt := b.Len()
	b.Queue(insertSession, insertArgs...)
	if p.IdempotencyKey != "" {
		b.Queue(`INSERT INTO idempotency_keys (tenant_id, key, request_hash, session_id) VALUES ($1, $2, $3, $4)`,
			p.TenantID, idemKey, p.RequestHash, sess.ID)
	}
	if len(msgs) > 0 {
		full, fullArgs := rows.insert(p.TenantID, sess.ID, nil)
		compacted, compactedArgs := rows.insertCompacted(p.TenantID, sess.ID)
		b.Queue(full, fullArgs...)
		b.Queue(compacted, compactedArgs...)
		if len(rows.clientIDs) > 0 {
			ids, idArgs := rows.insertClientIDs(p.TenantID, sess.ID)
			b.Queue(ids, idArgs...)
		}
	}
	b.Queue("COMMIT")
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return Session{}, false, fmt.Errorf("create session: %w", interpretError(err))
	}
	err = sendTx(ctx, conn, b, map[int]func(pgx.Row) error{sessStmt: func(row pgx.Row) error {
		return row.Scan(&sess.CreatedAt, &sess.UpdatedAt, &sess.Version.xmin)
	}})
	conn.Release()
	sess.Version.updatedAt = sess.UpdatedAt
	if p.IdempotencyKey != "" && errors.Is(err, ErrConflict) {
		return s.sessionCreated(ctx, p.TenantID, idemKey, p.RequestHash)
	}
	if err != nil {
		return Session{}, false, fmt.Errorf("create session: %w", err)
	}
	return sess, false, nil
}

// sessionCreated returns the session a creation key made: replayed, or
// ErrIdempotencyMismatch for another request body. ErrConflict if the key
// has no live session, which a creation that just failed on it means was
// rolled back or expired meanwhile: the caller tries again.
func (s *Store) sessionCreated(ctx context.Context, tenantID, idemKey string, requestHash []byte) (Session, bool, error) {
	var (
		prevID   string
		prevHash []byte
	)
	err := s.tenant(tenantID).QueryRow(ctx, `
		SELECT session_id, request_hash FROM idempotency_keys
		WHERE tenant_id = $1 AND key = $2 AND created_at > now() - interval '`+idempotencyKeyTTL+`'`,
		tenantID, idemKey).Scan(&prevID, &prevHash)
	switch err = interpretError(err); {
	case err == nil && !bytes.Equal(prevHash, requestHash):
		return Session{}, false, ErrIdempotencyMismatch
	case err == nil:
		return Session{TenantID: tenantID, ID: prevID}, true, nil
	case errors.Is(err, ErrNotFound):
		return Session{}, false, fmt.Errorf("create session: %w: the idempotency key's first request did not commit", ErrConflict)
	}
	return Session{}, false, fmt.Errorf("create session: %w", err)
}

// ownedIdempotencyKey is the stored form of a session-creation key: an
// owner's keys live apart from the API keys' and from other owners', so
// that a retry never hands one end user the session another created with
// the same key. Keys a client sends are printable ASCII (httpapi checks),
// so none can be mistaken for an owner's, which contains \x1f.
func ownedIdempotencyKey(owner, key string) string {
	if owner == "" || key == "" {
		return key
	}
	return "\x1f" + owner + "\x1f" + key
}

const sessionColumns = `tenant_id::text, id, agent_name, agent_tools, options, secret_options, client_tools,
	pending_tool_calls, coalesce(active_turn_id, ''), coalesce(owner, ''), created_at, updated_at,
	coalesce(thread_id, ''), ended_at, labels, history_trimmed_through`

// sessionReadColumns are sessionColumns and the session's claim (its lease
// and the instance holding it), for the reads that show a session: whether
// a live turn holds it (Session.TurnLive) is judged by markLiveTurns.
const sessionReadColumns = sessionColumns + `, lease_expires_at, lease_owner, forked_from, forked_at`

// scanSessionRead scans a row of sessionReadColumns.
func (s *Store) scanSessionRead(row interface{ Scan(...any) error }) (Session, claimRead, error) {
	var (
		c          claimRead
		forkedFrom *string
		forkedAt   *int64
	)
	sess, err := s.scanSessionWith(row, &c.lease, &c.owner, &forkedFrom, &forkedAt)
	if err == nil && forkedFrom != nil && forkedAt != nil {
		sess.ForkedFrom = &ForkOrigin{SessionID: *forkedFrom, Messages: *forkedAt}
	}
	return sess, c, err
}

// markLiveTurns sets TurnLive on the sessions whose claim is held by a live
// turn: its lease runs and its process holds its instance lock. It asks in
// a statement of its own, which reads no table (store/claim.go: on Citus
// the instance locks and the clock that wrote the lease are the
// coordinator's), and only when a session has an active turn.
func (s *Store) markLiveTurns(ctx context.Context, sessions []Session, claims []claimRead) error {
	var (
		at   []int
		held []claimRead
	)
	for i := range sessions {
		if sessions[i].ActiveTurnID != "" {
			at, held = append(at, i), append(held, claims[i])
		}
	}
	if len(at) == 0 {
		return nil
	}
	verdicts, err := claimStates(ctx, s.pool, held)
	if err != nil {
		return err
	}
	for k, i := range at {
		sessions[i].TurnLive = !verdicts[k].expired && !verdicts[k].dead
	}
	return nil
}

func (s *Store) scanSession(row interface{ Scan(...any) error }) (Session, error) {
	return s.scanSessionWith(row)
}

// scanSessionWith scans a session row followed by more columns into extra.
func (s *Store) scanSessionWith(row interface{ Scan(...any) error }, extra ...any) (Session, error) {
	var (
		sess                                  Session
		agentTools, options, clientTools, pnd []byte
		sealed, labels                        []byte
	)
	dst := []any{&sess.TenantID, &sess.ID, &sess.AgentName, &agentTools, &options, &sealed, &clientTools,
		&pnd, &sess.ActiveTurnID, &sess.Owner, &sess.CreatedAt, &sess.UpdatedAt,
		&sess.ThreadID, &sess.EndedAt, &labels, &sess.HistoryTrimmedThrough}
	err := row.Scan(append(dst, extra...)...)
	if err != nil {
		return Session{}, interpretError(err)
	}
	if err := unmarshalAll(
		field{"agent_tools", agentTools, &sess.AgentTools},
		field{"options", options, &sess.Options},
		field{"client_tools", clientTools, &sess.ClientTools},
		field{"pending_tool_calls", pnd, &sess.Pending},
		field{"labels", labels, &sess.Labels},
	); err != nil {
		return Session{}, fmt.Errorf("session %s: %w", sess.ID, err)
	}
	if sess.SecretOptions, err = s.sealer.openJSON(sealed); err != nil {
		return Session{}, fmt.Errorf("session %s: %w", sess.ID, err)
	}
	return sess, nil
}

// SessionGet loads a session of the tenant; ErrNotFound if the tenant has
// no such session.
func (s *Store) SessionGet(ctx context.Context, tenantID, id string) (Session, error) {
	return s.SessionGetOwned(ctx, tenantID, "", id)
}

// SessionGetOwned loads a session of the tenant owned by owner ("" for any
// owner); ErrNotFound if the tenant has no such session, or it is
// another's: an end user cannot tell someone else's session from none.
func (s *Store) SessionGetOwned(ctx context.Context, tenantID, owner, id string) (Session, error) {
	sess, claim, err := s.scanSessionRead(s.tenant(tenantID).QueryRow(ctx,
		`SELECT `+sessionReadColumns+` FROM sessions WHERE tenant_id = $1 AND id = $2 AND ($3 = '' OR owner = $3)`,
		tenantID, id, owner))
	if err == nil {
		one := []Session{sess}
		err = s.markLiveTurns(ctx, one, []claimRead{claim})
		sess = one[0]
	}
	if err != nil {
		return Session{}, fmt.Errorf("load session %s: %w", id, err)
	}
	return sess, nil
}

// SessionListParams selects a page of sessions.
type SessionListParams struct {
	TenantID string
	// Owner lists only the sessions of one end user; "" lists them all.
	Owner string
	// After is the cursor of the previous page ("" for the first).
	After string
	Limit int
}

// SessionPage is a page of sessions, newest first.
type SessionPage struct {
	Sessions []Session
	// Next is the cursor of the next page; empty on the last page.
	Next string
}

// ErrBadCursor: the pagination cursor was not one this server issued.
var ErrBadCursor = errors.New("invalid pagination cursor")

// noSessionCursor sorts after every session id: the first page's cursor,
// so that the listing keeps one shape whose bound is an index condition,
// also under a generic plan (a prepared statement's).
const noSessionCursor = "sess_~"

// sessionListSQL pages a tenant's sessions: $1 tenant, $2 the cursor (the
// last id of the previous page), $3 the limit.
const sessionListSQL = `SELECT ` + sessionReadColumns + ` FROM sessions
		WHERE tenant_id = $1 AND id < $2
		ORDER BY id DESC LIMIT $3`

// sessionListQuery is sessionListSQL, but for a test that removes its
// tenant filter to see the tenant wall hold (DropSessionListTenantFilter).
var sessionListQuery = sessionListSQL

// sessionListByOwnerSQL pages an end user's sessions ($4 the owner) along
// the index sessions_owner.
const sessionListByOwnerSQL = `SELECT ` + sessionReadColumns + ` FROM sessions
		WHERE tenant_id = $1 AND owner = $4 AND id < $2
		ORDER BY id DESC LIMIT $3`

// SessionList pages through a tenant's sessions, newest first. Paging is by
// keyset on the time-ordered session id, so sessions created or deleted
// between pages never make another appear twice or not at all.
func (s *Store) SessionList(ctx context.Context, p SessionListParams) (SessionPage, error) {
	after, err := decodeCursor(p.After, "sess_")
	if err != nil {
		return SessionPage{}, err
	}
	if after == "" {
		after = noSessionCursor
	}
	query, args := sessionListQuery, []any{p.TenantID, after, p.Limit + 1}
	if p.Owner != "" {
		query, args = sessionListByOwnerSQL, append(args, p.Owner)
	}
	rows, err := s.tenant(p.TenantID).Query(ctx, query, args...)
	if err != nil {
		return SessionPage{}, fmt.Errorf("list sessions: %w", interpretError(err))
	}
	defer rows.Close()
	var (
		page   SessionPage
		claims []claimRead
	)
	for rows.Next() {
		sess, claim, err := s.scanSessionRead(rows)
		if err != nil {
			return SessionPage{}, fmt.Errorf("list sessions: %w", err)
		}
		page.Sessions, claims = append(page.Sessions, sess), append(claims, claim)
	}
	if err := rows.Err(); err != nil {
		return SessionPage{}, fmt.Errorf("list sessions: %w", interpretError(err))
	}
	rows.Close()
	if err := s.markLiveTurns(ctx, page.Sessions, claims); err != nil {
		return SessionPage{}, fmt.Errorf("list sessions: %w", err)
	}
	if len(page.Sessions) > p.Limit {
		page.Sessions = page.Sessions[:p.Limit]
		page.Next = encodeCursor(page.Sessions[p.Limit-1].ID)
	}
	return page, nil
}

// SessionDelete deletes a session with its histories and turns. It returns
// the id of the turn that held the session's claim, if any, so the caller
// can stop it.
func (s *Store) SessionDelete(ctx context.Context, tenantID, id string) (activeTurnID string, err error) {
	return s.SessionDeleteOwned(ctx, tenantID, "", id)
}

// SessionDeleteOwned is SessionDelete of a session owned by owner ("" for
// any owner); ErrNotFound for another's.
//
// Forks that read part of the session's full history where it is
// (inherited.go) are given their own copy of that part first.
//
// The session's turns are in its tenant's usage as they end (usage.go);
// the usage of its turn still running, which will not end, is added in
// the same transaction, before the deletion cascades to it, so that
// deleting a session never shrinks the tenant's usage report. The session
// is locked first: of two deletions racing, the second finds nothing to
// roll up, and the running turn's end, which updates the session's row,
// waits and finds its claim lost. (One statement with a modifying CTE
// would do on PostgreSQL, but Citus runs such a CTE first, and the INSERT
// would read no turns.)
func (s *Store) SessionDeleteOwned(ctx context.Context, tenantID, owner, id string) (activeTurnID string, err error) {
	// The deletion's webhook event, in the same transaction
	// (webhookoutbox.go); a session not found rolls it back.
	outbox, queued, err := webhookOutbox(tenantID, WebhookEvent{ID: NewWebhookEventID(), Type: WebhookSessionDeleted,
		OccurredAt: s.now(), Data: WebhookEventData{SessionID: id}}, "")
	if err != nil {
		return "", err
	}
	err = s.inTx(ctx, tenantID, func(tx pgx.Tx) error {
		activeTurnID, err = deleteSession(ctx, tx, tenantID, owner, id, outbox)
		return err
	})
	if err != nil {
		return "", fmt.Errorf("delete session %s: %w", id, err)
	}
	if *queued {
		s.webhooksQueuedFor(tenantID)
	}
	return activeTurnID, nil
}

// deleteSession deletes a session of owner ("" for any) in tx, as
// SessionDeleteOwned describes, with the webhook event outbox queues;
// ErrNotFound when there is no such session.
func deleteSession(ctx context.Context, tx pgx.Tx, tenantID, owner, id string, outbox batchStmt) (activeTurnID string, err error) {
	b := &pgx.Batch{}
	b.Queue(`SELECT 1 FROM sessions WHERE tenant_id = $1 AND id = $2 AND ($3 = '' OR owner = $3) FOR UPDATE`,
		tenantID, id, owner)
	queueInheritedMaterialize(b, tenantID, id, owner)
	// Its turn still running: ended turns are in the usage already.
	b.Queue(usageRunningSQL, tenantID, id)
	// The idempotency keys that created it (no foreign key: a key is
	// recorded with the session it made, in the same transaction).
	// A deletion that finds no session rolls back.
	b.Queue(`DELETE FROM idempotency_keys WHERE tenant_id = $1 AND session_id = $2`, tenantID, id)
	b.Queue(`DELETE FROM sessions WHERE tenant_id = $1 AND id = $2 AND ($3 = '' OR owner = $3)
		RETURNING coalesce(active_turn_id, '')`, tenantID, id, owner)
	b.Queue(outbox.sql, outbox.args...)
	br := tx.SendBatch(ctx, b)
	defer br.Close()
	// Every statement but the last two (the deletion, then the webhook
	// event) is executed; those two return a row each.
	for range b.Len() - 2 {
		if _, err := br.Exec(); err != nil {
			return "", interpretError(err)
		}
	}
	if err := br.QueryRow().Scan(&activeTurnID); err != nil {
		return "", interpretError(err)
	}
	if err := outbox.scan(br.QueryRow()); err != nil {
		return "", interpretError(err)
	}
	return activeTurnID, interpretError(br.Close())
}

// idPattern is the form of every id this store issues: a prefix and the
// hex of a UUIDv7.
var idPattern = regexp.MustCompile(`^(sess|turn|wh|evt|sch)_[0-9a-f]{32}$`)

// ValidID reports whether id is an id this store could have issued with the
// prefix ("sess_", "turn_", "wh_", "evt_" or "sch_"). Anything else is looked up nowhere: it cannot
// exist, and it may not even be text Postgres accepts.
func ValidID(prefix, id string) bool {
	return strings.HasPrefix(id, prefix) && idPattern.MatchString(id)
}

// encodeCursor makes the opaque cursor of a keyset page ending at id.
func encodeCursor(id string) string { return base64.RawURLEncoding.EncodeToString([]byte(id)) }

// decodeCursor reads a cursor of encodeCursor for ids with the prefix; ""
// for none.
func decodeCursor(cursor, prefix string) (string, error) {
	if cursor == "" {
		return "", nil
	}
	b, err := base64.RawURLEncoding.DecodeString(cursor)
	if err != nil || !ValidID(prefix, string(b)) {
		return "", ErrBadCursor
	}
	return string(b), nil
}

// field is a JSON column to decode.
type field struct {
	name string
	data []byte
	dst  any
}

func unmarshalAll(fields ...field) error {
	for _, f := range fields {
		if len(f.data) == 0 || string(f.data) == "null" {
			continue
		}
		if err := json.Unmarshal(f.data, f.dst); err != nil {
			return fmt.Errorf("decode %s: %w", f.name, err)
		}
	}
	return nil
}

// jsonOrNull encodes a slice as JSON, or SQL NULL when nil.
func jsonOrNull[T any](v []T) any {
	if v == nil {
		return nil
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// jsonList encodes a slice as a JSON array ([] when nil).
func jsonList[T any](v []T) string {
	if v == nil {
		return "[]"
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// jsonMapOrNull encodes a map as a JSON object, or SQL NULL when empty.
func jsonMapOrNull(m map[string]string) any {
	if len(m) == 0 {
		return nil
	}
	b, _ := json.Marshal(m)
	return string(b)
}

// jsonObject encodes a map as a JSON object ({} when nil).
func jsonObject(m map[string]string) string {
	if m == nil {
		return "{}"
	}
	b, _ := json.Marshal(m)
	return string(b)
}
