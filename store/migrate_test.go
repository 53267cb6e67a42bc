package store_test

import (
	"context"
	"slices"
	"testing"

	"github.com/aapd/aapd/store"
	"github.com/aapd/aapd/store/storetest"
)

// A migration numbered below the version a database has reached is
// applied when it lands, not refused: 00041 landed after 00043, and a
// database migrated in between lacked it.
func TestAMigrationThatLandedLateIsApplied(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := storetest.NewDatabase(t)
	storetest.Exec(t, dbURL, `DELETE FROM goose_db_version WHERE version_id = 41`)
	res, err := store.Migrate(ctx, dbURL)
	if err != nil {
		t.Fatalf("migrate a database without 00041: %v", err)
	}
	if !slices.Equal(res.Applied, []int64{41}) {
		t.Errorf("applied %v, want [41]", res.Applied)
	}
	res, err = store.Migrate(ctx, dbURL)
	if err != nil || len(res.Applied) != 0 {
		t.Errorf("migrating again applied %v (err %v), want nothing", res.Applied, err)
	}
}
