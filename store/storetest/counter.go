package storetest

import (
	"context"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
)

// Counter is a store tracer (store.Config.Tracer) that counts what a piece
// of work costs the database: round trips (a statement, a batch of
// statements, or a statement's preparation each) and commits (an explicit
// COMMIT, or a statement or batch that writes outside a transaction).
type Counter struct {
	mu         sync.Mutex
	roundTrips int
	commits    int
	statements []string
	inTx       map[*pgx.Conn]bool
}

// Counts returns the round trips and commits so far, and the statements.
func (c *Counter) Counts() (roundTrips, commits int, statements []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.roundTrips, c.commits, append([]string(nil), c.statements...)
}

// Reset starts counting again.
func (c *Counter) Reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.roundTrips, c.commits, c.statements = 0, 0, nil
}

func isWrite(sql string) bool {
	s := strings.ToUpper(strings.TrimSpace(sql))
	for _, w := range []string{"INSERT", "UPDATE", "DELETE", "WITH"} {
		if strings.HasPrefix(s, w) {
			return w != "WITH" || strings.Contains(s, "UPDATE ") || strings.Contains(s, "INSERT ") || strings.Contains(s, "DELETE ")
		}
	}
	return false
}

// statement accounts one statement of conn (its round trip is counted by
// the caller). It reports whether the statement commits.
func (c *Counter) statement(conn *pgx.Conn, sql string) bool {
	if c.inTx == nil {
		c.inTx = map[*pgx.Conn]bool{}
	}
	c.statements = append(c.statements, strings.Join(strings.Fields(sql), " "))
	up := strings.ToUpper(strings.TrimSpace(sql))
	switch {
	case strings.HasPrefix(up, "BEGIN"): // BEGIN, or BEGIN and the tenant's declaration (store's inTx)
		c.inTx[conn] = true
		return false
	case up == "COMMIT":
		c.inTx[conn] = false
		return true
	case up == "ROLLBACK":
		c.inTx[conn] = false
		return false
	}
	return !c.inTx[conn] && isWrite(sql)
}

// TraceQueryStart counts a statement sent on its own.
func (c *Counter) TraceQueryStart(ctx context.Context, conn *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.roundTrips++
	if c.statement(conn, data.SQL) {
		c.commits++
	}
	return ctx
}

// TraceQueryEnd is part of pgx.QueryTracer.
func (c *Counter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

type batchKey struct{}

// TraceBatchStart counts a batch's round trip.
func (c *Counter) TraceBatchStart(ctx context.Context, conn *pgx.Conn, data pgx.TraceBatchStartData) context.Context {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.roundTrips++
	inTx := c.inTx[conn]
	commits := false
	for _, q := range data.Batch.QueuedQueries {
		commits = c.statement(conn, q.SQL) || commits
	}
	// A batch outside a transaction is one, implicitly.
	if commits || (!inTx && !c.inTx[conn] && anyWrite(data.Batch)) {
		c.commits++
	}
	return ctx
}

func anyWrite(b *pgx.Batch) bool {
	for _, q := range b.QueuedQueries {
		if isWrite(q.SQL) {
			return true
		}
	}
	return false
}

// TraceBatchQuery is part of pgx.BatchTracer.
func (c *Counter) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

// TraceBatchEnd is part of pgx.BatchTracer.
func (c *Counter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// TracePrepareStart counts the round trip of preparing a statement.
func (c *Counter) TracePrepareStart(ctx context.Context, _ *pgx.Conn, _ pgx.TracePrepareStartData) context.Context {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.roundTrips++
	return ctx
}

// TracePrepareEnd is part of pgx.PrepareTracer.
func (c *Counter) TracePrepareEnd(context.Context, *pgx.Conn, pgx.TracePrepareEndData) {}
