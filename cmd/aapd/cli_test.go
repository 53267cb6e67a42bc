package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aapd/aapd/httpapi"
	"github.com/aapd/aapd/store/storetest"
)

// cliResult is what one aapd command line did.
type cliResult struct {
	stdout, stderr string
	err            error
}

// aapd runs a command line through run, as main does.
func aapd(t *testing.T, args ...string) cliResult {
	t.Helper()
	var stdout, stderr bytes.Buffer
	// A whole migration on Citus distributes every table over its workers
	// (00009 alone took 13 s at load 19 in make test-citus, and the lot
	// more than 30 s): migrate gets minutes, every other command seconds.
	timeout := 30 * time.Second
	if len(args) > 0 && args[0] == "migrate" {
		timeout = 3 * time.Minute
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	err := run(ctx, args, &stdout, &stderr)
	return cliResult{stdout: stdout.String(), stderr: stderr.String(), err: err}
}

// ok fails the test unless the command succeeded.
func (r cliResult) ok(t *testing.T) cliResult {
	t.Helper()
	if r.err != nil {
		t.Fatalf("command failed: %v\nstderr: %s", r.err, r.stderr)
	}
	return r
}

// failed checks a command's failure: the exit code main would use, and an
// error message that is one clear line naming what went wrong.
func (r cliResult) failed(t *testing.T, code int, want string) {
	t.Helper()
	if r.err == nil {
		t.Fatalf("command succeeded, want exit %d (%s); stdout: %q", code, want, r.stdout)
	}
	msg := r.err.Error()
	if got := exitCode(r.err); got != code {
		t.Errorf("exit code %d, want %d (error %q)", got, code, msg)
	}
	if strings.TrimSpace(msg) == "" || strings.Contains(msg, "\n") {
		t.Errorf("error message is not one line: %q", msg)
	}
	if !strings.Contains(msg, want) {
		t.Errorf("error %q does not say %q", msg, want)
	}
	if r.stdout != "" {
		t.Errorf("a failed command wrote to stdout: %q", r.stdout)
	}
}

func uniqueName(prefix string) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return prefix + "-" + hex.EncodeToString(b)
}

// keyPattern is the shape of an aapd API key: aapd_, a 16-character
// base32 public id, _, and a 43-character base64url secret.
var keyPattern = regexp.MustCompile(`^aapd_[a-z2-7]{16}_[A-Za-z0-9_-]{43}$`)

// table splits tabwriter output into rows of cells.
func table(out string) [][]string {
	var rows [][]string
	for _, line := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		rows = append(rows, regexp.MustCompile(`\s{2,}`).Split(strings.TrimSpace(line), -1))
	}
	return rows
}

func TestCLITenantsCreateAndList(t *testing.T) {
	t.Parallel()
	db := storetest.URL(t)
	name := uniqueName("acme")
	out := aapd(t, "tenants", "create", "--database-url", db, name).ok(t).stdout
	id, got, ok := strings.Cut(strings.TrimSuffix(out, "\n"), "\t")
	if !ok || got != name || !regexp.MustCompile(`^[0-9a-f-]{36}$`).MatchString(id) || strings.Count(out, "\n") != 1 {
		t.Fatalf("tenants create printed %q, want ID<TAB>NAME", out)
	}

	aapd(t, "tenants", "create", "--database-url", db, name).failed(t, 1, fmt.Sprintf("tenant %q already exists", name))

	rows := table(aapd(t, "tenants", "list", "--database-url", db).ok(t).stdout)
	if len(rows) < 2 || strings.Join(rows[0], "|") != "ID|NAME|CREATED" {
		t.Fatalf("tenants list header = %v", rows)
	}
	found := 0
	for _, row := range rows[1:] {
		if len(row) == 3 && row[1] == name {
			found++
			if row[0] != id {
				t.Errorf("listed id %s, created %s", row[0], id)
			}
			if ts, err := time.Parse(time.RFC3339, row[2]); err != nil || time.Since(ts) > time.Hour || time.Since(ts) < -time.Hour {
				t.Errorf("created %q: %v", row[2], err)
			}
		}
	}
	if found != 1 {
		t.Errorf("tenant %s listed %d times:\n%v", name, found, rows)
	}
}

// Raw requests: whether the CLI's keys open the API is a credential on the
// wire.
func TestCLIKeys(t *testing.T) {
	t.Parallel()
	s := startParallelServer(t)
	db := storetest.URL(t)
	tenant := uniqueName("keys")
	aapd(t, "tenants", "create", "--database-url", db, tenant).ok(t)

	created := aapd(t, "keys", "create", "--database-url", db, "--tenant", tenant, "--name", "laptop").ok(t)
	key := strings.TrimSuffix(created.stdout, "\n")
	if !keyPattern.MatchString(key) || created.stdout != key+"\n" {
		t.Fatalf("keys create stdout = %q, want the key alone on one line", created.stdout)
	}
	if strings.Contains(created.stderr, key) {
		t.Errorf("the key was also written to stderr: %q", created.stderr)
	}
	publicID := strings.Split(key, "_")[1]
	if !strings.Contains(created.stderr, publicID) {
		t.Errorf("stderr does not name the key's id: %q", created.stderr)
	}
	unused := strings.TrimSpace(aapd(t, "keys", "create", "--database-url", db, "--tenant", tenant).ok(t).stdout)
	if !keyPattern.MatchString(unused) || unused == key {
		t.Fatalf("second key %q", unused)
	}

	// The key works against a server on the same database.
	c := &client{t: t, base: s.base, key: key}
	c.do("GET", "/sessions", nil).expect(t, http.StatusOK)
	sid := c.echoSession(nil)
	// Key use is written off the request path: wait for it.
	waitFor(t, "the key's use to be recorded", 5*time.Second, func() bool {
		k, err := s.Store.APIKeyGetByPublicID(context.Background(), publicID)
		return err == nil && k.LastUsedAt != nil
	})

	rows := table(aapd(t, "keys", "list", "--database-url", db, "--tenant", tenant).ok(t).stdout)
	if len(rows) != 3 || strings.Join(rows[0], "|") != "ID|PREFIX|NAME|SCOPES|CREATED|EXPIRES|LAST USED|REVOKED" {
		t.Fatalf("keys list = %v", rows)
	}
	byID := map[string][]string{}
	for _, row := range rows[1:] {
		if len(row) != 8 {
			t.Fatalf("row %v has %d columns", row, len(row))
		}
		byID[row[0]] = row
	}
	used, fresh := byID[publicID], byID[strings.Split(unused, "_")[1]]
	if used == nil || fresh == nil {
		t.Fatalf("keys list misses a key: %v", rows)
	}
	if used[1] != "aapd_"+publicID+"_…" || used[2] != "laptop" || used[3] != "sessions:read,sessions:write" || used[5] != "-" {
		t.Errorf("used key row = %v", used)
	}
	// The secret is everything after the public id; it may itself hold "_".
	secret := strings.TrimPrefix(key, "aapd_"+publicID+"_")
	if strings.Contains(strings.Join(rows[1], " ")+strings.Join(rows[2], " "), secret) {
		t.Errorf("keys list shows a secret")
	}
	for _, col := range []int{4, 6} {
		if ts, err := time.Parse(time.RFC3339, used[col]); err != nil || time.Since(ts) > time.Hour {
			t.Errorf("used key column %d = %q: %v", col, used[col], err)
		}
	}
	if used[7] != "-" {
		t.Errorf("used key shows revoked %q", used[7])
	}
	if fresh[2] != "-" || fresh[6] != "-" || fresh[7] != "-" {
		t.Errorf("unused, unnamed key row = %v, want - for name, last used and revoked", fresh)
	}

	// Revoking the key locks it out at once: servers remember keys, and
	// the revocation reaches them by a notification a moment after it
	// commits.
	rev := aapd(t, "keys", "revoke", "--database-url", db, publicID).ok(t)
	if rev.stdout != "" || !strings.Contains(rev.stderr, publicID) {
		t.Errorf("keys revoke wrote stdout %q, stderr %q", rev.stdout, rev.stderr)
	}
	waitFor(t, "the revocation to reach the server", 5*time.Second, func() bool {
		return c.do("GET", "/sessions", nil).StatusCode == http.StatusUnauthorized
	})
	checkProblem(t, c.do("GET", "/sessions", nil), http.StatusUnauthorized, "unauthorized")
	checkProblem(t, c.do("GET", "/sessions/"+sid, nil), http.StatusUnauthorized, "unauthorized")
	rows = table(aapd(t, "keys", "list", "--database-url", db, "--tenant", tenant).ok(t).stdout)
	for _, row := range rows[1:] {
		switch row[0] {
		case publicID:
			if _, err := time.Parse(time.RFC3339, row[7]); err != nil {
				t.Errorf("revoked key shows revoked %q", row[7])
			}
		default:
			if row[7] != "-" {
				t.Errorf("the other key was revoked too: %v", row)
			}
		}
	}
	// The other key still works; revoking twice is harmless.
	(&client{t: t, base: s.base, key: unused}).do("GET", "/sessions/"+sid, nil).expect(t, http.StatusOK)
	aapd(t, "keys", "revoke", "--database-url", db, publicID).ok(t)
	aapd(t, "keys", "revoke", "--database-url", db, "aaaaaaaaaaaaaaaa").failed(t, 1, "aaaaaaaaaaaaaaaa")
}

func TestCLIErrors(t *testing.T) {
	t.Parallel()
	db := storetest.URL(t)
	unreachable := "postgres://postgres@127.0.0.1:1/x?sslmode=disable"
	ghost := uniqueName("ghost")
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no command", nil, 2, "no command"},
		{"unknown command", []string{"frobnicate"}, 2, "frobnicate"},
		{"tenants without subcommand", []string{"tenants"}, 2, "tenants"},
		{"unknown tenants subcommand", []string{"tenants", "rename", "--database-url", db}, 2, "rename"},
		{"keys without subcommand", []string{"keys"}, 2, "keys"},
		{"unknown keys subcommand", []string{"keys", "rotate", "--database-url", db}, 2, "rotate"},
		{"tenants create without name", []string{"tenants", "create", "--database-url", db}, 2, "NAME"},
		{"tenants create with two names", []string{"tenants", "create", "--database-url", db, "a", "b"}, 2, "NAME"},
		{"keys create without --tenant", []string{"keys", "create", "--database-url", db}, 2, "--tenant"},
		{"keys list without --tenant", []string{"keys", "list", "--database-url", db}, 2, "--tenant"},
		{"keys revoke without id", []string{"keys", "revoke", "--database-url", db}, 2, "ID"},
		{"unknown flag", []string{"keys", "list", "--database-url", db, "--tenant", "x", "--bogus"}, 2, "bogus"},
		{"flag without value", []string{"tenants", "list", "--database-url"}, 2, "database-url"},
		{"migrate with an unknown flag", []string{"migrate", "--nope"}, 2, "nope"},
		{"keys create for unknown tenant", []string{"keys", "create", "--database-url", db, "--tenant", ghost}, 1, ghost},
		{"keys list for unknown tenant", []string{"keys", "list", "--database-url", db, "--tenant", ghost}, 1, ghost},
		{"revoke unknown key", []string{"keys", "revoke", "--database-url", db, "zzzzzzzzzzzzzzzz"}, 1, "zzzzzzzzzzzzzzzz"},
		{"database unreachable: tenants list", []string{"tenants", "list", "--database-url", unreachable}, 1, "127.0.0.1:1"},
		{"database unreachable: tenants create", []string{"tenants", "create", "--database-url", unreachable, "x"}, 1, "127.0.0.1:1"},
		{"database unreachable: keys create", []string{"keys", "create", "--database-url", unreachable, "--tenant", "x"}, 1, "127.0.0.1:1"},
		{"database unreachable: migrate", []string{"migrate", "--database-url", unreachable}, 1, "127.0.0.1:1"},
		{"database url unparseable", []string{"tenants", "list", "--database-url", "postgres://%zz"}, 2, "--database-url"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			aapd(t, tc.args...).failed(t, tc.code, tc.want)
		})
	}

	t.Run("help", func(t *testing.T) {
		t.Parallel()
		r := aapd(t, "help").ok(t)
		if !strings.Contains(r.stdout, "aapd keys create --tenant NAME") {
			t.Errorf("help = %q", r.stdout)
		}
		// -h asks for the usage: it is printed, and the exit code is 0.
		if r := aapd(t, "keys", "create", "-h"); exitCode(r.err) != 0 || !strings.Contains(r.stderr, "-tenant") {
			t.Errorf("keys create -h: err %v, stderr %q", r.err, r.stderr)
		}
		// -h works on every command and subcommand.
		for _, args := range [][]string{{"serve", "-h"}, {"migrate", "-h"}, {"tenants", "-h"}, {"tenants", "create", "-h"},
			{"keys", "-h"}, {"keys", "list", "-h"}, {"issuers", "--help"}, {"issuers", "add", "-h"}, {"limits", "-h"},
			{"limits", "set", "-h"}, {"usage", "-h"}, {"healthcheck", "-h"}, {"version", "-h"}} {
			if r := aapd(t, args...); (r.err != nil && exitCode(r.err) != 0) || !strings.Contains(r.stdout+r.stderr, "Usage of aapd "+args[0]) {
				t.Errorf("%v: err %v, output %q", args, r.err, r.stdout+r.stderr)
			}
		}
		// A flag error is one line with a hint, not the whole usage.
		r = aapd(t, "migrate", "--no-such-flag")
		r.failed(t, 2, "flag")
		if !strings.Contains(r.err.Error(), "aapd migrate -h") || strings.Contains(r.stderr, "Usage") {
			t.Errorf("flag error: %q, stderr %q", r.err, r.stderr)
		}
	})
}

// TestCLIWithoutDatabaseURL changes the environment, so it does not run in
// parallel.
func TestCLIWithoutDatabaseURL(t *testing.T) {
	t.Setenv("DATABASE_URL", "")
	for _, args := range [][]string{
		{"migrate"},
		{"tenants", "list"},
		{"tenants", "create", "x"},
		{"keys", "create", "--tenant", "x"},
		{"keys", "revoke", "aaaaaaaaaaaaaaaa"},
	} {
		aapd(t, args...).failed(t, 2, "--database-url")
	}
	// The environment variable stands in for the flag.
	t.Setenv("DATABASE_URL", storetest.URL(t))
	name := uniqueName("env")
	aapd(t, "tenants", "create", name).ok(t)
	if out := aapd(t, "tenants", "list").ok(t).stdout; !strings.Contains(out, name) {
		t.Errorf("tenants list through $DATABASE_URL misses %s", name)
	}
	// And the flag wins over it.
	aapd(t, "tenants", "list", "--database-url", "postgres://postgres@127.0.0.1:1/x?sslmode=disable").failed(t, 1, "127.0.0.1:1")
}

func TestCLIMigrateIsIdempotent(t *testing.T) {
	t.Parallel()
	db := storetest.NewEmptyDatabase(t)
	// Before migrating, the administration commands say what to do.
	if r := aapd(t, "tenants", "list", "--database-url", db); r.err == nil {
		t.Errorf("tenants list on an empty database succeeded: %q", r.stdout)
	} else if exitCode(r.err) != 1 || strings.Contains(r.err.Error(), "\n") || !strings.Contains(r.err.Error(), "migrate") {
		t.Errorf("tenants list on an empty database: %q (exit %d)", r.err, exitCode(r.err))
	}

	pattern := regexp.MustCompile(`^applied (\d+) migrations; schema version (\d+)\n$`)
	migrated := aapd(t, "migrate", "--database-url", db).ok(t)
	first := pattern.FindStringSubmatch(migrated.stdout)
	if first == nil || first[1] == "0" || first[2] == "0" {
		t.Fatalf("first migrate: %v", first)
	}
	// Each migration is reported as it is applied, on stderr.
	if n, _ := strconv.Atoi(first[1]); !strings.Contains(migrated.stderr, "applied 00001_init.sql (") || strings.Count(migrated.stderr, "applied 000") != n {
		t.Errorf("migrate's progress: %q", migrated.stderr)
	}
	for range 2 {
		again := aapd(t, "migrate", "--database-url", db).ok(t).stdout
		if want := "applied 0 migrations; schema version " + first[2] + "\n"; again != want {
			t.Errorf("migrate again printed %q, want %q", again, want)
		}
	}
	name := uniqueName("migrated")
	aapd(t, "tenants", "create", "--database-url", db, name).ok(t)
	aapd(t, "migrate", "--database-url", db).ok(t)
	if out := aapd(t, "tenants", "list", "--database-url", db).ok(t).stdout; !strings.Contains(out, name) {
		t.Errorf("a tenant did not survive a second migrate: %q", out)
	}
}

// clearServeEnv unsets every variable serve reads (an empty variable is
// set), so the test sees only what it sets; each is restored when the test
// ends.
func clearServeEnv(t *testing.T) {
	for _, v := range []string{"DATABASE_URL", "AAPD_ADDR", "AAPD_NO_MIGRATE", "AAPD_CREATE_DATABASE", "AAPD_META_REQUIRES_AUTH",
		"AAPD_CORS_ORIGINS", "AAPD_WORKERS", "AAPD_TURN_LEASE", "AAPD_DRAIN_TIMEOUT", "AAPD_MAX_BODY_BYTES",
		"AAPD_ENCRYPTION_KEY", "AAPD_DEV", "AAPD_LOG_LEVEL", "AAPD_DB_MAX_CONNS", "AAPD_SHUTDOWN_DELAY",
		"AAPD_SSE_KEEPALIVE", "AAPD_CONFIG", "AAPD_METRICS_ADDR", "AAPD_READ_HEADER_TIMEOUT", "AAPD_BODY_TIMEOUT",
		"AAPD_IDLE_TIMEOUT", "AAPD_MAX_HEADER_BYTES", "AAPD_RATE_LIMIT", "AAPD_RATE_BURST", "AAPD_MAX_RUNNING_TURNS",
		"AAPD_ADMIN_TOKEN", "AAPD_ADMIN_TOKEN_FILE", "AAPD_TRUSTED_PROXIES", "AAPD_AUTH_FAILURE_BURST", "AAPD_AUTH_FAILURE_RATE"} {
		t.Setenv(v, "") // registers the restore
		os.Unsetenv(v)
	}
}

func TestServeFlagsFromEnvironment(t *testing.T) {
	clearServeEnv(t)
	var stderr bytes.Buffer

	// Defaults, given only a database.
	cfg, err := parseServeFlags([]string{"--database-url", "postgres://flag/db"}, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Addr != ":8080" || cfg.Workers != 64 || cfg.Lease != 30*time.Second || cfg.MaxBodyBytes != httpapi.DefaultMaxBodyBytes ||
		len(cfg.CORSOrigins) != 1 || cfg.CORSOrigins[0] != "*" || cfg.NoMigrate || cfg.Dev || cfg.EncryptionKey != nil ||
		cfg.DBMaxConns != 0 || cfg.ShutdownDelay != 5*time.Second {
		t.Errorf("defaults = %+v", cfg)
	}
	// The pool is sized from the workers: a quarter of them, from 8 to 48.
	for workers, want := range map[int]int{1: 8, 64: 16, 100: 25, 10000: 48} {
		if got := DefaultDBMaxConns(workers); got != want {
			t.Errorf("DefaultDBMaxConns(%d) = %d, want %d", workers, got, want)
		}
	}

	key := bytes.Repeat([]byte{7}, 32)
	t.Setenv("DATABASE_URL", "postgres://env/db")
	t.Setenv("AAPD_ADDR", "127.0.0.1:9999")
	t.Setenv("AAPD_WORKERS", "8")
	t.Setenv("AAPD_TURN_LEASE", "45s")
	t.Setenv("AAPD_NO_MIGRATE", "true")
	t.Setenv("AAPD_CORS_ORIGINS", "https://a.example, https://b.example")
	t.Setenv("AAPD_ENCRYPTION_KEY", base64.StdEncoding.EncodeToString(key))
	t.Setenv("AAPD_MAX_BODY_BYTES", "   ") // blank: ignored
	t.Setenv("AAPD_DB_MAX_CONNS", "30")
	t.Setenv("AAPD_SHUTDOWN_DELAY", "0s")
	cfg, err = parseServeFlags(nil, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.DatabaseURL != "postgres://env/db" || cfg.Addr != "127.0.0.1:9999" || cfg.Workers != 8 || cfg.Lease != 45*time.Second ||
		!cfg.NoMigrate || strings.Join(cfg.CORSOrigins, "|") != "https://a.example|https://b.example" ||
		!bytes.Equal(cfg.EncryptionKey, key) || cfg.MaxBodyBytes != httpapi.DefaultMaxBodyBytes ||
		cfg.DBMaxConns != 30 || cfg.ShutdownDelay != 0 {
		t.Errorf("from the environment: %+v", cfg)
	}

	// Flags win over the environment.
	cfg, err = parseServeFlags([]string{"--addr", ":7000", "--database-url", "postgres://flag/db", "--workers", "3",
		"--no-migrate=false", "--cors-origins", ""}, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.DatabaseURL != "postgres://flag/db" || cfg.Addr != ":7000" || cfg.Workers != 3 || cfg.NoMigrate || len(cfg.CORSOrigins) != 0 {
		t.Errorf("flags over environment: %+v", cfg)
	}
	if cfg.Lease != 45*time.Second {
		t.Errorf("a variable without a flag was dropped: lease %v", cfg.Lease)
	}
}

func TestServeFlagErrors(t *testing.T) {
	clearServeEnv(t)
	cases := []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"no database", nil, nil, "--database-url"},
		{"bad variable", map[string]string{"AAPD_WORKERS": "many"}, []string{"--database-url", "postgres://x/y"}, "$AAPD_WORKERS"},
		{"bad duration variable", map[string]string{"AAPD_TURN_LEASE": "forever"}, []string{"--database-url", "postgres://x/y"}, "$AAPD_TURN_LEASE"},
		{"bad flag value", nil, []string{"--database-url", "postgres://x/y", "--workers", "many"}, "workers"},
		{"unknown flag", nil, []string{"--database-url", "postgres://x/y", "--turbo"}, "turbo"},
		{"unexpected argument", nil, []string{"--database-url", "postgres://x/y", "now"}, `"now"`},
		{"zero workers", nil, []string{"--database-url", "postgres://x/y", "--workers", "0"}, "--workers"},
		{"short lease", nil, []string{"--database-url", "postgres://x/y", "--turn-lease", "10ms"}, "--turn-lease"},
		{"tiny body limit", nil, []string{"--database-url", "postgres://x/y", "--max-body-bytes", "10"}, "--max-body-bytes"},
		{"bad encryption key", nil, []string{"--database-url", "postgres://x/y", "--encryption-key", "c2hvcnQ="}, "--encryption-key"},
		{"bad log level", nil, []string{"--database-url", "postgres://x/y", "--log-level", "loud"}, "--log-level"},
		{"one connection", nil, []string{"--database-url", "postgres://x/y", "--db-max-conns", "1"}, "--db-max-conns"},
		{"no history cache", map[string]string{"AAPD_HISTORY_CACHE_MB": "0"}, []string{"--database-url", "postgres://x/y"}, "--history-cache-mb"},
		{"negative shutdown delay", map[string]string{"AAPD_SHUTDOWN_DELAY": "-1s"}, []string{"--database-url", "postgres://x/y"}, "--shutdown-delay"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			_, err := parseServeFlags(tc.args, &bytes.Buffer{})
			r := cliResult{err: err}
			r.failed(t, 2, tc.want)
			// Through run, the same.
			aapd(t, append([]string{"serve"}, tc.args...)...).failed(t, 2, tc.want)
		})
	}
}

func TestCLIFlagsMayFollowArguments(t *testing.T) {
	t.Parallel()
	db := storetest.URL(t)
	name := uniqueName("late-flags")
	aapd(t, "tenants", "create", name, "--database-url", db).ok(t)
	key := strings.TrimSpace(aapd(t, "keys", "create", "--tenant", name, "--database-url", db, "--name", "late").ok(t).stdout)
	if !keyPattern.MatchString(key) {
		t.Errorf("key = %q", key)
	}
	aapd(t, "migrate", "--database-url", db, "extra").failed(t, 2, `unexpected argument "extra"`)
}

func TestServeRefusesABadConfigWithOneLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agents.yaml")
	if err := os.WriteFile(path, []byte("agents:\n  - name: a\n    model: {provider: gemini}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	aapd(t, "serve", "--addr", "127.0.0.1:0", "--no-migrate", "--database-url", storetest.URL(t), "--config", path).
		failed(t, 1, `agents.yaml: agents[0].model.provider: must be openai, anthropic or echo, not "gemini"`)
}
