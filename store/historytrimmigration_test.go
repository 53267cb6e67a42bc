package store_test

import (
	"context"
	"fmt"
	"io/fs"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/aapd/aapd/migrations"
	"github.com/aapd/aapd/store"
	"github.com/aapd/aapd/store/storetest"
)

// migrationUp is the Up part of the embedded migration numbered version.
func migrationUp(t *testing.T, version string) string {
	t.Helper()
	names, err := fs.Glob(migrations.FS, version+"_*.sql")
	if err != nil || len(names) != 1 {
		t.Fatalf("migration %s: %v, %v", version, names, err)
	}
	b, err := migrations.FS.ReadFile(names[0])
	if err != nil {
		t.Fatal(err)
	}
	up, _, ok := strings.Cut(string(b), "-- +goose Down")
	if !ok {
		t.Fatalf("migration %s has no Down", names[0])
	}
	return up
}

// runAsWalledRole runs sql in one transaction as the app role, which the
// tenant wall holds as it holds an owner that is no superuser (the wall is
// forced on the tables' owner): what a migration sees when such an owner
// runs it.
func runAsWalledRole(t *testing.T, dbURL, sql string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL ROLE `+store.DefaultAppRole); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, sql)
		return err
	}); err != nil {
		t.Fatalf("run as %s: %v", store.DefaultAppRole, err)
	}
}

// trimTheOldWay trims a session's full history through through, as a trim
// did before it dropped the event logs of the turns it covered: the trim
// of today, and the logs it dropped written back.
func trimTheOldWay(t *testing.T, dbURL string, c *storetest.Conversation, through int64) {
	t.Helper()
	logs := map[string]string{}
	for _, id := range c.Turns {
		var log string
		storetest.Scan(t, dbURL, `SELECT events::text FROM turns WHERE tenant_id = $1 AND id = $2`, []any{c.TenantID, id}, &log)
		logs[id] = log
	}
	c.Trim(dbURL, through)
	for id, log := range logs {
		storetest.Exec(t, dbURL, `UPDATE turns SET events = $3::json WHERE tenant_id = $1 AND id = $2`, c.TenantID, id, log)
	}
}

// rowsHolding counts the rows of every table of the schema whose text
// holds text.
func rowsHolding(t *testing.T, dbURL, text string) map[string]int {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, tbl := range tables {
		var n int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM `+pgx.Identifier{tbl}.Sanitize()+` x WHERE x::text LIKE '%' || $1 || '%'`,
			text).Scan(&n); err != nil {
			t.Fatalf("%s: %v", tbl, err)
		}
		if n > 0 {
			out[tbl] = n
		}
	}
	return out
}

// Sessions trimmed before a trim dropped the event logs of the turns its
// prefix covered keep those logs, which repeat the trimmed text; migration
// 00041 drops them by the trim's own rule, in every tenant, also when its
// owner is held by the tenant wall: afterwards no table holds a trimmed
// turn's text, those turns read as trimmed, and every other log is whole.
func TestMigrationDropsTheEventLogsOfTurnsTrimmedBeforeTrimsDid(t *testing.T) {
	t.Parallel()
	dbURL := storetest.NewDatabase(t)
	st := storetest.OpenURL(t, dbURL)
	ctx := context.Background()
	tn := storetest.NewTenant(t, st)
	other := storetest.NewTenant(t, st)

	c := storetest.NewConversation(t, st, tn.ID, store.SessionCreateParams{})
	for i := 1; i <= 5; i++ { // seqs 2i-1, 2i
		c.Turns = append(c.Turns, sayLogged(t, c, fmt.Sprintf("tn-question-%d", i), fmt.Sprintf("tn-answer-%d", i)))
	}
	trimTheOldWay(t, dbURL, c, 6) // turns 1-3
	oc := storetest.NewConversation(t, st, other.ID, store.SessionCreateParams{})
	for i := 1; i <= 3; i++ {
		oc.Turns = append(oc.Turns, sayLogged(t, oc, fmt.Sprintf("other-question-%d", i), fmt.Sprintf("other-answer-%d", i)))
	}
	trimTheOldWay(t, dbURL, oc, 4) // turns 1-2
	whole := storetest.NewConversation(t, st, tn.ID, store.SessionCreateParams{})
	whole.Turns = append(whole.Turns, sayLogged(t, whole, "whole-question", "whole-answer"))

	gone := []string{"tn-answer-1", "tn-answer-2", "tn-answer-3", "other-answer-1", "other-answer-2",
		"tn-question-1", "tn-question-3", "other-question-2"}
	kept := []string{"tn-answer-4", "tn-answer-5", "other-answer-3", "whole-answer"}
	if n := rowsHolding(t, dbURL, "tn-answer-2"); n["turns"] != 1 {
		t.Fatalf("before the migration, the trimmed turn's text is in %v; want its log in turns (the old way)", n)
	}

	runAsWalledRole(t, dbURL, migrationUp(t, "00041"))
	runAsWalledRole(t, dbURL, migrationUp(t, "00041")) // once more: nothing changes

	for _, text := range gone {
		if n := rowsHolding(t, dbURL, text); len(n) > 0 {
			t.Errorf("%q, trimmed, is still in %v", text, n)
		}
	}
	for _, text := range kept {
		if n := rowsHolding(t, dbURL, text); n["turns"] != 1 {
			t.Errorf("%q is in %v; want it in its turn's log", text, n)
		}
	}
	for _, conv := range []struct {
		c       *storetest.Conversation
		trimmed int
	}{{c, 3}, {oc, 2}, {whole, 0}} {
		for i, id := range conv.c.Turns {
			log, err := st.TurnEventsAfter(ctx, store.TurnRef{TenantID: conv.c.TenantID, SessionID: conv.c.ID, TurnID: id}, 0)
			if err != nil || log.Trimmed != (i < conv.trimmed) || !log.Finished || len(log.Events) != map[bool]int{true: 2, false: 3}[i < conv.trimmed] {
				t.Errorf("session %s, turn %d: %+v, %v; want trimmed %v", conv.c.ID, i+1, log, err, i < conv.trimmed)
			}
		}
	}
}
