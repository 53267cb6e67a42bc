package store_test

import (
	"context"
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/aapd/aapd/store"
	"github.com/aapd/aapd/store/storetest"
)

// planNode is a node of EXPLAIN (FORMAT JSON).
type planNode struct {
	Type      string     `json:"Node Type"`
	Relation  string     `json:"Relation Name"`
	Index     string     `json:"Index Name"`
	Cond      string     `json:"Index Cond"`
	Filter    string     `json:"Filter"`
	Rows      float64    `json:"Actual Rows"`
	Removed   float64    `json:"Rows Removed by Filter"`
	Children  []planNode `json:"Plans"`
	HeapFetch float64    `json:"Heap Fetches"`
}

func (n planNode) scans() []planNode {
	var out []planNode
	if n.Index != "" || n.Type == "Seq Scan" {
		out = append(out, n)
	}
	for _, c := range n.Children {
		out = append(out, c.scans()...)
	}
	return out
}

// The listings page by keyset: under a generic plan (what a prepared
// statement gets after a few runs) the cursor must still bound the index
// scan, so a page reads its own rows and no others, whatever the page.
// With `($2 = ” OR id < $2)` a page near the end of a 1,000,000-session
// tenant took 975 ms.
func TestListingsStayBoundedUnderAGenericPlan(t *testing.T) {
	if testing.Short() {
		t.Skip("inserts 200,000 sessions")
	}
	dbURL := storetest.NewDatabase(t)
	st := storetest.OpenURL(t, dbURL)
	tn := storetest.NewTenant(t, st)
	const n, limit = 200000, 20
	// Half the sessions are end users' (u1 and u2), half the API key's.
	storetest.Exec(t, dbURL, `INSERT INTO sessions (tenant_id, id, agent_name, owner)
		SELECT $1, 'sess_' || lpad(to_hex(i), 32, '0'), 'echo',
			CASE i % 4 WHEN 0 THEN 'u1' WHEN 1 THEN 'u2' END
		FROM generate_series(1, $2::int) AS i`, tn.ID, n)
	storetest.Exec(t, dbURL, `INSERT INTO turns (tenant_id, session_id, id, status, stream)
		SELECT $1, 'sess_' || lpad(to_hex(1), 32, '0'), 'turn_' || lpad(to_hex(i), 32, '0'), 'completed', 'none'
		FROM generate_series(1, $2::int) AS i`, tn.ID, n)
	storetest.Exec(t, dbURL, `ANALYZE sessions; ANALYZE turns`)

	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `SET plan_cache_mode = force_generic_plan`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `PREPARE sessions_page AS `+store.SessionListSQL); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `PREPARE turns_page AS `+store.TurnListSQL); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `PREPARE owner_page AS `+store.SessionListByOwnerSQL); err != nil {
		t.Fatal(err)
	}
	first, nearEnd := "sess_~", "sess_"+pad(40)
	for _, tc := range []struct{ name, explain string }{
		{"sessions, first page", `EXECUTE sessions_page('` + tn.ID + `', '` + first + `', ` + itoa(limit+1) + `)`},
		{"sessions, near the oldest", `EXECUTE sessions_page('` + tn.ID + `', '` + nearEnd + `', ` + itoa(limit+1) + `)`},
		{"an owner's sessions, first page", `EXECUTE owner_page('` + tn.ID + `', '` + first + `', ` + itoa(limit+1) + `, 'u1')`},
		{"an owner's sessions, near the oldest", `EXECUTE owner_page('` + tn.ID + `', '` + nearEnd + `', ` + itoa(limit+1) + `, 'u1')`},
		{"turns, first page", `EXECUTE turns_page('` + tn.ID + `', 'sess_` + pad(1) + `', 'turn_~', ` + itoa(limit+1) + `)`},
		{"turns, near the oldest", `EXECUTE turns_page('` + tn.ID + `', 'sess_` + pad(1) + `', 'turn_` + pad(40) + `', ` + itoa(limit+1) + `)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if storetest.Citus() {
				checkCitusPlan(t, conn, tc.explain, limit+1)
				return
			}
			var out []byte
			if err := conn.QueryRow(ctx, `EXPLAIN (ANALYZE, FORMAT JSON) `+tc.explain).Scan(&out); err != nil {
				t.Fatal(err)
			}
			var plans []struct{ Plan planNode }
			if err := json.Unmarshal(out, &plans); err != nil || len(plans) != 1 {
				t.Fatalf("explain: %v %s", err, out)
			}
			scans := plans[0].Plan.scans()
			if len(scans) != 1 {
				t.Fatalf("scans: %+v", scans)
			}
			s := scans[0]
			if s.Index == "" || s.Filter != "" || s.Removed > 0 || s.Rows > limit+1 {
				t.Errorf("scan %s on %q, cond %q, filter %q: %v rows, %v removed by the filter; want the cursor in the index condition and at most %d rows",
					s.Type, s.Index, s.Cond, s.Filter, s.Rows, s.Removed, limit+1)
			}
		})
	}
}

// checkCitusPlan checks a listing's plan on Citus, whose EXPLAIN (FORMAT
// JSON) embeds the workers' plans as text: one task (one shard), read by
// an index whose condition holds the cursor, no filter, no more rows than
// the page.
func checkCitusPlan(t *testing.T, conn *pgx.Conn, explain string, maxRows int) {
	t.Helper()
	rows, err := conn.Query(context.Background(), `EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) `+explain)
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	plan := strings.Join(lines, "\n")
	if !strings.Contains(plan, "Task Count: 1") {
		t.Fatalf("want one task (one shard):\n%s", plan)
	}
	if strings.Contains(plan, "Seq Scan") || strings.Contains(plan, "Filter:") || strings.Contains(plan, "Sort") {
		t.Fatalf("want an index scan bounded by the cursor, no filter and no sort:\n%s", plan)
	}
	scan := regexp.MustCompile(`Index (Only )?Scan.*actual rows=(\d+)`).FindStringSubmatch(plan)
	if scan == nil {
		t.Fatalf("no index scan:\n%s", plan)
	}
	if n, _ := strconv.Atoi(scan[2]); n > maxRows {
		t.Errorf("the index scan read %d rows; want at most %d:\n%s", n, maxRows, plan)
	}
	if !regexp.MustCompile(`Index Cond: .*id < `).MatchString(plan) {
		t.Errorf("want the cursor in the index condition:\n%s", plan)
	}
}

func pad(i int) string {
	h := []byte("00000000000000000000000000000000")
	for j := len(h) - 1; i > 0; j-- {
		h[j] = "0123456789abcdef"[i%16]
		i /= 16
	}
	return string(h)
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }
