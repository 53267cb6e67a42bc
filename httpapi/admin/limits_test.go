package admin_test

import (
	"net/http"
	"testing"

	"github.com/aapd/aapd/httpapi/admin"
)

func TestAdminLimits(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	tn := f.tenant("limits")
	path := "/tenants/" + tn.Name + "/limits"

	r := f.admin("PUT", path, map[string]any{"requestsPerSecond": 2.5, "burst": 5, "maxRunningTurns": 3, "maxQueuedTurns": 40}).expect(t, http.StatusOK)
	if got := string(r.body); got != `{"requestsPerSecond":2.5,"burst":5,"maxRunningTurns":3,"maxQueuedTurns":40}`+"\n" {
		t.Errorf("PUT answered %s", got)
	}
	var got admin.Tenant
	f.admin("GET", "/tenants/"+tn.Name, nil).expect(t, http.StatusOK).json(t, &got)
	if got.Limits.RequestsPerSecond == nil || *got.Limits.RequestsPerSecond != 2.5 || *got.Limits.Burst != 5 || *got.Limits.MaxRunningTurns != 3 {
		t.Errorf("tenant %+v", got.Limits)
	}
	st, err := f.st.TenantGet(t.Context(), tn.ID)
	if err != nil || st.Limits.MaxRunningTurns != 3 || st.Limits.MaxQueuedTurns != 40 {
		t.Errorf("stored %+v, %v", st.Limits, err)
	}

	// A PUT replaces: what it leaves out (or sets to null or 0) is the
	// server's default again.
	r = f.admin("PUT", path, map[string]any{"maxRunningTurns": 7, "burst": 0, "requestsPerSecond": nil}).expect(t, http.StatusOK)
	if got := string(r.body); got != `{"requestsPerSecond":null,"burst":null,"maxRunningTurns":7,"maxQueuedTurns":null}`+"\n" {
		t.Errorf("PUT answered %s", got)
	}
	if got := string(f.admin("GET", path, nil).expect(t, http.StatusOK).body); got != `{"requestsPerSecond":null,"burst":null,"maxRunningTurns":7,"maxQueuedTurns":null}`+"\n" {
		t.Errorf("GET limits %s", got)
	}
	f.admin("PUT", path, map[string]any{}).expect(t, http.StatusOK)

	for _, tc := range []struct {
		body       any
		field, say string
	}{
		{map[string]any{"requestsPerSecond": -1, "burst": 1}, "requestsPerSecond", "from 0"},
		{map[string]any{"requestsPerSecond": 5}, "burst", "at least 1"},
		{map[string]any{"requestsPerSecond": 5, "burst": 0}, "burst", "at least 1"},
		{map[string]any{"burst": -2}, "burst", "from 0"},
		{map[string]any{"burst": 2.5}, "burst", "number"},
		{map[string]any{"maxRunningTurns": -1}, "maxRunningTurns", "from 0"},
		{map[string]any{"maxRunningTurns": 1e9}, "maxRunningTurns", "from 0"},
		{map[string]any{"maxQueuedTurns": -1}, "maxQueuedTurns", "from 0"},
		{map[string]any{"maxQueuedTurns": 1e9}, "maxQueuedTurns", "from 0"},
		{map[string]any{"requestsPerSecond": "fast"}, "requestsPerSecond", "number"},
		{map[string]any{"rps": 1}, "rps", "unknown field"},
	} {
		p := f.admin("PUT", path, tc.body).problem(t, http.StatusBadRequest, "invalid-request", tc.say)
		if p["field"] != tc.field {
			t.Errorf("%v: field %v, want %s", tc.body, p["field"], tc.field)
		}
	}
	f.admin("PUT", "/tenants/"+uniqueName("none")+"/limits", map[string]any{}).problem(t, http.StatusNotFound, "not-found", "no tenant")
}
