package admin_test

import (
	"net/http"
	"testing"

	"github.com/aapd/aapd/httpapi/admin"
	"github.com/aapd/aapd/store"
)

// A tenant's retention policy is set and read back, a null field is the
// server's default (and says so), and a bad value is a 400 naming its
// field.
func TestAdminRetention(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(c *admin.Config) { c.Retention = store.TenantRetention{FullHistoryDays: 365} })
	tn := f.tenant("retention")
	path := "/tenants/" + tn.Name + "/retention"

	const unset = `{"idleSessionDays":null,"fullHistoryDays":null,"effective":{"idleSessionDays":null,"idleSessionDaysFrom":"none","fullHistoryDays":365,"fullHistoryDaysFrom":"default"}}` + "\n"
	if got := string(f.admin("GET", path, nil).expect(t, http.StatusOK).body); got != unset {
		t.Errorf("GET a new tenant's retention: %s, want %s", got, unset)
	}
	const set = `{"idleSessionDays":90,"fullHistoryDays":30,"effective":{"idleSessionDays":90,"idleSessionDaysFrom":"tenant","fullHistoryDays":30,"fullHistoryDaysFrom":"tenant"}}` + "\n"
	if got := string(f.admin("PUT", path, map[string]any{"idleSessionDays": 90, "fullHistoryDays": 30}).expect(t, http.StatusOK).body); got != set {
		t.Errorf("PUT answered %s, want %s", got, set)
	}
	if got := string(f.admin("GET", path, nil).expect(t, http.StatusOK).body); got != set {
		t.Errorf("GET after PUT: %s, want %s", got, set)
	}
	st, err := f.st.TenantGet(t.Context(), tn.ID)
	if err != nil || st.Retention != (store.TenantRetention{IdleSessionDays: 90, FullHistoryDays: 30}) {
		t.Errorf("stored %+v, %v", st.Retention, err)
	}

	// A PUT replaces: a field left out or null is the default again; what
	// a GET returned can be sent back.
	const idleOnly = `{"idleSessionDays":7,"fullHistoryDays":null,"effective":{"idleSessionDays":7,"idleSessionDaysFrom":"tenant","fullHistoryDays":365,"fullHistoryDaysFrom":"default"}}` + "\n"
	if got := string(f.admin("PUT", path, map[string]any{"idleSessionDays": 7, "fullHistoryDays": nil,
		"effective": map[string]any{"idleSessionDays": 1}}).expect(t, http.StatusOK).body); got != idleOnly {
		t.Errorf("PUT answered %s, want %s", got, idleOnly)
	}
	if got := string(f.admin("PUT", path, map[string]any{}).expect(t, http.StatusOK).body); got != unset {
		t.Errorf("PUT {} answered %s, want %s", got, unset)
	}

	for _, tc := range []struct {
		body       any
		field, say string
	}{
		{map[string]any{"idleSessionDays": 0}, "idleSessionDays", "whole number of days from 1"},
		{map[string]any{"idleSessionDays": -5}, "idleSessionDays", "whole number of days from 1"},
		{map[string]any{"fullHistoryDays": 1.5}, "fullHistoryDays", "whole number of days from 1"},
		{map[string]any{"fullHistoryDays": 1e6}, "fullHistoryDays", "whole number of days from 1"},
		{map[string]any{"fullHistoryDays": "30"}, "fullHistoryDays", "number"},
		{map[string]any{"idleDays": 3}, "idleDays", "unknown field"},
	} {
		p := f.admin("PUT", path, tc.body).problem(t, http.StatusBadRequest, "invalid-request", tc.say)
		if p["field"] != tc.field {
			t.Errorf("%v: field %v, want %s", tc.body, p["field"], tc.field)
		}
	}
	if got := string(f.admin("GET", path, nil).expect(t, http.StatusOK).body); got != unset {
		t.Errorf("a refused PUT changed the policy: %s", got)
	}
	f.admin("PUT", "/tenants/"+uniqueName("none")+"/retention", map[string]any{}).problem(t, http.StatusNotFound, "not-found", "no tenant")
	f.admin("GET", "/tenants/"+uniqueName("none")+"/retention", nil).problem(t, http.StatusNotFound, "not-found", "no tenant")
}
