package store

import (
	"context"
	"fmt"
)

// InstanceCountLive counts the aapd processes serving from this database:
// those that hold their instance lock (see Instance). Replicas divide a
// tenant's limits by it, so that the limits hold across replicas without a
// database write per request. It reads no tenant data: the count is of
// processes, not of anything a tenant owns.
func (s *Store) InstanceCountLive(ctx context.Context) (int, error) {
	var n int
	err := s.pool.QueryRow(ctx, `
		SELECT count(*) FROM pg_locks
		WHERE locktype = 'advisory'
		  AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
		  AND classid = $1 AND objsubid = 2 AND granted`, int64(instanceLockKey)).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count live instances: %w", interpretError(err))
	}
	return n, nil
}
