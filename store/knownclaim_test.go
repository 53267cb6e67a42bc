package store_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/store"
	"github.com/aapd/aapd/store/storetest"
)

// knownTurn runs one turn through the store as a runner does — claim with
// known (nil for none), one answer, finish — and returns the session as
// the finish left it, with the history the claim returned.
func knownTurn(t *testing.T, st *store.Store, ref store.TurnRef, owner string, known *store.KnownSession, text string) (*store.KnownSession, *store.TurnBegun, error) {
	t.Helper()
	ctx := context.Background()
	begun, err := st.TurnBegin(ctx, &store.TurnBeginParams{
		TenantID: ref.TenantID, SessionID: ref.SessionID, SessionOwner: owner, TurnID: store.NewTurnID(),
		Stream: aap.StreamNone, Owner: 1, Lease: time.Minute, Known: known,
		Prepare: func(store.Session) (store.TurnPlan, error) {
			return store.TurnPlan{Messages: []store.NewMessage{{Message: aap.UserMessage(text), Origin: store.OriginClient}},
				SetOptions: true, Options: map[string]string{"turn": text}}, nil
		},
	})
	if err != nil {
		return nil, begun, err
	}
	answer := []store.NewMessage{{Message: aap.AssistantMessage(aap.ContentBlock{Type: aap.BlockText, Text: "Echo: " + text}), Origin: store.OriginAgent}}
	version, err := st.TurnFinish(ctx, store.TurnFinishParams{
		Ref: begun.Turn.Ref(), Step: 1, FirstSeq: begun.LastSeq + 1, Messages: answer, Status: store.TurnCompleted,
		StopReason: aap.StopEndTurn, Events: []aap.Event{aap.TurnStart(), aap.TurnStop(aap.StopEndTurn)},
	})
	if err != nil {
		t.Fatalf("finish: %v", err)
	}
	if version.IsZero() {
		t.Fatal("TurnFinish returned no version")
	}
	sess := begun.Session
	sess.ActiveTurnID = ""
	return &store.KnownSession{Session: sess, LastSeq: begun.LastSeq + 1, CompactionVersion: begun.CompactionVersion, Version: version}, begun, nil
}

// firstTurn runs a session's first turn ("one"), with nothing known, and
// returns the session as its end left it.
func firstTurn(t *testing.T, st *store.Store, ref store.TurnRef, owner string) *store.KnownSession {
	t.Helper()
	known, _, err := knownTurn(t, st, ref, owner, nil, "one")
	if err != nil {
		t.Fatal(err)
	}
	return known
}

func newKnownSession(t *testing.T, st *store.Store, owner string) store.TurnRef {
	t.Helper()
	tn := storetest.NewTenant(t, st)
	sess, _, err := st.SessionCreate(context.Background(), store.SessionCreateParams{TenantID: tn.ID, AgentName: "echo", Owner: owner})
	if err != nil {
		t.Fatal(err)
	}
	return store.TurnRef{TenantID: tn.ID, SessionID: sess.ID}
}

// A session this process left as it is is claimed in one round trip,
// reading nothing; one written since by anyone else is read first, so the
// turn sees what the other wrote. Each case writes the session behind the
// known version's back and checks the next turn saw it.
func TestAClaimOfAKnownSessionReadsWhatChangedSince(t *testing.T) {
	st := storetest.Open(t)
	ctx := context.Background()
	url := storetest.URL(t)

	t.Run("unchanged", func(t *testing.T) {
		ref := newKnownSession(t, st, "")
		known := firstTurn(t, st, ref, "")
		_, begun, err := knownTurn(t, st, ref, "", known, "two")
		if err != nil {
			t.Fatal(err)
		}
		if begun.HistoryWhole || len(begun.History) != 0 || begun.LastSeq != 3 || begun.Appended[0].Seq != 3 {
			t.Errorf("claim of an unchanged session: whole %v, %d read, last seq %d", begun.HistoryWhole, len(begun.History), begun.LastSeq)
		}
		if got := historyTexts(t, st, ref, aap.HistoryFull); fmt.Sprint(got) != "[1:one 2:Echo: one 3:two 4:Echo: two]" {
			t.Errorf("history = %q", got)
		}
	})

	t.Run("just created", func(t *testing.T) {
		tn := storetest.NewTenant(t, st)
		for _, p := range []store.SessionCreateParams{
			{TenantID: tn.ID, AgentName: "echo"},
			{TenantID: tn.ID, AgentName: "echo", Messages: []aap.Message{aap.UserMessage("seed")}, IdempotencyKey: "k", RequestHash: []byte("h")},
		} {
			sess, _, err := st.SessionCreate(ctx, p)
			if err != nil || sess.Version.IsZero() {
				t.Fatalf("create: %v, version %v", err, sess.Version)
			}
			seeded := int64(len(p.Messages))
			ref := store.TurnRef{TenantID: tn.ID, SessionID: sess.ID}
			_, begun, err := knownTurn(t, st, ref, "", &store.KnownSession{Session: sess, LastSeq: seeded, Version: sess.Version}, "one")
			if err != nil {
				t.Fatal(err)
			}
			if begun.HistoryWhole || len(begun.History) != 0 || begun.Appended[0].Seq != seeded+1 {
				t.Errorf("first claim of a session just created (%d seeds) read: whole %v, %d messages", seeded, begun.HistoryWhole, len(begun.History))
			}
		}
		// A replayed creation made nothing: its version is unknown.
		sess, replayed, err := st.SessionCreate(ctx, store.SessionCreateParams{TenantID: tn.ID, AgentName: "echo",
			Messages: []aap.Message{aap.UserMessage("seed")}, IdempotencyKey: "k", RequestHash: []byte("h")})
		if err != nil || !replayed || !sess.Version.IsZero() {
			t.Errorf("replayed creation: %v, replayed %v, version %v", err, replayed, sess.Version)
		}
	})

	t.Run("another process ran a turn since", func(t *testing.T) {
		ref := newKnownSession(t, st, "")
		known := firstTurn(t, st, ref, "")
		if _, _, err := knownTurn(t, st, ref, "", nil, "elsewhere"); err != nil {
			t.Fatal(err)
		}
		_, begun, err := knownTurn(t, st, ref, "", known, "two")
		if err != nil {
			t.Fatal(err)
		}
		if begun.LastSeq != 5 || begun.Appended[0].Seq != 5 {
			t.Errorf("the stale claim stored the message at seq %d, want 5", begun.Appended[0].Seq)
		}
		if got := historyTexts(t, st, ref, aap.HistoryFull); fmt.Sprint(got) != "[1:one 2:Echo: one 3:elsewhere 4:Echo: elsewhere 5:two 6:Echo: two]" {
			t.Errorf("history = %q", got)
		}
	})

	t.Run("any write to the row since", func(t *testing.T) {
		ref := newKnownSession(t, st, "")
		known := firstTurn(t, st, ref, "")
		// A write that changes nothing the turn reads still moves the row.
		storetest.Exec(t, url, `UPDATE sessions SET pending_tool_calls = pending_tool_calls WHERE id = $1`, ref.SessionID)
		prepared := 0
		_, err := st.TurnBegin(ctx, &store.TurnBeginParams{TenantID: ref.TenantID, SessionID: ref.SessionID, TurnID: store.NewTurnID(),
			Stream: aap.StreamNone, Owner: 1, Lease: time.Minute, Known: known, CachedVersion: known.CompactionVersion, CachedUpTo: known.LastSeq,
			Prepare: func(store.Session) (store.TurnPlan, error) { prepared++; return store.TurnPlan{}, nil }})
		if err != nil || prepared != 2 {
			t.Errorf("claim after a write: %v, prepared %d times, want 2 (known, then as read)", err, prepared)
		}
	})

	t.Run("an idempotency key", func(t *testing.T) {
		ref := newKnownSession(t, st, "")
		known := firstTurn(t, st, ref, "")
		claim := func(known *store.KnownSession, key, hash string) (*store.TurnBegun, int, error) {
			prepared := 0
			begun, err := st.TurnBegin(ctx, &store.TurnBeginParams{TenantID: ref.TenantID, SessionID: ref.SessionID, TurnID: store.NewTurnID(),
				Stream: aap.StreamNone, Owner: 1, Lease: time.Minute, Known: known, IdempotencyKey: key, RequestHash: []byte(hash),
				Prepare: func(store.Session) (store.TurnPlan, error) {
					prepared++
					return store.TurnPlan{Messages: []store.NewMessage{{Message: aap.UserMessage("keyed"), Origin: store.OriginClient}}}, nil
				}})
			return begun, prepared, err
		}
		// A new key is written with the turn: one round trip, as without.
		first, prepared, err := claim(known, "key-1", "h")
		if err != nil || first.Replay || prepared != 1 || first.Turn.IdempotencyKey != "key-1" {
			t.Fatalf("claim with a new key: %v, replay %v, prepared %d times (want 1: no read)", err, first.Replay, prepared)
		}
		version, err := st.TurnFinish(ctx, store.TurnFinishParams{Ref: first.Turn.Ref(), Step: 1, FirstSeq: first.LastSeq + 1,
			Status: store.TurnCompleted, StopReason: aap.StopEndTurn, Events: []aap.Event{aap.TurnStart(), aap.TurnStop(aap.StopEndTurn)}})
		if err != nil {
			t.Fatal(err)
		}
		sess := first.Session
		sess.ActiveTurnID = ""
		known = &store.KnownSession{Session: sess, LastSeq: first.LastSeq, CompactionVersion: first.CompactionVersion, Version: version}

		// The key again, on a session still as known: the key's unique
		// index voids the one-round-trip claim, and the read replays.
		again, _, err := claim(known, "key-1", "h")
		if err != nil || !again.Replay || again.Turn.ID != first.Turn.ID {
			t.Errorf("the key again: %v, replay %v, turn %s (want %s)", err, again.Replay, again.Turn.ID, first.Turn.ID)
		}
		if _, _, err := claim(known, "key-1", "another body"); !errors.Is(err, store.ErrIdempotencyMismatch) {
			t.Errorf("the key with another request: %v, want ErrIdempotencyMismatch", err)
		}
		if got := historyTexts(t, st, ref, aap.HistoryFull); fmt.Sprint(got) != "[1:one 2:Echo: one 3:keyed]" {
			t.Errorf("history = %q: a replay stored something", got)
		}
	})

	t.Run("a turn holds the session", func(t *testing.T) {
		ref := newKnownSession(t, st, "")
		known := firstTurn(t, st, ref, "")
		in, err := st.StartInstance(ctx, store.InstanceParams{})
		if err != nil {
			t.Fatal(err)
		}
		defer in.Close()
		running, err := st.TurnBegin(ctx, &store.TurnBeginParams{TenantID: ref.TenantID, SessionID: ref.SessionID, TurnID: store.NewTurnID(),
			Stream: aap.StreamNone, Owner: in.ID(), Lease: time.Minute,
			Prepare: func(store.Session) (store.TurnPlan, error) { return store.TurnPlan{}, nil }})
		if err != nil {
			t.Fatal(err)
		}
		var busy *store.TurnRunningError
		if _, _, err := knownTurn(t, st, ref, "", known, "two"); !errors.As(err, &busy) || busy.TurnID != running.Turn.ID {
			t.Errorf("known claim while a turn runs: %v, want TurnRunningError", err)
		}
	})

	t.Run("deleted", func(t *testing.T) {
		ref := newKnownSession(t, st, "")
		known := firstTurn(t, st, ref, "")
		if _, err := st.SessionDelete(ctx, ref.TenantID, ref.SessionID); err != nil {
			t.Fatal(err)
		}
		if _, _, err := knownTurn(t, st, ref, "", known, "two"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("known claim of a deleted session: %v, want ErrNotFound", err)
		}
	})

	t.Run("another owner", func(t *testing.T) {
		ref := newKnownSession(t, st, "alice")
		known := firstTurn(t, st, ref, "alice")
		if _, _, err := knownTurn(t, st, ref, "mallory", known, "two"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("known claim by another owner: %v, want ErrNotFound", err)
		}
		if got := historyTexts(t, st, ref, aap.HistoryFull); fmt.Sprint(got) != "[1:one 2:Echo: one]" {
			t.Errorf("history = %q", got)
		}
	})
}
