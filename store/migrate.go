package store

import (
	"context"
	"database/sql"
	"fmt"

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

// Migrate applies every pending migration embedded in the binary. Replicas
// starting together are safe: goose holds a Postgres advisory lock while it
// migrates.
func Migrate(ctx context.Context, databaseURL string) (MigrateResult, error) {
	cfg, err := parseConnConfig(databaseURL)
	if err != nil {
		return MigrateResult{}, err
	}
	db := stdlib.OpenDB(*cfg)
	defer db.Close()
	return migrate(ctx, db)
}

func migrate(ctx context.Context, db *sql.DB) (MigrateResult, error) {
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		return MigrateResult{}, err
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, migrations.FS, goose.WithSessionLocker(locker))
	if err != nil {
		return MigrateResult{}, fmt.Errorf("load migrations: %w", err)
	}
	results, err := p.Up(ctx)
	if err != nil {
		return MigrateResult{}, fmt.Errorf("migrate: %w", interpretError(err))
	}
	var res MigrateResult
	for _, r := range results {
		res.Applied = append(res.Applied, r.Source.Version)
	}
	if res.Version, err = p.GetDBVersion(ctx); err != nil {
		return res, fmt.Errorf("read schema version: %w", interpretError(err))
	}
	return res, nil
}
