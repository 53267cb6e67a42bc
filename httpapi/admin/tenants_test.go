package admin_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aapd/aapd/httpapi/admin"
	"github.com/aapd/aapd/store/storetest"
)

func TestAdminTenants(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	name := uniqueName("team-a")
	r := f.admin("POST", "/tenants", map[string]string{"name": name}).expect(t, http.StatusCreated)
	var created map[string]any
	r.json(t, &created)
	if created["name"] != name || len(created["id"].(string)) != 36 {
		t.Fatalf("created %v", created)
	}
	if at, err := time.Parse(time.RFC3339, created["createdAt"].(string)); err != nil || time.Since(at) > time.Minute {
		t.Errorf("createdAt %v: %v", created["createdAt"], err)
	}
	if r.header.Get("Location") != admin.Prefix+"/tenants/"+name {
		t.Errorf("Location %q", r.header.Get("Location"))
	}
	f.admin("POST", "/tenants", map[string]string{"name": name}).problem(t, http.StatusConflict, "already-exists", name)

	for _, bad := range []string{"", "-lead", ".", "has space", "slash/y", "ümlaut", strings.Repeat("a", 64)} {
		f.admin("POST", "/tenants", map[string]string{"name": bad}).problem(t, http.StatusBadRequest, "invalid-request", "name")
	}

	var got admin.Tenant
	f.admin("GET", "/tenants/"+name, nil).expect(t, http.StatusOK).json(t, &got)
	if got.ID != created["id"] || got.Name != name || got.Limits != (admin.Limits{}) {
		t.Errorf("get %+v", got)
	}
	f.admin("GET", "/tenants/"+uniqueName("none"), nil).problem(t, http.StatusNotFound, "not-found", "no tenant named")
}

// Listing pages through every tenant by name: each once, in order, however
// the pages fall.
func TestAdminTenantsPaging(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	prefix := uniqueName("page")
	var mine []string
	for i := range 5 {
		name := prefix + "-" + string(rune('a'+i))
		f.admin("POST", "/tenants", map[string]string{"name": name}).expect(t, http.StatusCreated)
		mine = append(mine, name)
	}
	var seen []string
	cursor, pages := "", 0
	for {
		var page admin.TenantPage
		f.admin("GET", "/tenants?limit=2&cursor="+cursor, nil).expect(t, http.StatusOK).json(t, &page)
		pages++
		if len(page.Tenants) > 2 {
			t.Fatalf("a page of limit 2 has %d tenants", len(page.Tenants))
		}
		for _, tn := range page.Tenants {
			seen = append(seen, tn.Name)
		}
		if page.NextCursor == "" {
			break
		}
		cursor = page.NextCursor
	}
	if pages < 3 || !slices.IsSorted(seen) || len(slices.Compact(slices.Clone(seen))) != len(seen) {
		t.Fatalf("%d pages, names %v: want sorted, each once", pages, seen)
	}
	for _, n := range mine {
		if !slices.Contains(seen, n) {
			t.Errorf("%s not listed", n)
		}
	}
	f.admin("GET", "/tenants?cursor=!!", nil).problem(t, http.StatusBadRequest, "invalid-request", "cursor")
	for _, l := range []string{"0", "101", "x", "-1"} {
		f.admin("GET", "/tenants?limit="+l, nil).problem(t, http.StatusBadRequest, "invalid-request", "limit")
	}
}

// Deleting a tenant removes its sessions and keys: its key stops working
// at once, and nothing of it is left.
func TestAdminTenantDelete(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	tn := f.tenant("doomed")
	key := f.key(tn.Name, map[string]any{"label": "app"})
	var sess struct {
		SessionID string `json:"sessionId"`
	}
	f.aap("POST", "/sessions", key.Secret, map[string]any{"agent": map[string]any{"name": "echo"}}).expect(t, http.StatusCreated).json(t, &sess)
	f.aap("POST", "/sessions/"+sess.SessionID+"/turns", key.Secret,
		map[string]any{"messages": []any{map[string]any{"role": "user", "content": "hello"}}}).expect(t, http.StatusOK)
	f.aap("GET", "/sessions", key.Secret, nil).expect(t, http.StatusOK) // the key is now cached

	f.admin("DELETE", "/tenants/"+tn.Name, nil).expect(t, http.StatusNoContent)
	f.aap("GET", "/sessions", key.Secret, nil).problem(t, http.StatusUnauthorized, "unauthorized", "unknown API key")
	f.admin("GET", "/tenants/"+tn.Name, nil).problem(t, http.StatusNotFound, "not-found", tn.Name)
	f.admin("DELETE", "/tenants/"+tn.Name, nil).problem(t, http.StatusNotFound, "not-found", tn.Name)
	var sessions, keys int
	storetest.Scan(t, storetest.URL(t), `SELECT (SELECT count(*) FROM sessions WHERE tenant_id = $1), (SELECT count(*) FROM api_keys WHERE tenant_id = $1)`,
		[]any{tn.ID}, &sessions, &keys)
	if sessions != 0 || keys != 0 {
		t.Errorf("after delete: %d sessions, %d keys left", sessions, keys)
	}
	if _, err := f.st.SessionGet(context.Background(), tn.ID, sess.SessionID); err == nil {
		t.Error("the session is still there")
	}
	if !hasAudit(f.logs.audits(t), "tenant.delete", tn.Name, tn.ID) {
		t.Errorf("no audit line for the delete: %v", f.logs.audits(t))
	}
}

// hasAudit reports whether an audit line records action on tenant's target.
func hasAudit(lines []map[string]any, action, tenant, target string) bool {
	for _, l := range lines {
		if l["action"] == action && l["tenant"] == tenant && l["target"] == target && l["actor"] == "admin-api" {
			return true
		}
	}
	return false
}
