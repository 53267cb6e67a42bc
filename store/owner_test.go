package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/store"
	"github.com/aapd/aapd/store/storetest"
)

// Every query on a session confines an end user to the sessions they own,
// in the statement that reads the session: another's is ErrNotFound, and
// "" (an API key) reaches them all.
func TestOwnerFiltersConfineEndUsersToTheirSessions(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t)
	ctx := context.Background()
	tn := storetest.NewTenant(t, st)
	create := func(owner string) store.Session {
		s, _, err := st.SessionCreate(ctx, store.SessionCreateParams{TenantID: tn.ID, Owner: owner, AgentName: "echo"})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s1, s2, keys := create("user1"), create("user2"), create("")

	for _, c := range []struct {
		owner, id string
		found     bool
	}{
		{"user1", s1.ID, true}, {"user1", s2.ID, false}, {"user1", keys.ID, false},
		{"", s1.ID, true}, {"", keys.ID, true},
	} {
		got, err := st.SessionGetOwned(ctx, tn.ID, c.owner, c.id)
		if c.found && (err != nil || got.ID != c.id) {
			t.Errorf("owner %q, session %s: %+v, %v", c.owner, c.id, got, err)
		}
		if !c.found && !errors.Is(err, store.ErrNotFound) {
			t.Errorf("owner %q reached session %s: %v", c.owner, c.id, err)
		}
	}
	if got, _ := st.SessionGet(ctx, tn.ID, s2.ID); got.Owner != "user2" {
		t.Errorf("stored owner %q", got.Owner)
	}

	page, err := st.SessionList(ctx, store.SessionListParams{TenantID: tn.ID, Owner: "user1", Limit: 10})
	if err != nil || len(page.Sessions) != 1 || page.Sessions[0].ID != s1.ID {
		t.Errorf("user1's listing: %+v, %v", page.Sessions, err)
	}
	if page, _ := st.SessionList(ctx, store.SessionListParams{TenantID: tn.ID, Limit: 10}); len(page.Sessions) != 3 {
		t.Errorf("the tenant's listing has %d sessions, want 3", len(page.Sessions))
	}

	// A turn on another's session is refused in the claim's own read.
	begin := func(owner, id string) (*store.TurnBegun, error) {
		return st.TurnBegin(ctx, &store.TurnBeginParams{
			TenantID: tn.ID, SessionID: id, SessionOwner: owner, TurnID: store.NewTurnID(), Stream: aap.StreamNone, Owner: 1, Lease: time.Minute,
			Prepare: func(store.Session) (store.TurnPlan, error) {
				return store.TurnPlan{Messages: []store.NewMessage{{Message: aap.UserMessage("hi"), Origin: store.OriginClient}}}, nil
			},
		})
	}
	if _, err := begin("user1", s2.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("user1 began a turn on user2's session: %v", err)
	}
	begun, err := begin("user2", s2.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.TurnGetOwned(ctx, tn.ID, "user1", s2.ID, begun.Turn.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("user1 read user2's turn: %v", err)
	}
	if _, err := st.TurnGetOwned(ctx, tn.ID, "user2", s2.ID, begun.Turn.ID); err != nil {
		t.Errorf("user2 reading their turn: %v", err)
	}

	if _, err := st.SessionDeleteOwned(ctx, tn.ID, "user1", s2.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("user1 deleted user2's session: %v", err)
	}
	if _, err := st.SessionGet(ctx, tn.ID, s2.ID); err != nil {
		t.Errorf("user2's session after user1's attempt: %v", err)
	}
	if _, err := st.SessionDeleteOwned(ctx, tn.ID, "user2", s2.ID); err != nil {
		t.Errorf("user2 deleting their session: %v", err)
	}
}

// Session-creation idempotency keys are kept per owner.
func TestIdempotencyKeysArePerOwner(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t)
	ctx := context.Background()
	tn := storetest.NewTenant(t, st)
	create := func(owner string) (store.Session, bool) {
		s, replayed, err := st.SessionCreate(ctx, store.SessionCreateParams{TenantID: tn.ID, Owner: owner, AgentName: "echo",
			IdempotencyKey: "k", RequestHash: []byte("same")})
		if err != nil {
			t.Fatal(err)
		}
		return s, replayed
	}
	a, _ := create("user1")
	b, replayed := create("user2")
	c, replayedKey := create("")
	if b.ID == a.ID || c.ID == a.ID || c.ID == b.ID || replayed || replayedKey {
		t.Errorf("one key across owners: %s, %s (replayed %v), %s (replayed %v)", a.ID, b.ID, replayed, c.ID, replayedKey)
	}
	if again, replayed := create("user1"); again.ID != a.ID || !replayed {
		t.Errorf("user1's retry: %s replayed=%v, want %s", again.ID, replayed, a.ID)
	}
}
