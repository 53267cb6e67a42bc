package store_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/aapd/aapd/store"
	"github.com/aapd/aapd/store/storetest"
)

// Requests racing with one new creation key make one session: the first
// to insert the key wins, the others wait on its primary key, then replay
// it.
func TestConcurrentCreationsWithOneKeyMakeOneSession(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t)
	tn := storetest.NewTenant(t, st)
	const racers = 8
	var (
		wg       sync.WaitGroup
		ids      [racers]string
		replayed [racers]bool
		errs     [racers]error
	)
	for i := range racers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var s store.Session
			s, replayed[i], errs[i] = st.SessionCreate(context.Background(), store.SessionCreateParams{TenantID: tn.ID, AgentName: "echo",
				IdempotencyKey: "raced", RequestHash: []byte("same")})
			ids[i] = s.ID
		}()
	}
	wg.Wait()
	created := 0
	for i := range racers {
		if errs[i] != nil {
			t.Fatalf("racer %d: %v", i, errs[i])
		}
		if ids[i] != ids[0] {
			t.Errorf("racer %d got session %s, racer 0 %s", i, ids[i], ids[0])
		}
		if !replayed[i] {
			created++
		}
	}
	if created != 1 {
		t.Errorf("%d racers created the session, want 1", created)
	}
	var n int
	storetest.Scan(t, storetest.URL(t), `SELECT count(*) FROM sessions WHERE tenant_id = $1`, []any{tn.ID}, &n)
	if n != 1 {
		t.Errorf("%d sessions stored, want 1", n)
	}
}

// A creation key is remembered for its window; after it, the key is free
// again and makes a new session, even for another request.
func TestAnExpiredCreationKeyMakesANewSession(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t)
	ctx := context.Background()
	tn := storetest.NewTenant(t, st)
	create := func(hash string) (store.Session, bool, error) {
		return st.SessionCreate(ctx, store.SessionCreateParams{TenantID: tn.ID, AgentName: "echo", IdempotencyKey: "k", RequestHash: []byte(hash)})
	}
	first, _, err := create("a")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := create("b"); !errors.Is(err, store.ErrIdempotencyMismatch) {
		t.Fatalf("the live key with another request: %v, want ErrIdempotencyMismatch", err)
	}
	storetest.Exec(t, storetest.URL(t), `UPDATE idempotency_keys SET created_at = now() - interval '8 days' WHERE tenant_id = $1`, tn.ID)
	again, replayed, err := create("b")
	if err != nil || replayed || again.ID == first.ID {
		t.Errorf("the expired key: %v, replayed %v, session %s (the first was %s)", err, replayed, again.ID, first.ID)
	}
	if got, replayed, err := create("b"); err != nil || !replayed || got.ID != again.ID {
		t.Errorf("the key reused: %v, replayed %v, session %s, want %s", err, replayed, got.ID, again.ID)
	}
}
