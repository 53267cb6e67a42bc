package store

import (
	"context"
	"time"
)

// A claim — a session's active turn, its lease and the instance holding
// it — is judged in a statement of its own, never inside a query of the
// sessions table. On Citus (docs/citus.md) a query of a distributed table
// runs on the worker holding the shard: its now() is that node's clock, not
// the coordinator's that wrote the lease, and its pg_locks hold none of the
// instance locks, which live on the coordinator every aapd process connects
// to. A statement that reads no table runs on the coordinator. On plain
// PostgreSQL the two are the same server.

// claimStateSQL answers, for a lease ($1) and the instance holding it ($2),
// whether the lease ran out and whether the instance is gone.
const claimStateSQL = `SELECT $1::timestamptz IS NULL OR $1::timestamptz < now(),
	$2::integer IS NULL OR NOT aapd_instance_alive($2::integer)`

// claimState reports whether a claim's lease ran out and whether the
// process holding it is gone, asked of the database aapd is connected to.
func claimState(ctx context.Context, db dbtx, lease *time.Time, owner *int32) (expired, dead bool, err error) {
	err = db.QueryRow(ctx, claimStateSQL, lease, owner).Scan(&expired, &dead)
	return expired, dead, interpretError(err)
}
