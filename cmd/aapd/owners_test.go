package main

import (
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/aapclient"
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

func sessionIDs(t *testing.T, c *client, owner string) []string {
	t.Helper()
	list := c.as(t).listSessions(aapclient.ListOptions{Owner: owner})
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
	turn2 := tn.user2.sendTurn(s2, user("secret of user2")).TurnID
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
		{"fork", "POST", "/sessions/{id}/fork", map[string]any{}},
		{"fork at a message", "POST", "/sessions/{id}/fork", map[string]any{"at": map[string]any{"message": 1}}},
		{"export", "GET", "/sessions/{id}/export", nil},
		{"delete", "DELETE", "/sessions/{id}", nil},
	}
	path := func(in intrusion, sid, turn string) string {
		return strings.NewReplacer("{id}", sid, "{turn}", turn).Replace(in.path)
	}
	// Raw requests: user1's 404s are compared whole with an unknown id's.
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
	if info := tn.user2.turnInfo(s2, turn2); info.Status != aapclient.TurnCompleted {
		t.Errorf("user2's turn = %+v", info)
	}

	// Listings: each user their own; the key all, or one owner's.
	if got := sessionIDs(t, tn.user1, ""); !reflect.DeepEqual(got, []string{s1}) {
		t.Errorf("user1 lists %v, want [%s]", got, s1)
	}
	if got := sessionIDs(t, tn.user1, "user2"); len(got) != 0 {
		t.Errorf("user1 asking for user2's sessions lists %v, want none", got)
	}
	if got := sessionIDs(t, tn.user1, "user1"); !reflect.DeepEqual(got, []string{s1}) {
		t.Errorf("user1 asking for their own lists %v", got)
	}
	if got := sessionIDs(t, tn.key, ""); !reflect.DeepEqual(got, []string{keys, s2, s1}) {
		t.Errorf("the key lists %v, want [%s %s %s]", got, keys, s2, s1)
	}
	if got := sessionIDs(t, tn.key, "user2"); !reflect.DeepEqual(got, []string{s2}) {
		t.Errorf("the key's ?owner=user2 lists %v, want [%s]", got, s2)
	}
	// Raw: an empty owner, which aapclient never sends.
	checkProblem(t, tn.key.do("GET", "/sessions?owner=", nil), http.StatusBadRequest, "invalid-request")

	// The owner is in the session's record; a key's session has none (the
	// OpenAPI check refuses an empty one).
	if rec := tn.key.getSession(s2); rec.Owner != "user2" {
		t.Errorf("owner of user2's session = %q", rec.Owner)
	}
	if rec := tn.key.getSession(keys); rec.Owner != "" {
		t.Errorf("the key's session has an owner: %q", rec.Owner)
	}
	for _, rec := range tn.key.listSessions(aapclient.ListOptions{}).Sessions {
		if want := map[string]string{s1: "user1", s2: "user2"}[rec.SessionID]; rec.Owner != want {
			t.Errorf("listed %s with owner %q, want %q", rec.SessionID, rec.Owner, want)
		}
	}

	// The key reaches every session; user2 deletes their own.
	tn.key.say(s2, "from the backend")
	tn.user2.deleteSession(s2)
	_, err := tn.key.api().GetSession(t.Context(), s2)
	refusal(t, err, http.StatusNotFound, "not-found")
}

func TestIdempotencyKeysNeverHandOneOwnerAnothersSession(t *testing.T) {
	t.Parallel()
	s := startParallelServer(t)
	tn := newOwnedTenant(t, s)
	body := map[string]any{"agent": map[string]any{"name": "echo"}}
	// Raw: the Idempotent-Replayed header of a create, which aapclient
	// does not report.
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
