package store

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Errors callers tell apart with errors.Is.
var (
	// ErrNotFound: no such row for this tenant.
	ErrNotFound = errors.New("not found")
	// ErrConflict: the row would duplicate a unique value.
	ErrConflict = errors.New("already exists")
	// ErrUnavailable: the database cannot be reached; retry later.
	ErrUnavailable = errors.New("database unavailable")
	// ErrClaimLost: the turn no longer holds its session (cancelled, deleted,
	// or taken over after its lease expired).
	ErrClaimLost = errors.New("turn no longer holds its session")
	// ErrNotMigrated: the database has no aapd schema yet.
	ErrNotMigrated = errors.New("the database is not migrated: run `aapd migrate` (or start `aapd serve`, which migrates)")
	// ErrIdempotencyMismatch: an idempotency key was reused with another body.
	ErrIdempotencyMismatch = errors.New("idempotency key reused with a different request")
	// ErrSessionEnded: the session was ended (SessionEnd) and takes no
	// more turns.
	ErrSessionEnded = errors.New("the session has ended")
	// ErrNotPending: the session does not wait on the client for a tool
	// call of that id.
	ErrNotPending = errors.New("no such pending tool call")
)

// TurnRunningError reports that a session already runs a turn.
type TurnRunningError struct {
	TurnID string
}

func (e *TurnRunningError) Error() string {
	return fmt.Sprintf("session is running turn %s", e.TurnID)
}

// interpretError maps database errors to the store's sentinels, keeping the
// original in the chain.
func interpretError(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return ErrNotFound
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case pgErr.Code == "23505":
			return fmt.Errorf("%w: %w", ErrConflict, err)
		case strings.HasPrefix(pgErr.Code, "08"), // connection exception
			pgErr.Code == "57P01", pgErr.Code == "57P02", pgErr.Code == "57P03": // shutdown, crash, cannot connect now
			return fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		return err
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	var connErr *pgconn.ConnectError
	var netErr net.Error
	if errors.As(err, &connErr) || errors.As(err, &netErr) || pgconn.SafeToRetry(err) ||
		strings.Contains(err.Error(), "conn closed") || strings.Contains(err.Error(), "closed pool") ||
		strings.Contains(err.Error(), "unexpected EOF") {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return err
}

// redactURL hides the password of a connection URL for messages.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return s
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	return u.String()
}
