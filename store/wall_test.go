package store_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/store"
	"github.com/aapd/aapd/store/storetest"
)

// tenantTables lists the tables of the schema with a tenant_id column, from
// the catalog: the tables a tenant owns, each behind the wall.
func tenantTables(t *testing.T, conn *pgx.Conn) []string {
	t.Helper()
	rows, err := conn.Query(context.Background(), `SELECT c.relname FROM pg_class c
		JOIN pg_namespace n ON n.oid = c.relnamespace AND n.nspname = 'public'
		JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = 'tenant_id' AND NOT a.attisdropped
		WHERE c.relkind IN ('r', 'p') ORDER BY c.relname`)
	if err != nil {
		t.Fatal(err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(tables, "sessions") || !slices.Contains(tables, "messages") {
		t.Fatalf("the catalog lists %v as tenant tables: no sessions or messages", tables)
	}
	return tables
}

// connectAs connects to the test database as role (the login role of the
// URL taking it, as the store's connections do).
func connectAs(t *testing.T, u, role string) *pgx.Conn {
	t.Helper()
	cfg, err := pgx.ParseConfig(u)
	if err != nil {
		t.Fatal(err)
	}
	cfg.RuntimeParams["role"] = role
	conn, err := pgx.ConnectConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// someOfEverything gives a new tenant rows in most tables: a session with
// seeds and a finished turn, a key (NewTenant).
func someOfEverything(t *testing.T, st *store.Store) storetest.Tenant {
	t.Helper()
	tn := storetest.NewTenant(t, st)
	storetest.NewConversation(t, st, tn.ID, store.SessionCreateParams{IdempotencyKey: "k", RequestHash: []byte("h")},
		aap.Message{Role: aap.RoleUser, Content: aap.TextContent("hello")})
	storetest.CompletedTurn(t, st, tn.ID)
	return tn
}

// A statement run as the server's role in no transaction that declared a
// tenant sees no row of any table a tenant owns; declared, it sees that
// tenant's rows only.
func TestNoTenantDeclaredSeesNoRow(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t)
	ctx := context.Background()
	a, b := someOfEverything(t, st), someOfEverything(t, st)
	app := connectAs(t, storetest.URL(t), store.DefaultAppRole)
	var n int
	storetest.Scan(t, storetest.URL(t), `SELECT count(*) FROM sessions WHERE tenant_id = $1`, []any{a.ID}, &n)
	if n == 0 {
		t.Fatal("the tenant has no session to hide")
	}
	for _, table := range tenantTables(t, app) {
		q := fmt.Sprintf(`SELECT count(*) FROM %s`, pgx.Identifier{table}.Sanitize())
		if err := app.QueryRow(ctx, q).Scan(&n); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		if n != 0 {
			t.Errorf("%s: %d rows seen with no tenant declared", table, n)
		}
	}
	// Declared, a transaction sees its tenant's sessions, and no other's.
	tx, err := app.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT aapd_declare_tenant($1)`, a.ID); err != nil {
		t.Fatal(err)
	}
	var mine, others int
	if err := tx.QueryRow(ctx, `SELECT count(*) FILTER (WHERE tenant_id = $1), count(*) FILTER (WHERE tenant_id <> $1) FROM sessions`,
		a.ID).Scan(&mine, &others); err != nil {
		t.Fatal(err)
	}
	if mine == 0 || others != 0 {
		t.Errorf("declared as tenant %s: %d own sessions, %d of others (%s among them)", a.ID, mine, others, b.ID)
	}
	// Nor can it write another's row.
	if _, err := tx.Exec(ctx, `INSERT INTO usage_daily (tenant_id, day, agent_name) VALUES ($1, current_date, 'x')`, b.ID); err == nil {
		t.Error("a transaction declared as one tenant wrote a row of another")
	}
}

// A store method whose tenant filter is gone (a test-only hook drops it
// from SessionList's statement) still returns nothing of another tenant:
// the wall holds. Through the chores role, which passes the wall, the same
// statement shows that the hook did drop the filter.
func TestWallHoldsWithoutTheTenantFilter(t *testing.T) {
	st := storetest.Open(t)
	ctx := context.Background()
	a, b := someOfEverything(t, st), someOfEverything(t, st)
	store.DropSessionListTenantFilter(t)

	page, err := st.SessionList(ctx, store.SessionListParams{TenantID: a.ID, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Sessions) == 0 {
		t.Fatal("tenant a listed none of its own sessions")
	}
	for _, s := range page.Sessions {
		if s.TenantID != a.ID {
			t.Errorf("tenant %s was shown session %s of tenant %s", a.ID, s.ID, s.TenantID)
		}
	}

	bypass, err := store.Open(ctx, store.Config{DatabaseURL: storetest.URL(t), AppRole: store.DefaultChoresRole})
	if err != nil {
		t.Fatal(err)
	}
	defer bypass.Close()
	page, err = bypass.SessionList(ctx, store.SessionListParams{TenantID: a.ID, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(page.Sessions, func(s store.Session) bool { return s.TenantID == b.ID }) {
		t.Error("without the wall the hook's statement did not list the other tenant's sessions: the test proves nothing")
	}
}

// Every table with a tenant_id column has the wall: row-level security,
// forced, and the tenant_wall policy on the declared tenant, for reading
// and writing. A migration that adds a tenant-owned table without
// aapd_tenant_wall fails here (docs/security.md). The server's role owns
// nothing and passes no wall; the chores role passes it.
func TestEveryTenantTableHasTheWall(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, storetest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	const want = "(tenant_id = (NULLIF(current_setting('aapd.tenant_id'::text, true), ''::text))::uuid)"
	for _, table := range tenantTables(t, conn) {
		var (
			rls, force    bool
			owner         string
			using, check  *string
			cmd, policies string
		)
		err := conn.QueryRow(ctx, `SELECT c.relrowsecurity, c.relforcerowsecurity, pg_get_userbyid(c.relowner),
				p.qual, p.with_check, coalesce(p.cmd, ''),
				(SELECT string_agg(policyname, ',') FROM pg_policies WHERE schemaname = 'public' AND tablename = c.relname)
			FROM pg_class c LEFT JOIN pg_policies p ON p.schemaname = 'public' AND p.tablename = c.relname AND p.policyname = 'tenant_wall'
			WHERE c.oid = $1::regclass`, table).Scan(&rls, &force, &owner, &using, &check, &cmd, &policies)
		if err != nil {
			t.Fatalf("%s: %v", table, err)
		}
		switch {
		case !rls || !force:
			t.Errorf("%s: row level security enabled %v, forced %v: run SELECT aapd_tenant_wall('%s') in its migration", table, rls, force, table)
		case using == nil || *using != want || check == nil || *check != want || cmd != "ALL":
			t.Errorf("%s: policy tenant_wall for %q using %v with check %v, want for ALL %s", table, cmd, deref(using), deref(check), want)
		case policies != "tenant_wall":
			t.Errorf("%s: policies %s: a permissive policy besides tenant_wall widens the wall", table, policies)
		case owner == store.DefaultAppRole || owner == store.DefaultChoresRole:
			t.Errorf("%s is owned by %s", table, owner)
		}
	}
	roles := map[string][2]bool{}
	rows, err := conn.Query(ctx, `SELECT rolname, rolsuper, rolbypassrls FROM pg_roles WHERE rolname = ANY($1)`,
		[]string{store.DefaultAppRole, store.DefaultChoresRole})
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var name string
		var super, bypass bool
		if err := rows.Scan(&name, &super, &bypass); err != nil {
			t.Fatal(err)
		}
		roles[name] = [2]bool{super, bypass}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if r, ok := roles[store.DefaultAppRole]; !ok || r[0] || r[1] {
		t.Errorf("%s: exists %v, superuser %v, bypasses row security %v: want a role the wall holds", store.DefaultAppRole, ok, r[0], r[1])
	}
	if r, ok := roles[store.DefaultChoresRole]; !ok || r[0] || !r[1] {
		t.Errorf("%s: exists %v, superuser %v, bypasses row security %v: want a role that passes the wall only", store.DefaultChoresRole, ok, r[0], r[1])
	}
}

func deref(s *string) string {
	if s == nil {
		return "<none>"
	}
	return *s
}

// On Citus the wall is on every shard: a worker's shards of the tenant
// tables have row-level security, forced, and the tenant_wall policy, and
// the server's role, reading them on the worker with no tenant declared,
// sees no row of them.
func TestWallReachesEveryShard(t *testing.T) {
	t.Parallel()
	worker := storetest.CitusWorkerURL(t) // skips on plain PostgreSQL
	st := storetest.Open(t)
	ctx := context.Background()
	super := connectAs(t, worker, "postgres")
	app := connectAs(t, worker, store.DefaultAppRole)
	for _, c := range []*pgx.Conn{super, app} {
		if _, err := c.Exec(ctx, `SET citus.show_shards_for_app_name_prefixes = '*'`); err != nil {
			t.Fatal(err)
		}
	}
	// Tenants until one has its rows on this worker.
	for i := 0; ; i++ {
		tn := someOfEverything(t, st)
		var here bool
		if err := super.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_class
				WHERE relname = 'sessions_' || get_shard_id_for_distribution_column('sessions', $1::uuid))`, tn.ID).Scan(&here); err != nil {
			t.Fatal(err)
		}
		if here {
			break
		}
		if i == 20 {
			t.Fatal("20 tenants, none with its rows on the worker")
		}
	}
	rows, err := super.Query(ctx, `SELECT c.relname, c.relrowsecurity, c.relforcerowsecurity,
			EXISTS (SELECT 1 FROM pg_policies p WHERE p.schemaname = 'public' AND p.tablename = c.relname AND p.policyname = 'tenant_wall')
		FROM pg_class c
		JOIN pg_namespace n ON n.oid = c.relnamespace AND n.nspname = 'public'
		JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = 'tenant_id' AND NOT a.attisdropped
		WHERE c.relkind = 'r' AND c.relname ~ '_[0-9]+$' ORDER BY c.relname`)
	if err != nil {
		t.Fatal(err)
	}
	type shard struct {
		name               string
		rls, force, policy bool
	}
	shards, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (s shard, err error) {
		err = r.Scan(&s.name, &s.rls, &s.force, &s.policy)
		return s, err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(shards) == 0 {
		t.Fatal("the worker lists no shard of a tenant table")
	}
	seen := 0
	for _, s := range shards {
		if !s.rls || !s.force || !s.policy {
			t.Errorf("shard %s: row level security %v, forced %v, policy tenant_wall %v", s.name, s.rls, s.force, s.policy)
		}
		q := fmt.Sprintf(`SELECT count(*) FROM %s`, pgx.Identifier{s.name}.Sanitize())
		var all, visible int
		if err := super.QueryRow(ctx, q).Scan(&all); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		if err := app.QueryRow(ctx, q).Scan(&visible); err != nil {
			t.Fatalf("%s as %s: %v", q, store.DefaultAppRole, err)
		}
		seen += all
		if visible != 0 {
			t.Errorf("shard %s: %d of its %d rows seen on the worker with no tenant declared", s.name, visible, all)
		}
	}
	if seen == 0 {
		t.Error("the worker's shards hold no row: the test proves nothing")
	}
}
