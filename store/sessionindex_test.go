package store_test

import (
	"context"
	"regexp"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/aapd/aapd/store/storetest"
)

// turnSetColumns are the columns of sessions that a turn's own statements
// set (its claim, each step's guard and its end: claimSetSQL and the guards
// in turn.go, SessionAnswer).
var turnSetColumns = []string{
	"agent_tools", "options", "secret_options", "client_tools", "pending_tool_calls", "pending_answers",
	"active_turn_id", "lease_owner", "lease_expires_at", "last_seq", "updated_at",
	"reported_tokens", "reported_upto_seq",
}

// A session is updated two or three times a turn. Those updates stay HOT
// (heap-only: no new index entry, no dead version for a key lookup to step
// over) only while no index of sessions holds a column they set; an index
// on updated_at once halved the turns a second (migration 00043,
// docs/benchmarks.md). An index that needs such a column must say why in
// its migration and change this test.
func TestNoIndexOfSessionsHoldsAColumnATurnSets(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, storetest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT indexrelid::regclass::text, pg_get_indexdef(indexrelid)
		FROM pg_index WHERE indrelid = 'sessions'::regclass`)
	if err != nil {
		t.Fatal(err)
	}
	defs, err := pgx.CollectRows(rows, pgx.RowToStructByPos[struct{ Name, Def string }])
	if err != nil {
		t.Fatal(err)
	}
	if len(defs) == 0 {
		t.Fatal("sessions has no index: the catalog query read nothing")
	}
	for _, col := range turnSetColumns {
		word := regexp.MustCompile(`\b` + col + `\b`)
		for _, d := range defs {
			if word.MatchString(d.Def) {
				t.Errorf("index %s holds %s, which every turn sets: %s", d.Name, col, d.Def)
			}
		}
	}
}
