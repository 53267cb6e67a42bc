package admin_test

import (
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/aapd/aapd/httpapi/admin"
)

func TestAdminUsage(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	tn := f.tenant("usage")
	k := f.key(tn.Name, map[string]any{})
	var sids []string
	for range 2 {
		var sess struct {
			SessionID string `json:"sessionId"`
		}
		f.aap("POST", "/sessions", k.Secret, map[string]any{"agent": map[string]any{"name": "echo"}}).expect(t, http.StatusCreated).json(t, &sess)
		sids = append(sids, sess.SessionID)
	}
	for _, sid := range []string{sids[0], sids[0], sids[1]} {
		f.aap("POST", "/sessions/"+sid+"/turns", k.Secret,
			map[string]any{"messages": []any{map[string]any{"role": "user", "content": "hello there"}}}).expect(t, http.StatusOK)
	}
	// A deleted session's turns still count.
	f.aap("DELETE", "/sessions/"+sids[1], k.Secret, nil).expect(t, http.StatusNoContent)

	path := "/tenants/" + tn.Name + "/usage"
	var u admin.Usage
	f.admin("GET", path, nil).expect(t, http.StatusOK).json(t, &u)
	today := time.Now().UTC().Format(time.DateOnly)
	if u.Tenant != tn.Name || u.Totals.Turns != 3 || len(u.Agents) != 1 || u.Agents[0].Agent != "echo" || u.Agents[0].UsageCounts != u.Totals {
		t.Fatalf("usage %+v", u)
	}
	var days admin.UsageCounts
	for _, d := range u.Days {
		if d.Date != today || d.Agent != "echo" {
			t.Errorf("day %+v, want today's (%s) echo", d, today)
		}
		days.Turns += d.Turns
		days.InputTokens += d.InputTokens
		days.OutputTokens += d.OutputTokens
	}
	if days != u.Totals {
		t.Errorf("days add up to %+v, totals %+v", days, u.Totals)
	}
	if span := u.To.Sub(u.From); span != admin.DefaultUsageDays*24*time.Hour || u.To.Before(time.Now()) {
		t.Errorf("default period %s to %s", u.From, u.To)
	}

	// A date as "to" includes its day.
	var one admin.Usage
	f.admin("GET", path+"?from="+today+"&to="+today, nil).expect(t, http.StatusOK).json(t, &one)
	if one.Totals != u.Totals || one.To.Sub(one.From) != 24*time.Hour {
		t.Errorf("today: %+v", one)
	}
	var none admin.Usage
	tomorrow := time.Now().UTC().AddDate(0, 0, 1).Format(time.DateOnly)
	f.admin("GET", path+"?from="+tomorrow+"&to="+tomorrow, nil).expect(t, http.StatusOK).json(t, &none)
	if none.Totals.Turns != 0 || len(none.Days) != 0 || none.Agents == nil || none.Days == nil {
		t.Errorf("tomorrow: %+v", none)
	}
	// Turns count in whole UTC days (the rollup keeps them per day): a
	// time within a day stands for the day.
	var live admin.Usage
	hourAhead := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	f.admin("GET", path+"?from="+url.QueryEscape(hourAhead)+"&to="+tomorrow, nil).expect(t, http.StatusOK).json(t, &live)
	if live.Totals.Turns != 3 && hourAhead[:10] == today {
		t.Errorf("from an hour ahead: %d turns, want today's 3 (counted by day)", live.Totals.Turns)
	}

	for _, tc := range []struct{ query, field, say string }{
		{"from=yesterday", "from", "RFC 3339"},
		{"to=2025-13-01", "to", "date"},
		{"from=2025-02-01&to=2025-01-31", "from", "start before it ends"},
		{"from=" + url.QueryEscape("2025-01-31T12:00:00Z") + "&to=" + url.QueryEscape("2025-01-31T12:00:00Z"), "from", "start before it ends"},
		{"from=2023-01-01&to=2025-01-01", "to", "366 days"},
	} {
		p := f.admin("GET", path+"?"+tc.query, nil).problem(t, http.StatusBadRequest, "invalid-request", tc.say)
		if p["field"] != tc.field {
			t.Errorf("%s: field %v, want %s", tc.query, p["field"], tc.field)
		}
	}
	f.admin("GET", "/tenants/"+uniqueName("none")+"/usage", nil).problem(t, http.StatusNotFound, "not-found", "no tenant")
}
