// Package admin is the operator's control plane: tenants, their API keys,
// token issuers, limits, usage and webhooks. Service holds every operation (its
// validation, its store calls and its audit line) once; the HTTP API under
// /admin/v1 (handler.go) and the aapd CLI both call it, so the two can never
// disagree on what a valid key or issuer is.
package admin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aapd/aapd/logctx"
	"github.com/aapd/aapd/store"
)

// Config configures a Service.
type Config struct {
	Store *store.Store
	// Logger receives the audit lines (msg "audit"), one per change,
	// whatever its level, and the admin API's errors.
	Logger *slog.Logger
	// Actor says who makes the changes in audit lines: "admin-api" for the
	// HTTP API, "cli" for the aapd command line.
	Actor string
	// Notify, when set, is told at once of a revoked key or a removed
	// issuer, so that this process stops accepting them before the
	// database's notification (which tells every other process) arrives.
	Notify func(store.Notification)
	Now    func() time.Time
	// WebhookAllowPrivate admits webhook URLs on loopback and private
	// addresses, and http ones (--webhook-allow-private).
	WebhookAllowPrivate bool
	// Retention is the server's default retention policy (flags of aapd
	// serve), shown beside a tenant's own.
	Retention store.TenantRetention
}

// Service performs the operator's operations.
type Service struct {
	st     *store.Store
	log    *slog.Logger
	audits *slog.Logger // log, enabled at every level
	actor  string
	notify func(store.Notification)
	now    func() time.Time
	// webhookAllowPrivate: Config.WebhookAllowPrivate.
	webhookAllowPrivate bool
	// retention: Config.Retention.
	retention store.TenantRetention
}

// NewService returns a Service over a store.
func NewService(cfg Config) *Service {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Notify == nil {
		cfg.Notify = func(store.Notification) {}
	}
	return &Service{st: cfg.Store, log: cfg.Logger, audits: logctx.Auditor(cfg.Logger),
		actor: cfg.Actor, notify: cfg.Notify, now: cfg.Now, webhookAllowPrivate: cfg.WebhookAllowPrivate,
		retention: cfg.Retention}
}

// ErrorKind says how an operation was refused.
type ErrorKind int

// The refusals an operation reports as an *Error.
const (
	// Invalid: the input is wrong (HTTP 400, CLI exit 2).
	Invalid ErrorKind = iota + 1
	// NotFound: no such tenant, or no such key or issuer of the tenant (404).
	NotFound
	// Conflict: the name or the (issuer, audience) pair is taken (409).
	Conflict
	// StateConflict: the thing is not in a state the operation can take,
	// e.g. a disabled webhook asked to redeliver (409).
	StateConflict
)

// Error is an operation refused for a reason the caller can act on. Any
// other error an operation returns is the server's (a database failure).
type Error struct {
	Kind ErrorKind
	// Field is the JSON name of the offending input, if there is one.
	Field string
	Msg   string
}

func (e *Error) Error() string {
	if e.Field != "" {
		return e.Field + ": " + e.Msg
	}
	return e.Msg
}

func invalid(field, format string, args ...any) *Error {
	return &Error{Kind: Invalid, Field: field, Msg: fmt.Sprintf(format, args...)}
}

func notFound(format string, args ...any) *Error {
	return &Error{Kind: NotFound, Msg: fmt.Sprintf(format, args...)}
}

func conflict(format string, args ...any) *Error {
	return &Error{Kind: Conflict, Msg: fmt.Sprintf(format, args...)}
}

// tenant finds a tenant by name, or says there is none. A name no tenant
// can have because PostgreSQL would refuse it as text (invalid UTF-8, a
// NUL: a path segment may hold either, escaped) is not looked for: it
// would be a 500.
func (s *Service) tenant(ctx context.Context, name string) (store.Tenant, error) {
	if !utf8.ValidString(name) || strings.IndexByte(name, 0) >= 0 {
		return store.Tenant{}, notFound("no tenant named %q", name)
	}
	t, err := s.st.TenantGetByName(ctx, name)
	if errors.Is(err, store.ErrNotFound) {
		return store.Tenant{}, notFound("no tenant named %q", name)
	}
	if err != nil {
		return store.Tenant{}, fmt.Errorf("find tenant %q: %w", name, err)
	}
	return t, nil
}

// audit logs one change. Its attributes never hold a secret: keys are named
// by their public id, issuers by their id.
func (s *Service) audit(ctx context.Context, action string, t store.Tenant, target string, attrs ...slog.Attr) {
	base := []slog.Attr{
		slog.String("action", action),
		slog.String("actor", s.actor),
		slog.String("tenant", t.Name),
		slog.String("tenant_id", t.ID),
	}
	if target != "" {
		base = append(base, slog.String("target", target))
	}
	s.audits.LogAttrs(ctx, slog.LevelInfo, "audit", append(base, attrs...)...)
}

// Page sizes of the lists.
const (
	DefaultPageLimit = 20
	MaxPageLimit     = 100
)

// checkLimit refuses a page size out of range; 0 is the default.
func checkLimit(limit int) (int, error) {
	if limit == 0 {
		return DefaultPageLimit, nil
	}
	if limit < 1 || limit > MaxPageLimit {
		return 0, invalid("limit", "must be a whole number from 1 to %d", MaxPageLimit)
	}
	return limit, nil
}

// badCursor is the refusal of a cursor the server did not issue.
func badCursor() *Error {
	return invalid("cursor", `not a cursor this server issued: pass the "nextCursor" of a previous page`)
}
