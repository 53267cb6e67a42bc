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

// A thread id names one session per tenant and owner: the same id in
// another tenant, or of another owner, is another thread, and a second
// session of the same thread is a conflict.
func TestThreadIDsAreScopedToTenantAndOwner(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t)
	ctx := context.Background()
	a, b := storetest.NewTenant(t, st), storetest.NewTenant(t, st)
	create := func(tenant, owner string) (store.Session, error) {
		s, _, err := st.SessionCreate(ctx, store.SessionCreateParams{TenantID: tenant, Owner: owner, AgentName: "echo", ThreadID: "t1"})
		return s, err
	}
	byKey, err := create(a.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ tenant, owner string }{{b.ID, ""}, {a.ID, "alice"}, {a.ID, "bob"}} {
		if _, err := create(c.tenant, c.owner); err != nil {
			t.Fatalf("thread t1 of tenant %s owner %q: %v", c.tenant, c.owner, err)
		}
	}
	if _, err := create(a.ID, ""); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("a second session of the same thread: err = %v, want ErrConflict", err)
	}
	got, err := st.SessionGetByThread(ctx, a.ID, "", "t1")
	if err != nil || got.ID != byKey.ID {
		t.Fatalf("SessionGetByThread = %s, %v; want %s", got.ID, err, byKey.ID)
	}
	alice, err := st.SessionGetByThread(ctx, a.ID, "alice", "t1")
	if err != nil || alice.ID == byKey.ID || alice.Owner != "alice" {
		t.Fatalf("alice's thread t1 = %+v, %v", alice, err)
	}
	if _, err := st.SessionGetByThread(ctx, a.ID, "carol", "t1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("carol has no thread t1: err = %v", err)
	}
}

// The ids a client gives its messages are stored with them, by session
// creation and by a turn's claim, and only for the session they belong to.
func TestMessageClientIDsAreStoredWithTheirMessages(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t)
	ctx := context.Background()
	tn := storetest.NewTenant(t, st)
	sess, _, err := st.SessionCreate(ctx, store.SessionCreateParams{
		TenantID: tn.ID, AgentName: "echo",
		Messages:   []aap.Message{aap.SystemMessage("be brief"), aap.UserMessage("hi"), aap.AssistantMessage(aap.TextBlock("hello"))},
		MessageIDs: []string{"sys", "", "a1"},
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = st.TurnBegin(ctx, &store.TurnBeginParams{
		TenantID: tn.ID, SessionID: sess.ID, TurnID: store.NewTurnID(), Stream: aap.StreamDelta, Owner: 1, Lease: time.Minute,
		Prepare: func(store.Session) (store.TurnPlan, error) {
			return store.TurnPlan{Messages: []store.NewMessage{{Message: aap.UserMessage("again"), Origin: store.OriginClient, ClientID: "u2"}}}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := st.MessageIDsStored(ctx, tn.ID, sess.ID, []string{"sys", "a1", "u2", "u3", ""})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || !got["sys"] || !got["a1"] || !got["u2"] {
		t.Fatalf("stored ids = %v, want sys, a1 and u2", got)
	}
	other := storetest.NewTenant(t, st)
	if got, err := st.MessageIDsStored(ctx, other.ID, sess.ID, []string{"sys", "u2"}); err != nil || len(got) != 0 {
		t.Fatalf("another tenant sees ids %v, %v", got, err)
	}
}
