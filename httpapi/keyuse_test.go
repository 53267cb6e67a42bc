package httpapi

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/aapd/aapd/auth"
	"github.com/aapd/aapd/store"
	"github.com/aapd/aapd/store/storetest"
)

// Requests with one key write its last_used_at once a minute at most, and
// never on the request path: many requests in quick succession cost one
// UPDATE of api_keys, and the key's use is recorded after the first.
func TestKeyUseIsWrittenAtMostOnceAMinute(t *testing.T) {
	dbURL := storetest.NewDatabase(t) // it gets a trigger that counts writes
	st := storetest.OpenURL(t, dbURL)
	tn := storetest.NewTenant(t, st)
	publicID, err := auth.ParseKey(tn.Key)
	if err != nil {
		t.Fatal(err)
	}
	// On Citus api_keys is a reference table, on which Citus refuses
	// triggers: the count is kept on a worker instead, by a trigger on its
	// copy of the table (the shard api_keys_<id>), which every UPDATE of
	// api_keys reaches once. (Functions are created there without Citus
	// propagating them, as it would from the coordinator only.)
	countOn, table, local := dbURL, "api_keys", ""
	if storetest.Citus() {
		var shard int64
		storetest.Scan(t, dbURL, `SELECT shardid FROM pg_dist_shard WHERE logicalrelid = 'api_keys'::regclass`, nil, &shard)
		countOn, table = storetest.CitusWorkerURLOf(t, dbURL), fmt.Sprintf("api_keys_%d", shard)
		local = "SET citus.enable_ddl_propagation = off; "
	}
	for _, stmt := range []string{
		`CREATE TABLE api_key_writes (at timestamptz NOT NULL DEFAULT clock_timestamp())`,
		local + `CREATE FUNCTION count_api_key_write() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER AS $$
			BEGIN INSERT INTO api_key_writes DEFAULT VALUES; RETURN NULL; END $$`,
		`CREATE TRIGGER count_api_key_writes AFTER UPDATE ON ` + table + `
			FOR EACH STATEMENT EXECUTE FUNCTION count_api_key_write()`,
	} {
		storetest.Exec(t, countOn, stmt)
	}
	var (
		mu  sync.Mutex
		now = time.Now().UTC().Truncate(time.Second)
	)
	clock := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return now
	}
	advance := func(d time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		now = now.Add(d)
	}
	s := newTestServer(t, st, func(c *Config) { c.Now = clock })
	burst := func(n int) {
		t.Helper()
		for range n {
			req, _ := http.NewRequest("GET", s.URL+"/sessions", nil)
			req.Header.Set("Authorization", "Bearer "+tn.Key)
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != http.StatusOK {
				t.Fatalf("GET /sessions: %d", res.StatusCode)
			}
		}
	}
	lastUsed := func() time.Time {
		k, err := st.APIKeyGetByPublicID(context.Background(), publicID)
		if err != nil {
			t.Fatal(err)
		}
		if k.LastUsedAt == nil {
			return time.Time{}
		}
		return *k.LastUsedAt
	}
	writes := func() int {
		var n int
		storetest.Scan(t, countOn, `SELECT count(*) FROM api_key_writes`, nil, &n)
		return n
	}

	t0 := clock()
	burst(20)
	waitFor(t, "last_used_at after the first request", func() bool { return lastUsed().Equal(t0) })
	advance(30 * time.Second)
	burst(20)
	advance(31 * time.Second) // a minute after the first use: written again
	burst(5)
	waitFor(t, "last_used_at a minute later", func() bool { return lastUsed().Equal(t0.Add(61 * time.Second)) })
	s.Close() // waits for any write in flight
	if n := writes(); n != 2 {
		t.Errorf("%d UPDATEs of api_keys for 45 requests over a minute, want 2", n)
	}
}

// The uses that arrive while a write is in flight are written together,
// in one batch, and keys unused for a minute are forgotten.
func TestKeyUsesBatchWhileAWriteIsInFlight(t *testing.T) {
	var (
		mu      sync.Mutex
		batches [][]store.APIKeyUse
		now     = time.Unix(1_800_000_000, 0)
	)
	first, release := make(chan struct{}), make(chan struct{})
	touch := func(_ context.Context, uses []store.APIKeyUse) error {
		mu.Lock()
		batches = append(batches, uses)
		n := len(batches)
		mu.Unlock()
		if n == 1 {
			close(first)
			<-release
		}
		return nil
	}
	clock := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return now
	}
	k := newKeyUses(touch, clock, slog.New(slog.NewTextHandler(io.Discard, nil)))
	k.used("t", "key0")
	<-first // key0's write is in flight
	for i := range 10 {
		k.used("t", fmt.Sprintf("key%d", i%5)) // key0 again, key1..key4 twice
	}
	close(release)
	k.close()
	if len(batches) != 2 || len(batches[0]) != 1 || len(batches[1]) != 4 {
		t.Fatalf("batches = %v, want [key0] then key1..key4", batches)
	}

	mu.Lock()
	now = now.Add(time.Minute)
	mu.Unlock()
	k.mu.Lock()
	k.forgetOld()
	left := len(k.last)
	k.mu.Unlock()
	if left != 0 {
		t.Errorf("%d keys remembered a minute after their use", left)
	}
}
