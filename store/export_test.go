package store

import (
	"context"
	"strings"
	"testing"
)

// What the listing tests EXPLAIN: the listings' exact statements.
const (
	SessionListSQL        = sessionListSQL
	SessionListByOwnerSQL = sessionListByOwnerSQL
	TurnListSQL           = turnListSQL
	UsageSQL              = usageSQL
)

// DropSessionListTenantFilter makes SessionList forget its tenant filter
// until the test ends: the forgotten WHERE the tenant wall must stop. The
// test must not be parallel (SessionList's statement is the package's).
func DropSessionListTenantFilter(t testing.TB) {
	sessionListQuery = strings.Replace(sessionListSQL, "tenant_id = $1", "$1::uuid IS NOT NULL", 1)
	if sessionListQuery == sessionListSQL {
		t.Fatal("SessionList's statement has no tenant filter to drop")
	}
	t.Cleanup(func() { sessionListQuery = sessionListSQL })
}

// UsageSlotsOfConnections holds n of the store's connections at once and
// returns the usage slot each took as it started (usage.go).
func (s *Store) UsageSlotsOfConnections(ctx context.Context, n int) ([]string, error) {
	var slots []string
	for range n {
		conn, err := s.pool.Acquire(ctx)
		if err != nil {
			return nil, err
		}
		defer conn.Release()
		var slot string
		if err := conn.QueryRow(ctx, `SELECT current_setting('`+usageSlotParam+`', true)`).Scan(&slot); err != nil {
			return nil, err
		}
		slots = append(slots, slot)
	}
	return slots, nil
}
