package store

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// ErrNoDatabase: the server has no database of the name the URL gives (it
// is not created yet).
var ErrNoDatabase = errors.New("no such database")

// connectFailure is a failed connection, told in one line that names the
// server and what went wrong; errors.Is finds the store's sentinel
// (ErrNoDatabase, ErrUnavailable) and pgx's error in it.
type connectFailure struct {
	msg  string
	errs []error
}

func (e *connectFailure) Error() string   { return e.msg }
func (e *connectFailure) Unwrap() []error { return e.errs }

// connectError tells why connecting to the server of cfg failed: the
// server and the one cause (connection refused, no such host, no such
// database, authentication failed), instead of pgx's account of every
// address it tried. An error that is not a failure to connect is
// interpreted as any other.
func connectError(cfg *pgconn.Config, err error) error {
	var connErr *pgconn.ConnectError
	if !errors.As(err, &connErr) {
		return interpretError(err)
	}
	server := "PostgreSQL at " + net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port)))
	var pgErr *pgconn.PgError
	var dnsErr *net.DNSError
	var opErr *net.OpError
	switch {
	case errors.As(err, &pgErr) && pgErr.Code == "3D000": // invalid_catalog_name
		return &connectFailure{msg: fmt.Sprintf("%s has no database %q", server, cfg.Database), errs: []error{ErrNoDatabase, err}}
	case errors.As(err, &pgErr):
		// The server answered and refused: a role, a password, too many
		// connections, starting up.
		return &connectFailure{msg: fmt.Sprintf("connect to %s (database %q, user %q): %s", server, cfg.Database, cfg.User, pgErr.Message),
			errs: []error{interpretError(pgErr), err}}
	case errors.As(err, &dnsErr):
		return &connectFailure{msg: fmt.Sprintf("connect to %s: %v", server, dnsErr), errs: []error{ErrUnavailable, err}}
	case errors.As(err, &opErr):
		cause := opErr.Err
		var sysErr *os.SyscallError
		if errors.As(cause, &sysErr) {
			cause = sysErr.Err // "connection refused", not "connect: connection refused"
		}
		return &connectFailure{msg: fmt.Sprintf("connect to %s: %v (is PostgreSQL running there?)", server, cause), errs: []error{ErrUnavailable, err}}
	}
	// pgx tells of each address it tried on a line of its own.
	detail := strings.ReplaceAll(errors.Unwrap(connErr).Error(), "\n", "; ")
	return &connectFailure{msg: fmt.Sprintf("connect to %s: %s", server, detail), errs: []error{ErrUnavailable, err}}
}
