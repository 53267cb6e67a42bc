package main

import (
	"net"
	"strings"
	"testing"

	"github.com/aapd/aapd/store/storetest"
)

// The first errors a newcomer meets say what failed and what to do, in one
// line, with the exit code the README promises (2: a usage mistake).
func TestFirstErrorsSayWhatToDo(t *testing.T) {
	t.Parallel()
	refused := "postgres://postgres@127.0.0.1:1/aapd?sslmode=disable"

	t.Run("a database that does not exist", func(t *testing.T) {
		t.Parallel()
		missing, exists := storetest.MissingDatabase(t)
		for _, args := range [][]string{
			{"serve", "--addr", "127.0.0.1:0", "--database-url", missing},
			{"migrate", "--database-url", missing},
			{"tenants", "list", "--database-url", missing},
		} {
			r := aapd(t, args...)
			r.failed(t, 1, "has no database")
			if msg := r.err.Error(); !strings.Contains(msg, "--create-database") || !strings.Contains(msg, "make run") || strings.Contains(msg, "citus") {
				t.Errorf("%s: %q does not say that --create-database creates it", args[0], msg)
			}
		}
		if exists() {
			t.Error("the database was created without --create-database")
		}
	})

	t.Run("a refused connection", func(t *testing.T) {
		t.Parallel()
		for _, args := range [][]string{
			{"serve", "--addr", "127.0.0.1:0", "--database-url", refused},
			{"migrate", "--database-url", refused},
			{"serve", "--addr", "127.0.0.1:0", "--database-url", refused, "--no-migrate"},
		} {
			r := aapd(t, args...)
			r.failed(t, 1, "connect to PostgreSQL at 127.0.0.1:1: connection refused")
			if strings.Contains(r.err.Error(), "citus") {
				t.Errorf("%v: %q speaks of Citus", args, r.err)
			}
		}
	})

	t.Run("a database url that is not one", func(t *testing.T) {
		t.Parallel()
		for _, args := range [][]string{
			{"serve", "--database-url", "not a url"},
			{"migrate", "--database-url", "not a url"},
			{"keys", "list", "--tenant", "x", "--database-url", "not a url"},
		} {
			aapd(t, args...).failed(t, 2, "--database-url (or $DATABASE_URL): cannot parse")
		}
	})

	t.Run("an unknown command", func(t *testing.T) {
		t.Parallel()
		r := aapd(t, "frobnicate")
		r.failed(t, 2, `unknown command "frobnicate": run "aapd help" for the commands`)
		if r.stderr != "" {
			t.Errorf("the usage was printed before the one line: %q", r.stderr)
		}
	})

	t.Run("a port already in use", func(t *testing.T) {
		t.Parallel()
		taken, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer taken.Close()
		addr := taken.Addr().String()
		// Told before the database is created or migrated.
		missing, exists := storetest.MissingDatabase(t)
		aapd(t, "serve", "--addr", addr, "--create-database", "--database-url", missing).failed(t, 1, "listen on "+addr+" (--addr)")
		aapd(t, "serve", "--addr", "127.0.0.1:0", "--metrics-addr", addr, "--create-database", "--database-url", missing).
			failed(t, 1, "listen on "+addr+" (--metrics-addr)")
		if exists() {
			t.Error("the database was created before the port was found taken")
		}
	})
}
