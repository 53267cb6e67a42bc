package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/aapd/aapd/migrations"
)

// MigrateResult reports what Migrate did.
type MigrateResult struct {
	Applied []int64 // versions applied now
	Version int64   // schema version afterwards
}

// MigrationStep is one migration applied, as it is reported.
type MigrationStep struct {
	Version  int64
	Name     string // the migration's file
	Duration time.Duration
}

// Migrate applies every pending migration embedded in the binary. Replicas
// starting together are safe: goose holds a Postgres advisory lock while it
// migrates.
func Migrate(ctx context.Context, databaseURL string) (MigrateResult, error) {
	return MigrateReporting(ctx, databaseURL, nil)
}

// MigrateReporting is Migrate, calling progress (if not nil) as each
// migration is applied: a long migration shows where it is.
func MigrateReporting(ctx context.Context, databaseURL string, progress func(MigrationStep)) (MigrateResult, error) {
	cfg, err := parseConnConfig(databaseURL)
	if err != nil {
		return MigrateResult{}, err
	}
	db := stdlib.OpenDB(*cfg)
	defer db.Close()
	if err := db.PingContext(ctx); err != nil {
		return MigrateResult{}, connectError(&cfg.Config, err)
	}
	return migrate(ctx, db, progress)
}

func migrate(ctx context.Context, db *sql.DB, progress func(MigrationStep)) (MigrateResult, error) {
	if _, err := checkCitusRole(ctx, func(ctx context.Context, query string, dest ...any) error {
		return db.QueryRowContext(ctx, query).Scan(dest...)
	}); err != nil {
		return MigrateResult{}, fmt.Errorf("migrate: %w", err)
	}
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		return MigrateResult{}, err
	}
	// Migrations are numbered as they are written and land as they are
	// done: one numbered below a version a database has reached (00041
	// landed after 00043) is applied, not refused.
	p, err := goose.NewProvider(goose.DialectPostgres, db, migrations.FS, goose.WithSessionLocker(locker),
		goose.WithAllowOutofOrder(true))
	if err != nil {
		return MigrateResult{}, fmt.Errorf("load migrations: %w", err)
	}
	var res MigrateResult
	for {
		r, err := p.UpByOne(ctx)
		if errors.Is(err, goose.ErrNoNextVersion) {
			break
		}
		if err != nil {
			return res, fmt.Errorf("migrate: %w", interpretError(err))
		}
		res.Applied = append(res.Applied, r.Source.Version)
		if progress != nil {
			progress(MigrationStep{Version: r.Source.Version, Name: filepath.Base(r.Source.Path), Duration: r.Duration})
		}
	}
	if res.Version, err = p.GetDBVersion(ctx); err != nil {
		return res, fmt.Errorf("read schema version: %w", interpretError(err))
	}
	return res, nil
}

// CreateDatabase creates the database named in databaseURL if it does not
// exist yet, connecting to the same server's "postgres" database to do so.
// It reports whether it created it.
func CreateDatabase(ctx context.Context, databaseURL string) (bool, error) {
	cfg, err := parseConnConfig(databaseURL)
	if err != nil {
		return false, err
	}
	name := cfg.Database
	if name == "" {
		return false, fmt.Errorf("the database url names no database")
	}
	cfg.Database = "postgres"
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return false, fmt.Errorf("create database %s: %w", name, connectError(&cfg.Config, err))
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, name).Scan(&exists); err != nil {
		return false, fmt.Errorf("look for database %s: %w", name, interpretError(err))
	}
	if exists {
		return false, nil
	}
	if _, err := conn.Exec(ctx, `CREATE DATABASE `+pgx.Identifier{name}.Sanitize()); err != nil {
		return false, fmt.Errorf("create database %s: %w", name, interpretError(err))
	}
	return true, nil
}
