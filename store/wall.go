package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The tenant wall (docs/security.md). Every table a tenant owns has
// row-level security (migration 00030): a row is seen and written only by
// a transaction that declared its tenant, and a statement in no such
// transaction sees nothing. The store's connections take one of two roles
// as they open:
//
//   - AppRole (s.pool), held by the policies. Every statement about a
//     tenant runs in a transaction that declares it first, in the round
//     trip of its first statement: tenantDB for one statement, inTx for a
//     transaction of several, queueBegin for a batch.
//   - ChoresRole (s.chores), which bypasses them: the one way around the
//     wall, for the work that spans tenants and names no tenant yet (an API
//     key's or a token issuer's tenant at authentication, the heartbeat,
//     the queue's dispatcher, the webhook deliverers' scan and pruning, the
//     schedulers' scan for due ticks, a tenant's deletion). Only the methods that say so in their doc
//     comment use it; grep for "s.chores".

// Default roles (migration 00030 creates them).
const (
	DefaultAppRole    = "aapd_app"
	DefaultChoresRole = "aapd_chores"
)

// declareSQL declares the tenant of the transaction it runs in.
const declareSQL = `SELECT aapd_declare_tenant($1)`

// queueBegin queues the start of a tenant's transaction in b: BEGIN and the
// declaration, sent in the round trip of the batch's first statement.
func queueBegin(b *pgx.Batch, tenantID string) {
	b.Queue("BEGIN")
	b.Queue(declareSQL, tenantID)
}

// beginLen is the number of statements queueBegin queues.
const beginLen = 2

// tenantLiteral returns a tenant id as the SQL literal of a uuid; an id
// that is not one owns no rows: ErrNotFound.
func tenantLiteral(tenantID string) (string, error) {
	id, err := uuid.Parse(tenantID)
	if err != nil {
		return "", fmt.Errorf("tenant %q: %w", tenantID, ErrNotFound)
	}
	return "'" + id.String() + "'", nil
}

// beginTenant begins a transaction of tenantID on conn with begin (a BEGIN
// statement), declared in the same round trip: the two are sent as one
// query string, which takes the tenant as a literal.
func beginTenant(ctx context.Context, conn *pgxpool.Conn, begin, tenantID string) (pgx.Tx, error) {
	lit, err := tenantLiteral(tenantID)
	if err != nil {
		return nil, err
	}
	return conn.BeginTx(ctx, pgx.TxOptions{BeginQuery: begin + "; SELECT aapd_declare_tenant(" + lit + ")"})
}

// tenantDB runs single statements of one tenant, each in a transaction
// that declares it: BEGIN, the declaration, the statement and COMMIT, sent
// as one batch (one round trip, as the statement alone was).
type tenantDB struct {
	pool     *pgxpool.Pool
	tenantID string
}

// tenant returns the statements of tenantID.
func (s *Store) tenant(tenantID string) tenantDB { return tenantDB{s.pool, tenantID} }

// send sends BEGIN, the declaration, sql and COMMIT, and returns the
// results with the BEGIN and the declaration read.
func (t tenantDB) send(ctx context.Context, sql string, args []any) (*pgxpool.Conn, pgx.BatchResults, error) {
	conn, err := t.pool.Acquire(ctx)
	if err != nil {
		return nil, nil, err
	}
	b := &pgx.Batch{}
	queueBegin(b, t.tenantID)
	b.Queue(sql, args...)
	b.Queue("COMMIT")
	br := conn.SendBatch(ctx, b)
	for range beginLen {
		if _, err := br.Exec(); err != nil {
			return nil, nil, endBatch(ctx, conn, br, err)
		}
	}
	return conn, br, nil
}

// endBatch closes br and releases conn, rolling back a transaction the
// batch left open (a statement refused voids it, and the COMMIT after it
// is never run); it returns err, or the first error closing found.
func endBatch(ctx context.Context, conn *pgxpool.Conn, br pgx.BatchResults, err error) error {
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if !conn.Conn().IsClosed() && conn.Conn().PgConn().TxStatus() != 'I' {
		if _, rerr := conn.Exec(context.WithoutCancel(ctx), "ROLLBACK"); rerr != nil {
			conn.Conn().Close(context.WithoutCancel(ctx))
		}
	}
	conn.Release()
	return err
}

// Exec runs a statement that returns no rows.
func (t tenantDB) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	conn, br, err := t.send(ctx, sql, args)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	tag, err := br.Exec()
	if err == nil {
		_, err = br.Exec()
	}
	return tag, endBatch(ctx, conn, br, err)
}

// Query runs a statement that returns rows. The transaction commits as
// the rows end: their Err tells if it did not.
func (t tenantDB) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	conn, br, err := t.send(ctx, sql, args)
	if err != nil {
		return nil, err
	}
	rows, err := br.Query()
	if err != nil {
		return nil, endBatch(ctx, conn, br, err)
	}
	return &tenantRows{Rows: rows, ctx: ctx, conn: conn, br: br}, nil
}

// QueryRow runs a statement that returns one row (pgx.ErrNoRows at Scan
// if it returns none).
func (t tenantDB) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	rows, err := t.Query(ctx, sql, args...)
	return tenantRow{rows: rows, err: err}
}

// tenantRows are a tenantDB statement's rows; the end of the rows reads
// the COMMIT's answer and gives the connection back.
type tenantRows struct {
	pgx.Rows
	ctx  context.Context
	conn *pgxpool.Conn
	br   pgx.BatchResults
	done bool
	err  error
}

func (r *tenantRows) Next() bool {
	if r.done {
		return false
	}
	if r.Rows.Next() {
		return true
	}
	r.finish()
	return false
}

func (r *tenantRows) finish() {
	if r.done {
		return
	}
	r.done = true
	r.Rows.Close()
	err := r.Rows.Err()
	if err == nil {
		_, err = r.br.Exec() // COMMIT
	}
	r.err = endBatch(r.ctx, r.conn, r.br, err)
}

func (r *tenantRows) Close() { r.finish() }

func (r *tenantRows) Err() error {
	if r.err != nil {
		return r.err
	}
	return r.Rows.Err()
}

// tenantRow is a tenantDB statement's one row.
type tenantRow struct {
	rows pgx.Rows
	err  error
}

func (r tenantRow) Scan(dest ...any) error {
	if r.err != nil {
		return r.err
	}
	defer r.rows.Close()
	if !r.rows.Next() {
		if err := r.rows.Err(); err != nil {
			return err
		}
		return pgx.ErrNoRows
	}
	if err := r.rows.Scan(dest...); err != nil {
		return err
	}
	r.rows.Close()
	return r.rows.Err()
}

// errNoRole explains a role the server cannot take.
func roleError(role string, err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && (pgErr.Code == "22023" || pgErr.Code == "42501" || pgErr.Code == "42704") {
		return fmt.Errorf("take role %s: %s (migrate the database first, or create the role and grant it to the server's login role: docs/operations.md)", role, pgErr.Message)
	}
	return err
}
