package main

import (
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/auth/authtest"
	"github.com/aapd/aapd/httpapi"
	"github.com/aapd/aapd/store"
)

// ownedTenant is a tenant with an issuer, its API key and two end users.
type ownedTenant struct {
	key, user1, user2 *client
}

func newOwnedTenant(t *testing.T, s *testServer) ownedTenant {
	t.Helper()
	key, tenant := s.newTenantWithKey(t)
	es := authtest.NewES256(t, "")
	s.registerIssuer(t, tenant, "https://owners.example/"+tenant, "aapd", "", es.PublicPEM(t))
	as := func(sub string) *client {
		return s.bearer(t, es.Sign(t, authtest.Claims("https://owners.example/"+tenant, "aapd", sub)))
	}
	return ownedTenant{key: key, user1: as("user1"), user2: as("user2")}
}

func sessionIDs(t *testing.T, c *client, query string) []string {
	t.Helper()
	var list httpapi.SessionList
	c.do("GET", "/sessions"+query, nil).expect(t, http.StatusOK).json(t, &list)
	ids := make([]string, len(list.Sessions))
	for i, s := range list.Sessions {
		ids[i] = s.SessionID
	}
	return ids
}

func TestEndUsersSeeOnlyTheirOwnSessions(t *testing.T) {
	t.Parallel()
	s := startParallelServer(t)
	tn := newOwnedTenant(t, s)
	s1 := tn.user1.echoSession(nil)
	tn.user1.say(s1, "mine")
	s2 := tn.user2.echoSession(nil)
	r := tn.user2.do("POST", "/sessions/"+s2+"/turns", user("secret of user2")).expect(t, http.StatusOK)
	turn2 := r.Header.Get(httpapi.TurnIDHeader)
	keys := tn.key.echoSession(nil)
	unknown, unknownTurn := store.NewSessionID(), store.NewTurnID()

	intrusions := []intrusion{
		{"get session", "GET", "/sessions/{id}", nil},
		{"full history", "GET", "/sessions/{id}/history?type=full", nil},
		{"compacted history", "GET", "/sessions/{id}/history?type=compacted", nil},
		{"turn", "POST", "/sessions/{id}/turns", user("hi")},
		{"streamed turn", "POST", "/sessions/{id}/turns", streamUser("delta", "hi")},
		{"list turns", "GET", "/sessions/{id}/turns", nil},
		{"get turn", "GET", "/sessions/{id}/turns/{turn}", nil},
		{"follow turn events", "GET", "/sessions/{id}/turns/{turn}/events", nil},
		{"session event log", "GET", "/sessions/{id}/events", nil},
		{"cancel turn", "POST", "/sessions/{id}/turns/{turn}/cancel", nil},
		{"compact", "POST", "/sessions/{id}/compact", nil},
		{"list compactions", "GET", "/sessions/{id}/compactions", nil},
		{"delete", "DELETE", "/sessions/{id}", nil},
	}
	path := func(in intrusion, sid, turn string) string {
		return strings.NewReplacer("{id}", sid, "{turn}", turn).Replace(in.path)
	}
	for _, in := range intrusions {
		t.Run("user1 gets 404 on user2's session: "+in.name, func(t *testing.T) {
			u1 := tn.user1.as(t)
			want := notFoundShape(t, u1.do(in.method, path(in, unknown, unknownTurn), in.body))
			for _, target := range []struct{ name, sid string }{{"user2's", s2}, {"the API key's", keys}} {
				r := u1.do(in.method, path(in, target.sid, turn2), in.body)
				if got := notFoundShape(t, r); !reflect.DeepEqual(got, want) {
					t.Errorf("%s session: %v, want the 404 of an unknown session %v", target.name, got, want)
				}
				if strings.Contains(string(r.body), "secret of user2") {
					t.Errorf("user2's words in user1's response: %s", r.body)
				}
			}
		})
	}

	// Nothing of user2's changed, and user2 still has it all.
	if h := tn.user2.history(s2, aap.HistoryFull); len(h) != 2 {
		t.Errorf("user2's history = %+v", h)
	}
	tn.user2.do("GET", "/sessions/"+s2+"/turns/"+turn2, nil).expect(t, http.StatusOK)

	// Listings: each user their own; the key all, or one owner's.
	if got := sessionIDs(t, tn.user1, ""); !reflect.DeepEqual(got, []string{s1}) {
		t.Errorf("user1 lists %v, want [%s]", got, s1)
	}
	if got := sessionIDs(t, tn.user1, "?owner=user2"); len(got) != 0 {
		t.Errorf("user1 asking for user2's sessions lists %v, want none", got)
	}
	if got := sessionIDs(t, tn.user1, "?owner=user1"); !reflect.DeepEqual(got, []string{s1}) {
		t.Errorf("user1 asking for their own lists %v", got)
	}
	if got := sessionIDs(t, tn.key, ""); !reflect.DeepEqual(got, []string{keys, s2, s1}) {
		t.Errorf("the key lists %v, want [%s %s %s]", got, keys, s2, s1)
	}
	if got := sessionIDs(t, tn.key, "?owner=user2"); !reflect.DeepEqual(got, []string{s2}) {
		t.Errorf("the key's ?owner=user2 lists %v, want [%s]", got, s2)
	}
	checkProblem(t, tn.key.do("GET", "/sessions?owner=", nil), http.StatusBadRequest, "invalid-request")

	// The owner is in the session's record; a key's session has none.
	var rec map[string]json.RawMessage
	tn.key.do("GET", "/sessions/"+s2, nil).expect(t, http.StatusOK).json(t, &rec)
	if string(rec["owner"]) != `"user2"` {
		t.Errorf("owner of user2's session = %s", rec["owner"])
	}
	rec = nil
	tn.key.do("GET", "/sessions/"+keys, nil).expect(t, http.StatusOK).json(t, &rec)
	if _, ok := rec["owner"]; ok {
		t.Errorf("the key's session has an owner: %s", rec["owner"])
	}

	// The key reaches every session; user2 deletes their own.
	tn.key.say(s2, "from the backend")
	tn.user2.do("DELETE", "/sessions/"+s2, nil).expect(t, http.StatusNoContent)
	tn.key.do("GET", "/sessions/"+s2, nil).expect(t, http.StatusNotFound)
}

func TestIdempotencyKeysNeverHandOneOwnerAnothersSession(t *testing.T) {
	t.Parallel()
	s := startParallelServer(t)
	tn := newOwnedTenant(t, s)
	body := map[string]any{"agent": map[string]any{"name": "echo"}}
	create := func(c *client) (string, bool) {
		var out aap.CreateSessionResponse
		r := c.do("POST", "/sessions", body, "Idempotency-Key", "same-key").expect(t, http.StatusCreated)
		r.json(t, &out)
		return out.SessionID, r.Header.Get(httpapi.ReplayedHeader) == "true"
	}
	first, _ := create(tn.user1)
	other, replayed := create(tn.user2)
	if other == first || replayed {
		t.Fatalf("user2 with user1's key got %s (replayed %v), user1's is %s", other, replayed, first)
	}
	byKey, replayed := create(tn.key)
	if byKey == first || byKey == other || replayed {
		t.Fatalf("the API key with the users' key got %s (replayed %v)", byKey, replayed)
	}
	again, replayed := create(tn.user1)
	if again != first || !replayed {
		t.Errorf("user1's retry got %s (replayed %v), want %s replayed", again, replayed, first)
	}
}
