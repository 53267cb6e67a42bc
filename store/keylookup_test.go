package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/aapd/aapd/store/storetest"
)

// A row is looked up by its primary key on every turn: the foreign-key
// checks of a turn's inserts, the claim, the turn's end, the usage
// rollup. On a database the planner has no statistics for yet (new, or
// restored, until autovacuum first analyzes it) an index that leads with
// the key's first columns costs the same as the key's own, and the planner
// may take it and filter the rest of the key: sessions_idle did, and each
// lookup of a session read every session of its tenant updated that day
// (migration 00044, docs/benchmarks.md). Every tenant table's lookup by
// its primary key must find the row through index conditions on the whole
// key, with no filter on a key column, in the generic plan that prepared
// statements and foreign-key checks use.
func TestALookupByPrimaryKeyFiltersOnNoKeyColumnOnAFreshDatabase(t *testing.T) {
	t.Parallel()
	if storetest.Citus() {
		t.Skip("on Citus the coordinator routes a key lookup to one shard; the shard's plan is the worker's")
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, storetest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT c.relname::text,
			array_agg(a.attname::text ORDER BY k.ord), array_agg(format_type(a.atttypid, a.atttypmod) ORDER BY k.ord)
		FROM pg_index i
		JOIN pg_class c ON c.oid = i.indrelid
		JOIN pg_namespace n ON n.oid = c.relnamespace AND n.nspname = 'public'
		CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, ord)
		JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = k.attnum
		WHERE i.indisprimary AND EXISTS (SELECT 1 FROM pg_attribute t
			WHERE t.attrelid = c.oid AND t.attname = 'tenant_id' AND NOT t.attisdropped)
		GROUP BY c.relname ORDER BY c.relname`)
	if err != nil {
		t.Fatal(err)
	}
	type key struct {
		Table        string
		Columns, Typ []string
	}
	keys, err := pgx.CollectRows(rows, pgx.RowToStructByPos[key])
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) < 10 {
		t.Fatalf("found the keys of %d tenant tables only: the catalog query is wrong", len(keys))
	}
	if _, err := conn.Exec(ctx, "SET plan_cache_mode = force_generic_plan"); err != nil {
		t.Fatal(err)
	}
	for i, k := range keys {
		conds, nulls := make([]string, len(k.Columns)), make([]string, len(k.Columns))
		for j, c := range k.Columns {
			conds[j] = fmt.Sprintf("%s = $%d", pgx.Identifier{c}.Sanitize(), j+1)
			nulls[j] = "NULL"
		}
		name := fmt.Sprintf("key_lookup_%d", i)
		prepare := fmt.Sprintf("PREPARE %s (%s) AS SELECT 1 FROM %s WHERE %s", name, strings.Join(k.Typ, ", "),
			pgx.Identifier{k.Table}.Sanitize(), strings.Join(conds, " AND "))
		if _, err := conn.Exec(ctx, prepare); err != nil {
			t.Fatalf("%s: %v", prepare, err)
		}
		var plan []struct{ Plan planNode }
		var raw string
		if err := conn.QueryRow(ctx, fmt.Sprintf("EXPLAIN (FORMAT JSON) EXECUTE %s(%s)", name, strings.Join(nulls, ", "))).Scan(&raw); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(raw), &plan); err != nil || len(plan) != 1 {
			t.Fatalf("%s: plan %s: %v", k.Table, raw, err)
		}
		var scan *planNode
		for _, n := range plan[0].Plan.scans() {
			if n.Relation == k.Table {
				scan = &n
			}
		}
		switch {
		case scan == nil:
			t.Errorf("%s: no scan of the table in %s", k.Table, raw)
		case scan.Type != "Index Scan" && scan.Type != "Index Only Scan":
			t.Errorf("%s: a lookup by its key (%s) is a %s", k.Table, strings.Join(k.Columns, ", "), scan.Type)
		case uniqueOnKey(t, conn, scan.Index, k.Columns):
			// A unique index on part of the key (api_keys' public id) finds
			// the one row; the rest of the key is checked on it.
		default:
			for _, c := range k.Columns {
				word := regexp.MustCompile(`\b` + regexp.QuoteMeta(c) + `\b`)
				if word.MatchString(scan.Filter) {
					t.Errorf("%s: a lookup by its key takes index %s and filters on %s: %s", k.Table, scan.Index, c, scan.Filter)
				}
				if !word.MatchString(scan.Cond) {
					t.Errorf("%s: a lookup by its key takes index %s, whose conditions (%s) miss %s", k.Table, scan.Index, scan.Cond, c)
				}
			}
		}
	}
}

// uniqueOnKey reports whether index is unique on columns of key only.
func uniqueOnKey(t *testing.T, conn *pgx.Conn, index string, key []string) bool {
	t.Helper()
	var unique bool
	var cols []string
	err := conn.QueryRow(context.Background(), `SELECT i.indisunique, array_agg(a.attname::text)
		FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY (i.indkey)
		WHERE i.indexrelid = $1::regclass GROUP BY i.indisunique`, index).Scan(&unique, &cols)
	if err != nil {
		t.Fatalf("index %s: %v", index, err)
	}
	for _, c := range cols {
		if !slices.Contains(key, c) {
			return false
		}
	}
	return unique && len(cols) > 0
}
