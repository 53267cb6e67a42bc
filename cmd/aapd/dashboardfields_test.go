package main

import (
	"net/http"
	"testing"
	"time"

	v3 "github.com/aapd/aapd/httpapi/v3"
	"github.com/aapd/aapd/store"
)

// Extension (docs/protocols.md): GET /sessions items and turn records carry
// createdAt, updatedAt and status, so a dashboard needs one call, not N.
func TestSessionListAndTurnRecordsCarryCreatedUpdatedAndStatus(t *testing.T) {
	s := startServer(t)
	c := s.newTenant(t)
	before := time.Now().Add(-time.Minute)
	sid := c.echoSession(nil, "lookup")
	record := func(id string) v3.SessionRecord {
		t.Helper()
		var list v3.SessionList
		c.do("GET", "/sessions", nil).expect(t, http.StatusOK).json(t, &list)
		for _, r := range list.Sessions {
			if r.SessionID == id {
				var one v3.SessionRecord
				c.do("GET", "/sessions/"+id, nil).expect(t, http.StatusOK).json(t, &one)
				if one.Status != r.Status || !one.CreatedAt.Equal(r.CreatedAt) {
					t.Errorf("GET /sessions/%s = %+v, but the list says %+v", id, one, r)
				}
				return r
			}
		}
		t.Fatalf("session %s not listed", id)
		return v3.SessionRecord{}
	}
	fresh := record(sid)
	if fresh.Status != store.SessionIdle || fresh.CreatedAt.Before(before) || fresh.UpdatedAt.Before(fresh.CreatedAt) {
		t.Errorf("new session = %+v, want idle with its times", fresh)
	}

	c.say(sid, "/tool lookup {}")
	waiting := record(sid)
	if waiting.Status != store.SessionRequiresAction || !waiting.UpdatedAt.After(fresh.UpdatedAt) {
		t.Errorf("after a tool_use stop = %+v, want requires_action, updated after %v", waiting, fresh.UpdatedAt)
	}

	st := c.startSlowTurn()
	if r := record(st.sid); r.Status != store.SessionRunning {
		t.Errorf("while a turn runs, status = %q, want running", r.Status)
	}
	st.stop()
	if r := record(st.sid); r.Status != store.SessionIdle {
		t.Errorf("after the turn, status = %q, want idle", r.Status)
	}

	var turns v3.TurnList
	c.do("GET", "/sessions/"+sid+"/turns", nil).expect(t, http.StatusOK).json(t, &turns)
	if len(turns.Turns) != 1 {
		t.Fatalf("turns = %+v", turns)
	}
	tr := turns.Turns[0]
	if tr.Status != "completed" || tr.FinishedAt == nil || !tr.UpdatedAt.Equal(*tr.FinishedAt) || tr.UpdatedAt.Before(tr.CreatedAt) {
		t.Errorf("turn record = %+v, want updatedAt at its end", tr)
	}
}
