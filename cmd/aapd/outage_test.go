package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	osuser "os/user"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/aapclient"
	"github.com/aapd/aapd/store"
	"github.com/aapd/aapd/store/storetest"
)

// privatePostgres is a PostgreSQL server of one test's own, so that the
// test can stop and start it without disturbing any other.
type privatePostgres struct {
	t      *testing.T
	bin    string
	dir    string
	port   int
	asUser []string // runuser prefix when running as root
}

// newPrivatePostgres initialises and starts a private server, or skips the
// test when this machine has no PostgreSQL server binaries. In make
// test-citus it skips too: the server it crashes is a plain PostgreSQL of
// its own, not the Citus cluster, so the run would repeat make test's.
func newPrivatePostgres(t *testing.T) *privatePostgres {
	t.Helper()
	if storetest.Citus() {
		t.Skip("crashes a private plain PostgreSQL server, not the Citus cluster: make test runs it")
	}
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_ctl")
	if len(bins) == 0 {
		t.Skip("no PostgreSQL server binaries (pg_ctl, initdb) to run a private server for the outage test")
	}
	pg := &privatePostgres{t: t, bin: filepath.Dir(bins[len(bins)-1]), port: freePort(t)}
	dir, err := os.MkdirTemp("", "aapd-pg-")
	if err != nil {
		t.Fatal(err)
	}
	pg.dir = dir
	t.Cleanup(func() { os.RemoveAll(dir) })
	if os.Geteuid() == 0 { // PostgreSQL refuses to run as root
		u, err := osuser.Lookup("postgres")
		if err != nil {
			t.Skip("running as root without a postgres user to run a private server")
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
		pg.asUser = []string{"runuser", "-u", "postgres", "--"}
	}
	pg.run("initdb", "-D", pg.data(), "-A", "trust", "-U", "postgres", "--no-sync")
	pg.start()
	t.Cleanup(func() { pg.ctl("stop", "-m", "immediate") })
	return pg
}

func (pg *privatePostgres) data() string { return filepath.Join(pg.dir, "data") }

func (pg *privatePostgres) run(tool string, args ...string) {
	pg.t.Helper()
	argv := append(append(append([]string{}, pg.asUser...), filepath.Join(pg.bin, tool)), args...)
	out, err := runTool(context.Background(), toolTimeout, commandSpec{}, argv...)
	if err != nil {
		pg.t.Fatalf("%s: %v\n%s", tool, err, out)
	}
}

func (pg *privatePostgres) ctl(args ...string) {
	pg.t.Helper()
	pg.run("pg_ctl", append([]string{"-D", pg.data(), "-w"}, args...)...)
}

func (pg *privatePostgres) start() {
	pg.ctl("start", "-l", filepath.Join(pg.dir, "log"), "-o",
		fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off", pg.port, pg.dir))
}

func (pg *privatePostgres) stop() { pg.ctl("stop", "-m", "fast") }

func (pg *privatePostgres) url(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", pg.port, db)
}

// crashablePostgres is a private server with a database migrated for aapd
// and a tenant in it.
func crashablePostgres(t *testing.T) (pg *privatePostgres, dbURL, key string) {
	t.Helper()
	pg, dbURL, tn := crashablePostgresTenant(t)
	return pg, dbURL, tn.Key
}

// crashablePostgresTenant is crashablePostgres with the whole tenant, for
// a test that also writes the tenant's rows itself.
func crashablePostgresTenant(t *testing.T) (pg *privatePostgres, dbURL string, tn storetest.Tenant) {
	t.Helper()
	pg = newPrivatePostgres(t)
	dbURL = pg.url("aapd")
	ctx := context.Background()
	if _, err := store.CreateDatabase(ctx, dbURL); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Migrate(ctx, dbURL); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(ctx, store.Config{DatabaseURL: dbURL})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	return pg, dbURL, storetest.NewTenant(t, st)
}

func TestDatabaseOutageIs503ThenServesAgainWithoutRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a PostgreSQL server")
	}
	pg, dbURL, key := crashablePostgres(t)
	p := startProc(t, dbURL)
	c := &client{t: t, base: p.base, key: key}
	sid := c.echoSession(nil)
	c.say(sid, "before")

	pg.stop()
	api := c.api()
	for _, call := range []func() error{
		func() error { _, err := api.ListSessions(t.Context(), aapclient.ListOptions{}); return err },
		func() error { _, err := api.GetSession(t.Context(), sid); return err },
		func() error { _, err := api.SendTurn(t.Context(), sid, turnRequest(t, user("during"))); return err },
	} {
		if e := refusal(t, call(), http.StatusServiceUnavailable, "unavailable"); e.RetryAfter <= 0 {
			t.Errorf("%s %s: 503 without Retry-After", e.Method, e.Path)
		}
	}
	// Raw: the operations routes are no AAP calls.
	r := c.do("GET", "/readyz", nil).expect(t, http.StatusServiceUnavailable)
	if r.Header.Get("Retry-After") == "" {
		t.Errorf("GET /readyz: 503 without Retry-After")
	}
	if p := r.problem(t); p["type"] != "https://aapd.dev/problems/unavailable" {
		t.Errorf("GET /readyz: problem %v", p)
	}
	c.do("GET", "/healthz", nil).expect(t, http.StatusOK)

	pg.start()
	waitFor(t, "readyz to recover", 30*time.Second, func() bool {
		r, err := http.Get(p.base + "/readyz")
		if err != nil {
			return false
		}
		r.Body.Close()
		return r.StatusCode == http.StatusOK
	})
	waitFor(t, "turns to be served again", 30*time.Second, func() bool {
		_, err := api.SendTurn(t.Context(), sid, turnRequest(t, user("after")))
		return err == nil
	})
	var texts []string
	for _, m := range c.history(sid, aap.HistoryFull) {
		texts = append(texts, m.Content.PlainText())
	}
	if want := []string{"before", "Echo: before", "after", "Echo: after"}; fmt.Sprint(texts) != fmt.Sprint(want) {
		t.Errorf("history = %q, want %q", texts, want)
	}
}
