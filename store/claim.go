package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// A claim — a session's active turn, its lease and the instance holding
// it — is judged in a statement of its own, never inside a query of the
// sessions table. On Citus (docs/citus.md) a query of a distributed table
// runs on the worker holding the shard: its now() is that node's clock, not
// the coordinator's that wrote the lease, and its pg_locks hold none of the
// instance locks, which live on the coordinator every aapd process connects
// to. A statement that reads no table runs on the coordinator. On plain
// PostgreSQL the two are the same server.

// claimRead is a session's claim as read: its lease and the instance
// holding it.
type claimRead struct {
	lease *time.Time
	owner *int32
}

// claimVerdict is what claimStates says of a claim.
type claimVerdict struct {
	expired bool // the lease ran out (or there is none)
	dead    bool // the process holding it no longer holds its instance lock
}

// claimStates judges claims, all in one statement that reads no table, so
// that it runs where the instance locks and the lease's clock are.
func claimStates(ctx context.Context, db dbtx, claims []claimRead) ([]claimVerdict, error) {
	leases, owners := make([]*time.Time, len(claims)), make([]*int32, len(claims))
	for i, c := range claims {
		leases[i], owners[i] = c.lease, c.owner
	}
	rows, err := db.Query(ctx, `
		SELECT c.l IS NULL OR c.l < now(), c.o IS NULL OR NOT aapd_instance_alive(c.o)
		FROM unnest($1::timestamptz[], $2::integer[]) WITH ORDINALITY AS c(l, o, i) ORDER BY c.i`, leases, owners)
	if err != nil {
		return nil, interpretError(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (v claimVerdict, err error) {
		err = r.Scan(&v.expired, &v.dead)
		return v, err
	})
	if err == nil && len(out) != len(claims) {
		err = fmt.Errorf("judge %d claims: %d answers", len(claims), len(out))
	}
	return out, interpretError(err)
}

// claimState reports whether a claim's lease ran out and whether the
// process holding it is gone (claimStates of one).
func claimState(ctx context.Context, db dbtx, lease *time.Time, owner *int32) (expired, dead bool, err error) {
	v, err := claimStates(ctx, db, []claimRead{{lease, owner}})
	if err != nil {
		return false, false, err
	}
	return v[0].expired, v[0].dead, nil
}
