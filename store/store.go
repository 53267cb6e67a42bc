// Package store keeps aapd's state in Postgres: tenants, API keys, sessions,
// both histories and turns.
//
// All SQL of aapd lives here. Every method that touches a tenant's data takes
// the tenant in its parameters and filters on it, so no query can forget it;
// the only queries that run before a tenant is known are the lookups of an API
// key by its public id (authentication itself) and of a tenant by name
// (administration). Row types stay inside this package; nothing outside it
// imports pgx.
package store

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/trace"
)

// Config configures a Store.
type Config struct {
	// DatabaseURL is a Postgres connection string (URL or key=value form).
	DatabaseURL string
	// EncryptionKey seals secret option values at rest (AES-256-GCM, 32
	// bytes). Without one, the store keeps a generated key in the database
	// itself and warns: fine for development, not for production.
	EncryptionKey []byte
	// MaxConns bounds the connection pool; zero means pgxpool's default.
	MaxConns int32
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Tracer observes every statement the store sends (pgx's QueryTracer,
	// and BatchTracer if it implements it): tests count round trips and
	// commits with it.
	Tracer pgx.QueryTracer
	// TracerProvider, when set, traces every statement with OpenTelemetry
	// inside the trace of the request or turn that sent it (trace.go).
	TracerProvider trace.TracerProvider
	// Notices, when set, receives the text of every notice the database
	// sends: tests on Citus read, with citus.log_remote_commands on, which
	// worker each statement went to and how a transaction committed.
	Notices func(text string)
	// AppRole is the role the store's connections take for a tenant's
	// work, held by the tenant wall (wall.go); ChoresRole the role of the
	// work that spans tenants, which passes it. Empty means
	// DefaultAppRole and DefaultChoresRole, which migrating creates. The
	// URL's login role must be allowed to take both: a superuser, or a
	// role granted them (docs/operations.md).
	AppRole, ChoresRole string
}

// Store is aapd's database. It is safe for concurrent use.
type Store struct {
	// pool's connections are of the tenant wall's app role, chores's of
	// its chores role (wall.go).
	pool   *pgxpool.Pool
	chores *pgxpool.Pool
	// appRole and choresRole are the roles the pools take.
	appRole, choresRole string
	// citus: the database is a Citus coordinator's (an import writes
	// its rows otherwise: sessionimport.go).
	citus  bool
	sealer *sealer
	now    func() time.Time
	// webhooksQueued: see WebhooksQueued.
	webhooksQueued chan string
}

// Open connects to the database. It does not migrate it (see Migrate); it
// fails if the database cannot be reached.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	appRole, choresRole := cmp.Or(cfg.AppRole, DefaultAppRole), cmp.Or(cfg.ChoresRole, DefaultChoresRole)
	slots := newUsageSlots()
	pool, err := openPool(ctx, cfg, appRole, cfg.MaxConns, slots)
	if err != nil {
		return nil, err
	}
	citus, err := checkCitusRole(ctx, func(ctx context.Context, query string, dest ...any) error {
		return pool.QueryRow(ctx, query).Scan(dest...)
	})
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("open database %s: %w", redactURL(cfg.DatabaseURL), err)
	}
	// The chores are few and short: a pool of a quarter of the size.
	chores, err := openPool(ctx, cfg, choresRole, max(2, pool.Config().MaxConns/4), slots)
	if err != nil {
		pool.Close()
		return nil, err
	}
	s := &Store{pool: pool, chores: chores, appRole: appRole, choresRole: choresRole, citus: citus, now: cfg.Now, webhooksQueued: make(chan string, 1024)}
	if s.now == nil {
		s.now = time.Now
	}
	if s.sealer, err = s.openSealer(ctx, cfg.EncryptionKey); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// openPool opens a pool of connections that take role as they start (a
// parameter of the connection's start: no round trip more), each with
// its own slot of the usage rollup from slots (usage.go), set the same way.
func openPool(ctx context.Context, cfg Config, role string, maxConns int32, slots *usageSlots) (*pgxpool.Pool, error) {
	pcfg, err := pgxpool.ParseConfig(cfg.DatabaseURL)
	if err != nil {
		return nil, fmt.Errorf("parse database url: %w", err)
	}
	if maxConns > 0 {
		pcfg.MaxConns = maxConns
	}
	pcfg.ConnConfig.RuntimeParams["role"] = role
	pcfg.BeforeConnect = func(_ context.Context, cc *pgx.ConnConfig) error {
		cc.RuntimeParams[usageSlotParam] = slots.next()
		return nil
	}
	if t := queryTracer(cfg); t != nil {
		pcfg.ConnConfig.Tracer = t
	}
	if cfg.Notices != nil {
		pcfg.ConnConfig.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
			cfg.Notices(n.Message + "\n" + n.Detail)
		}
	}
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, roleError(role, connectError(&pcfg.ConnConfig.Config, err))
	}
	return pool, nil
}

// Close releases every connection.
func (s *Store) Close() {
	s.pool.Close()
	s.chores.Close()
}

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.pool.Ping(ctx); err != nil {
		return fmt.Errorf("ping database: %w", interpretError(err))
	}
	return nil
}

// ConnString returns the connection string the store was opened with.
func (s *Store) ConnString() string { return s.pool.Config().ConnString() }

// dbtx is what both the pool and a transaction offer.
type dbtx interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// inTx runs fn in a transaction of tenantID (declared with its BEGIN, in
// one round trip: wall.go), committing if fn returns nil and rolling back
// otherwise. Transactions never nest.
func (s *Store) inTx(ctx context.Context, tenantID string, fn func(tx pgx.Tx) error) error {
	return s.tenantTx(ctx, tenantID, "BEGIN", fn)
}

// tenantTx runs fn in a transaction begun with begin and declared.
func (s *Store) tenantTx(ctx context.Context, tenantID, begin string, fn func(tx pgx.Tx) error) (err error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return interpretError(err)
	}
	defer conn.Release()
	tx, err := beginTenant(ctx, conn, begin, tenantID)
	if err != nil {
		return interpretError(err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback(context.WithoutCancel(ctx))
		}
	}()
	if err = fn(tx); err != nil {
		return err
	}
	return interpretError(tx.Commit(ctx))
}

// readTx runs fn in a read-only REPEATABLE READ transaction of tenantID:
// a snapshot of several reads.
func (s *Store) readTx(ctx context.Context, tenantID string, fn func(tx pgx.Tx) error) error {
	return s.tenantTx(ctx, tenantID, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", fn)
}

// choresTx runs fn in a transaction of the chores role, which passes the
// tenant wall (wall.go): only for work that spans tenants.
func (s *Store) choresTx(ctx context.Context, fn func(tx pgx.Tx) error) (err error) {
	tx, err := s.chores.Begin(ctx)
	if err != nil {
		return interpretError(err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback(context.WithoutCancel(ctx))
		}
	}()
	if err = fn(tx); err != nil {
		return err
	}
	return interpretError(tx.Commit(ctx))
}

// CheckDatabaseURL reports what is wrong with a connection URL, without
// connecting: a mistake in it is the user's, told before any work starts.
func CheckDatabaseURL(databaseURL string) error {
	_, err := pgx.ParseConfig(databaseURL)
	return err
}

func parseConnConfig(databaseURL string) (*pgx.ConnConfig, error) {
	cfg, err := pgx.ParseConfig(databaseURL)
	if err != nil {
		return nil, fmt.Errorf("parse database url: %w", err)
	}
	return cfg, nil
}

// sendTx sends a transaction as one batch, from BEGIN to COMMIT, in one
// round trip, and reads the rows of the statements scan names (one row
// each; the rest are executed). A statement the server refused voids the
// transaction, which is rolled back, and its error is returned; a lost
// answer closes the connection and wraps ErrOutcomeUnknown.
func sendTx(ctx context.Context, conn *pgxpool.Conn, b *pgx.Batch, scan map[int]func(pgx.Row) error) error {
	br := conn.SendBatch(ctx, b)
	var err error
	for i := 0; err == nil && i < b.Len(); i++ {
		if f, ok := scan[i]; ok {
			err = f(br.QueryRow())
			continue
		}
		_, err = br.Exec()
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	switch {
	case err == nil:
		return nil
	case refused(err):
		_, _ = conn.Exec(context.WithoutCancel(ctx), "ROLLBACK")
		return interpretError(err)
	}
	conn.Conn().Close(context.WithoutCancel(ctx))
	return fmt.Errorf("%w: %w", ErrOutcomeUnknown, interpretError(err))
}
