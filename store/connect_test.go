package store_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aapd/aapd/store"
	"github.com/aapd/aapd/store/storetest"
)

// A failed connection is told in one line naming the server and the cause,
// and carries the sentinel its callers act on.
func TestConnectErrorsNameTheServerAndTheCause(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	missing, exists := storetest.MissingDatabase(t)
	refused := "postgres://postgres@127.0.0.1:1/aapd?sslmode=disable"
	cases := []struct {
		name     string
		call     func() error
		sentinel error
		want     string
	}{
		{"open, no such database", func() error { _, err := store.Open(ctx, store.Config{DatabaseURL: missing}); return err },
			store.ErrNoDatabase, "has no database"},
		{"migrate, no such database", func() error { _, err := store.Migrate(ctx, missing); return err },
			store.ErrNoDatabase, "has no database"},
		{"open, refused", func() error { _, err := store.Open(ctx, store.Config{DatabaseURL: refused}); return err },
			store.ErrUnavailable, "connect to PostgreSQL at 127.0.0.1:1: connection refused"},
		{"migrate, refused", func() error { _, err := store.Migrate(ctx, refused); return err },
			store.ErrUnavailable, "connect to PostgreSQL at 127.0.0.1:1: connection refused"},
		{"create database, refused", func() error { _, err := store.CreateDatabase(ctx, refused); return err },
			store.ErrUnavailable, "connect to PostgreSQL at 127.0.0.1:1: connection refused"},
	}
	for _, tc := range cases {
		err := tc.call()
		if !errors.Is(err, tc.sentinel) {
			t.Errorf("%s: %v is not %v", tc.name, err, tc.sentinel)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, tc.want) || strings.Contains(msg, "\n") || strings.Contains(msg, "citus") {
			t.Errorf("%s: %q, want one line saying %q", tc.name, msg, tc.want)
		}
	}
	if exists() {
		t.Error("the missing database was created")
	}
	if err := store.CheckDatabaseURL("not a url"); err == nil {
		t.Error("CheckDatabaseURL accepts \"not a url\"")
	}
	if err := store.CheckDatabaseURL(refused); err != nil {
		t.Errorf("CheckDatabaseURL(%q): %v", refused, err)
	}
}
