// Package transfer writes and reads aapd's export documents: a session (or
// a tenant's every session) as JSON Lines, the format docs/lifecycle.md
// describes. A document is written as the store streams it and read as it
// arrives, line by line, so a session of any size moves in constant memory.
//
// A session document is, one JSON object a line:
//
//	header       the format and version; the session's agent configuration
//	             (secret options named, never valued), client tools, owner,
//	             creation time, origin and pending tool calls
//	turn|message the turns and full-history messages in the order they were
//	             written: a turn's record just before its first message
//	compaction   each compaction, oldest first, followed by what it
//	replaced     replaced (the compacted history just before it ran)
//	compacted    the compacted history: runs of copies of full-history
//	             messages, and the messages compaction wrote
//	schedule     the session's schedules (version 2; a document without
//	             schedules is written as version 1)
//	trailer      the counts of each kind of line and the SHA-256 of every
//	             line before it
//
// A tenant document is a tenant line (its name, limits, retention and token issuers,
// never its keys), its sessions' documents one after the other, and a
// tenant trailer. Readers accept every version up to their own and refuse a
// later one; a new kind of line or member comes with a new version.
package transfer

import (
	"encoding/json"
	"time"

	"github.com/aapd/aapd/aap"
)

// Formats and versions.
const (
	SessionFormat = "aapd-session"
	// SessionVersion 2 added schedule lines, 3 the header's trimmedThrough
	// (a full history retention trimmed). A document needs neither is
	// written as version 1, which every reader takes.
	SessionVersion = 3
	TenantFormat   = "aapd-tenant"
	TenantVersion  = 2 // 2: the tenant's retention policy
)

// ContentType is the media type of a document.
const ContentType = "application/x-ndjson"

// Line types.
const (
	typeHeader        = "header"
	typeTurn          = "turn"
	typeMessage       = "message"
	typeCompaction    = "compaction"
	typeReplaced      = "replaced"
	typeCompacted     = "compacted"
	typeSchedule      = "schedule"
	typeTrailer       = "trailer"
	typeTenant        = "tenant"
	typeTenantTrailer = "tenant-trailer"
)

// Header is a session document's first line.
type Header struct {
	Type    string  `json:"type"`
	Format  string  `json:"format"`
	Version int     `json:"version"`
	Session Session `json:"session"`
}

// Session is the session a document holds, as its header describes it.
type Session struct {
	// ID is the session's id where it was exported; an import gives it a
	// new one.
	ID         string      `json:"id"`
	Owner      string      `json:"owner,omitempty"`
	CreatedAt  time.Time   `json:"createdAt"`
	ForkedFrom *ForkedFrom `json:"forkedFrom,omitempty"`
	Agent      Agent       `json:"agent"`
	// Tools are the client tools.
	Tools   []aap.ToolSpec `json:"tools,omitempty"`
	Pending []Pending      `json:"pending,omitempty"`
	// Messages is the position of the document's last full-history
	// message: how many it holds, but for a trimmed history.
	Messages int64 `json:"messages"`
	// TrimmedThrough, when above zero, says the tenant's retention dropped
	// the full history's messages 1 to this position: the document's
	// messages begin after it, and nothing refers to the dropped ones
	// (version 3).
	TrimmedThrough int64 `json:"trimmedThrough,omitempty"`
	// LeftOutTurn is a turn that was running when the session was
	// exported: it is not in the document, which holds the session as it
	// stood before the turn began.
	LeftOutTurn string `json:"leftOutTurn,omitempty"`
	// SealedSecrets is the secret option values sealed with the exporting
	// server's encryption key (base64): only in an operator's export, and
	// only an operator's import, on a server with the same key, takes it.
	SealedSecrets string `json:"sealedSecrets,omitempty"`
}

// ForkedFrom names the session a fork came from and its point.
type ForkedFrom struct {
	SessionID string `json:"sessionId"`
	At        ForkAt `json:"at"`
}

// ForkAt is a fork's point: how many of its origin's messages it took.
type ForkAt struct {
	Message int64 `json:"message"`
}

// Agent is a session's agent configuration.
type Agent struct {
	Name    string              `json:"name"`
	Tools   []aap.ServerToolRef `json:"tools,omitempty"`
	Options map[string]string   `json:"options,omitempty"`
	// Secrets names the secret options: SecretSet or SecretUnset each.
	Secrets map[string]string `json:"secrets,omitempty"`
}

// Values of Agent.Secrets.
const (
	SecretSet   = "set"
	SecretUnset = "unset"
)

// Pending is a tool call the session waits on.
type Pending struct {
	ToolCallID string          `json:"toolCallId"`
	Name       string          `json:"name"`
	Input      json.RawMessage `json:"input"`
	// Awaiting is "result" (a client tool's call) or "permission" (an
	// untrusted server tool's).
	Awaiting string `json:"awaiting"`
	// Granted marks a permitted server call whose result is not recorded
	// (its turn died running it): the next turn closes it.
	Granted bool `json:"granted,omitempty"`
}

// Values of Pending.Awaiting.
const (
	AwaitingResult     = "result"
	AwaitingPermission = "permission"
)

// TurnLine is a turn's record.
type TurnLine struct {
	Type       string         `json:"type"`
	ID         string         `json:"id"`
	Status     string         `json:"status"`
	Stream     string         `json:"stream"`
	StopReason string         `json:"stopReason,omitempty"`
	Error      *aap.TurnError `json:"error,omitempty"`
	Usage      Usage          `json:"usage"`
	CreatedAt  time.Time      `json:"createdAt"`
	FinishedAt *time.Time     `json:"finishedAt,omitempty"`
}

// Usage is a turn's token usage.
type Usage struct {
	InputTokens  int64 `json:"inputTokens"`
	OutputTokens int64 `json:"outputTokens"`
}

// MessageLine is a full-history message.
type MessageLine struct {
	Type string `json:"type"`
	// Position is its place in the full history, from 1.
	Position int64 `json:"position"`
	// Turn is the turn that wrote it (the last turn line before it), or
	// null.
	Turn    *string         `json:"turn"`
	Origin  string          `json:"origin"`
	Time    time.Time       `json:"time"`
	Message json.RawMessage `json:"message"`
	Extra   json.RawMessage `json:"extra,omitempty"`
}

// CompactionLine is a compaction's record.
type CompactionLine struct {
	Type     string    `json:"type"`
	Time     time.Time `json:"time"`
	Trigger  string    `json:"trigger"`
	Strategy string    `json:"strategy"`
	// From and To bound the full-history positions it rewrote.
	From           int64 `json:"from"`
	To             int64 `json:"to"`
	MessagesBefore int   `json:"messagesBefore"`
	MessagesAfter  int   `json:"messagesAfter"`
	TokensBefore   int64 `json:"tokensBefore"`
	TokensAfter    int64 `json:"tokensAfter"`
}

// PartLine is part of a compacted history (type "compacted") or of what
// the last compaction replaced (type "replaced"): either a run of copies of
// full-history messages, or one message compaction wrote.
type PartLine struct {
	Type string `json:"type"`
	// Position is its (first) place in the compacted history.
	Position int64 `json:"position"`
	// Copies are the full-history positions the run copies, in order, to
	// compacted positions Position on.
	Copies *Range `json:"copies,omitempty"`
	// Message is the message compaction wrote.
	Message json.RawMessage `json:"message,omitempty"`
	Extra   json.RawMessage `json:"extra,omitempty"`
}

// Range is a range of full-history positions.
type Range struct {
	From int64 `json:"from"`
	To   int64 `json:"to"`
}

// ScheduleLine is one of the session's schedules (version 2): its timing,
// the turn each tick starts, its next tick and its counts. An import gives
// it a new id, and forgets its last turn's (the session's turns get new
// ids), unless the import keeps ids.
type ScheduleLine struct {
	Type string `json:"type"`
	ID   string `json:"id"`
	// Cron and Timezone, or Every (a Go duration), say when it ticks.
	Cron     string `json:"cron,omitempty"`
	Timezone string `json:"timezone,omitempty"`
	Every    string `json:"every,omitempty"`
	// Messages and Stream are the turn each tick starts.
	Messages  json.RawMessage `json:"messages"`
	Stream    string          `json:"stream,omitempty"`
	EndAt     *time.Time      `json:"endAt,omitempty"`
	CreatedAt time.Time       `json:"createdAt"`
	// NextRunAt is its next tick; absent once it has ended.
	NextRunAt      *time.Time `json:"nextRunAt,omitempty"`
	LastRunAt      *time.Time `json:"lastRunAt,omitempty"`
	LastTurn       string     `json:"lastTurn,omitempty"`
	Runs           int64      `json:"runs"`
	SkippedRunning int64      `json:"skippedRunning"`
	SkippedMissed  int64      `json:"skippedMissed"`
	SkippedRefused int64      `json:"skippedRefused"`
	LastError      string     `json:"lastError,omitempty"`
}

// Trailer ends a session document.
type Trailer struct {
	Type   string `json:"type"`
	Counts Counts `json:"counts"`
	// SHA256 is the hex SHA-256 of every byte before the trailer line.
	SHA256 string `json:"sha256"`
}

// Counts are how many lines of each kind a session document holds.
type Counts struct {
	Turns       int64 `json:"turns"`
	Messages    int64 `json:"messages"`
	Compactions int64 `json:"compactions"`
	Replaced    int64 `json:"replaced"`
	Compacted   int64 `json:"compacted"`
	// Schedules is absent (0) in version 1.
	Schedules int64 `json:"schedules,omitempty"`
}

// TenantLine is a tenant document's first line.
type TenantLine struct {
	Type    string `json:"type"`
	Format  string `json:"format"`
	Version int    `json:"version"`
	Tenant  Tenant `json:"tenant"`
}

// Tenant is what a tenant document carries of the tenant besides its
// sessions: never its API keys.
type Tenant struct {
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"createdAt"`
	// Limits are the tenant's own limits; a member left out is the
	// server's default.
	Limits  Limits   `json:"limits"`
	Issuers []Issuer `json:"issuers,omitempty"`
	// Retention is the tenant's own retention policy (version 2 on); a
	// member left out is the server's default.
	Retention Retention `json:"retention"`
}

// Retention is a tenant's retention policy, in days (docs/lifecycle.md).
type Retention struct {
	IdleSessionDays *int `json:"idleSessionDays,omitempty"`
	FullHistoryDays *int `json:"fullHistoryDays,omitempty"`
}

// Limits are a tenant's quotas.
type Limits struct {
	RequestsPerSecond *float64 `json:"requestsPerSecond,omitempty"`
	Burst             *int     `json:"burst,omitempty"`
	MaxRunningTurns   *int     `json:"maxRunningTurns,omitempty"`
}

// Issuer is a tenant's token issuer.
type Issuer struct {
	Issuer     string   `json:"issuer"`
	Audience   string   `json:"audience"`
	JWKSURL    string   `json:"jwksUrl,omitempty"`
	PublicKeys []string `json:"publicKeys,omitempty"`
}

// TenantTrailer ends a tenant document.
type TenantTrailer struct {
	Type     string `json:"type"`
	Sessions int64  `json:"sessions"`
	// SHA256 is the hex SHA-256 of every byte before the tenant trailer.
	SHA256 string `json:"sha256"`
}
