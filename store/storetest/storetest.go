// Package storetest gives tests a real, migrated Postgres database.
//
// Tests reach Postgres through TEST_DATABASE_URL: a server URL whose user may
// create databases (the Makefile sets it to the local server). Without it,
// on a machine with Docker, a PostgreSQL container is started with
// testcontainers-go. Without either, tests fail saying what to do.
//
// Each test package gets a database of its own (Main creates and drops it),
// and each test isolates itself with a tenant of its own (NewTenant) or, when
// it needs the whole database, with NewDatabase.
package storetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/testcontainers/testcontainers-go"
	tcpostgres "github.com/testcontainers/testcontainers-go/modules/postgres"
	"github.com/testcontainers/testcontainers-go/wait"

	"github.com/aapd/aapd/auth"
	"github.com/aapd/aapd/store"
)

// EnvURL names the variable holding the test server's URL.
const EnvURL = "TEST_DATABASE_URL"

const howTo = `no Postgres for the tests: set ` + EnvURL + ` to a server URL whose user may CREATE DATABASE,
e.g. ` + EnvURL + `=postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable go test ./...
(make test does this for the local server), or install Docker so the tests can start PostgreSQL themselves`

var (
	pkgURL    string // the package's own database, set by Main
	serverURL string // the server the databases are created on

	// On a Citus coordinator (make test-citus), its nodes.
	citus        bool
	citusCoord   citusNode
	citusWorkers []citusNode
)

// Citus reports whether the tests run on a Citus coordinator, each test
// database distributed over its workers (make test-citus).
func Citus() bool { return citus }

// Main runs a test binary against a fresh migrated database of its own,
// dropped afterwards. Use it from TestMain: os.Exit(storetest.Main(m)).
func Main(m *testing.M) int {
	ctx := context.Background()
	base, stop, err := server(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "storetest:", err)
		return 1
	}
	defer stop()
	serverURL = base
	if citusCoord, citusWorkers, citus, err = citusCluster(ctx, base); err != nil {
		fmt.Fprintln(os.Stderr, "storetest:", err)
		return 1
	}
	dropStale(ctx, base)
	u, drop, err := createDatabase(ctx, base)
	if err != nil {
		fmt.Fprintln(os.Stderr, "storetest:", err)
		return 1
	}
	defer drop()
	pkgURL = u
	return m.Run()
}

// URL returns the URL of the package's test database.
func URL(t testing.TB) string {
	t.Helper()
	if pkgURL == "" {
		t.Fatal("storetest: call storetest.Main from the package's TestMain")
	}
	return pkgURL
}

// Open opens a store on the package's test database, closed when the test
// ends.
func Open(t testing.TB) *store.Store {
	t.Helper()
	return OpenURL(t, URL(t))
}

// OpenURL opens a store on a database, closed when the test ends.
func OpenURL(t testing.TB, u string) *store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), store.Config{DatabaseURL: u})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(st.Close)
	return st
}

// NewDatabase creates a fresh migrated database for one test, dropped when
// the test ends, and returns its URL.
func NewDatabase(t testing.TB) string {
	t.Helper()
	return testDatabase(t, createDatabase)
}

// NewEmptyDatabase creates a database with no schema for one test, dropped
// when the test ends, and returns its URL.
func NewEmptyDatabase(t testing.TB) string {
	t.Helper()
	return testDatabase(t, newDatabase)
}

// testDatabase makes a database with create, dropped when the test ends.
func testDatabase(t testing.TB, create func(context.Context, string) (string, func(), error)) string {
	t.Helper()
	if serverURL == "" {
		t.Fatal("storetest: call storetest.Main from the package's TestMain")
	}
	u, drop, err := create(context.Background(), serverURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(drop)
	return u
}

// Tenant is a test's own tenant and an API key of it.
type Tenant struct {
	store.Tenant
	Key string
}

// NewTenant creates a tenant with a unique name and an API key for it.
func NewTenant(t testing.TB, st *store.Store) Tenant {
	t.Helper()
	ctx := context.Background()
	tn, err := st.TenantCreate(ctx, strings.ReplaceAll(t.Name(), "/", "-")+"-"+randomHex(4))
	if err != nil {
		t.Fatalf("create tenant: %v", err)
	}
	return Tenant{Tenant: tn, Key: NewKey(t, st, tn.ID, "test")}
}

// NewKey creates another API key of a tenant, with every scope, and
// returns it.
func NewKey(t testing.TB, st *store.Store, tenantID, label string) string {
	t.Helper()
	key, err := auth.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.APIKeyCreate(context.Background(), store.APIKeyCreateParams{TenantID: tenantID, PublicID: key.PublicID, Hash: key.Hash, Name: label}); err != nil {
		t.Fatalf("create key: %v", err)
	}
	return key.Secret
}

// server returns the URL of the Postgres server to create databases on.
func server(ctx context.Context) (string, func(), error) {
	if u := os.Getenv(EnvURL); u != "" {
		return u, func() {}, nil
	}
	if !dockerAvailable() {
		return "", nil, errors.New(howTo)
	}
	c, err := tcpostgres.Run(ctx, "postgres:15-alpine",
		tcpostgres.WithUsername("postgres"), tcpostgres.WithPassword("postgres"),
		testcontainers.WithWaitStrategy(wait.ForLog("database system is ready to accept connections").
			WithOccurrence(2).WithStartupTimeout(60*time.Second)))
	if err != nil {
		return "", nil, fmt.Errorf("start PostgreSQL with Docker: %w\n%s", err, howTo)
	}
	u, err := c.ConnectionString(ctx, "sslmode=disable")
	if err != nil {
		return "", nil, err
	}
	return u, func() { _ = testcontainers.TerminateContainer(c) }, nil
}

func dockerAvailable() bool {
	if _, err := exec.LookPath("docker"); err != nil {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return exec.CommandContext(ctx, "docker", "info").Run() == nil
}

// dbPrefix names the databases tests create: aapd_test_<unix time>_<random>.
const dbPrefix = "aapd_test_"

// createDatabase creates a migrated database.
func createDatabase(ctx context.Context, base string) (string, func(), error) {
	u, drop, err := newDatabase(ctx, base)
	if err != nil {
		return "", nil, err
	}
	if _, err := store.Migrate(ctx, u); err != nil {
		drop()
		return "", nil, err
	}
	return u, drop, nil
}

// newDatabase creates an empty database.
func newDatabase(ctx context.Context, base string) (string, func(), error) {
	name := fmt.Sprintf("%s%d_%s", dbPrefix, time.Now().Unix(), randomHex(4))
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		return "", nil, fmt.Errorf("connect to %s: %w\n%s", EnvURL, err, howTo)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", nil, fmt.Errorf("create test database: %w", err)
	}
	drop := func() {
		dropDatabase(context.Background(), base, name)
		if citus {
			citusDrop(context.Background(), base, name, citusWorkers)
		}
	}
	if citus {
		if err := citusJoin(ctx, base, name, citusCoord, citusWorkers); err != nil {
			drop()
			return "", nil, err
		}
	}
	u, err := withDatabase(base, name)
	if err != nil {
		drop()
		return "", nil, err
	}
	return u, drop, nil
}

func dropDatabase(ctx context.Context, base, name string) {
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		return
	}
	defer conn.Close(ctx)
	_, _ = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
}

// dropStale drops test databases more than an hour old: those of test runs
// that were killed before they could clean up.
func dropStale(ctx context.Context, base string) {
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		return
	}
	rows, err := conn.Query(ctx, `SELECT datname FROM pg_database WHERE datname LIKE 'aapd\_test\_%'`)
	var stale []string
	if err == nil {
		for rows.Next() {
			var name string
			if rows.Scan(&name) != nil {
				continue
			}
			ts, _, _ := strings.Cut(strings.TrimPrefix(name, dbPrefix), "_")
			if sec, err := strconv.ParseInt(ts, 10, 64); err == nil && time.Since(time.Unix(sec, 0)) > time.Hour {
				stale = append(stale, name)
			}
		}
		rows.Close()
	}
	conn.Close(ctx)
	for _, name := range stale {
		dropDatabase(ctx, base, name)
		if citus {
			citusDrop(ctx, base, name, citusWorkers)
		}
	}
}

// withDatabase returns base with its database replaced by name.
func withDatabase(base, name string) (string, error) {
	if strings.Contains(base, "://") {
		u, err := url.Parse(base)
		if err != nil {
			return "", fmt.Errorf("parse %s: %w", EnvURL, err)
		}
		u.Path = "/" + name
		return u.String(), nil
	}
	return base + " dbname=" + name, nil // key=value form: the last dbname wins
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Scan runs a query on a database and scans its one row into dest: for
// tests that check what is stored at rest.
func Scan(t testing.TB, dbURL, query string, args []any, dest ...any) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if err := conn.QueryRow(ctx, query, args...).Scan(dest...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

// Exec runs a statement on a database: for tests and benchmarks that need
// the database in a given state (e.g. VACUUM, as autovacuum would do).
func Exec(t testing.TB, dbURL, sql string, args ...any) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// MissingDatabase returns the URL of a database the test server does not
// have, for tests of what aapd does then, and a func reporting whether it
// exists by now. Should the test create it, it is dropped when the test
// ends.
func MissingDatabase(t testing.TB) (u string, exists func() bool) {
	t.Helper()
	if serverURL == "" {
		t.Fatal("storetest: call storetest.Main from the package's TestMain")
	}
	name := fmt.Sprintf("%s%d_%s_missing", dbPrefix, time.Now().Unix(), randomHex(4))
	u, err := withDatabase(serverURL, name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dropDatabase(context.Background(), serverURL, name) })
	return u, func() bool {
		var n int
		Scan(t, serverURL, `SELECT count(*) FROM pg_database WHERE datname = $1`, []any{name}, &n)
		return n == 1
	}
}

// AgeSession makes a session look last changed age ago, as the retention
// sweeper judges idleness: tests move its clock by writing the past into
// the database instead of waiting.
func AgeSession(t testing.TB, dbURL, tenantID, sessionID string, age time.Duration) {
	t.Helper()
	Exec(t, dbURL, `UPDATE sessions SET updated_at = now() - $3 * interval '1 second' WHERE tenant_id = $1 AND id = $2`,
		tenantID, sessionID, age.Seconds())
}
