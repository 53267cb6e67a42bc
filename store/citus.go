package store

import (
	"context"
	"errors"
	"fmt"
)

// ErrCitusWorker is returned when aapd is pointed at a Citus worker node.
// Advisory locks (each process's instance lock, goose's migration lock)
// and LISTEN/NOTIFY work only on the node a connection reaches, so every
// aapd process must connect to the coordinator, the same one
// (docs/citus.md).
var ErrCitusWorker = errors.New("this database is a Citus worker node: connect aapd to the coordinator")

// citusRoleSQL asks whether the database has the citus extension.
const citusRoleSQL = `SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus')`

// coordinatorSQL asks a Citus node whether it is the coordinator.
const coordinatorSQL = `SELECT citus_is_coordinator()`

// checkCitusRole fails with ErrCitusWorker on a Citus node that is not the
// coordinator; plain PostgreSQL passes. It says whether the database is
// Citus's. q runs a one-row query.
func checkCitusRole(ctx context.Context, q func(ctx context.Context, sql string, dest ...any) error) (citus bool, err error) {
	if err := q(ctx, citusRoleSQL, &citus); err != nil {
		return false, fmt.Errorf("look for the citus extension: %w", interpretError(err))
	}
	if !citus {
		return false, nil
	}
	var coordinator bool
	if err := q(ctx, coordinatorSQL, &coordinator); err != nil {
		return true, fmt.Errorf("ask Citus for the coordinator: %w", interpretError(err))
	}
	if !coordinator {
		return true, ErrCitusWorker
	}
	return true, nil
}
