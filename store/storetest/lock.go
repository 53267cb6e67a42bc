package storetest

import (
	"context"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
)

// LockTable takes an ACCESS EXCLUSIVE lock on a table of a database and
// holds it until release is called (or the test ends): every query of the
// table waits meanwhile. It is for tests that need a request stuck on the
// database, such as a client disconnecting while its handler waits. Lock a
// table of a database of the test's own (NewDatabase), not the package's.
func LockTable(t testing.TB, dbURL, table string) (release func()) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := conn.Begin(ctx)
	if err == nil {
		_, err = tx.Exec(ctx, "LOCK TABLE "+pgx.Identifier{table}.Sanitize()+" IN ACCESS EXCLUSIVE MODE")
	}
	if err != nil {
		conn.Close(ctx)
		t.Fatalf("lock %s: %v", table, err)
	}
	var once sync.Once
	release = func() {
		once.Do(func() {
			_ = tx.Rollback(ctx)
			conn.Close(ctx)
		})
	}
	t.Cleanup(release)
	return release
}
