package admin_test

import (
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aapd/aapd/auth"
	"github.com/aapd/aapd/httpapi/admin"
)

var keyPattern = regexp.MustCompile(`^aapd_[a-z2-7]{16}_[A-Za-z0-9_-]{43}$`)

func TestAdminKeyCreate(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	tn := f.tenant("keys")
	expires := time.Now().Add(24 * time.Hour).UTC().Truncate(time.Second)
	r := f.admin("POST", "/tenants/"+tn.Name+"/keys", map[string]any{
		"scopes": []string{"sessions:read"}, "expiresAt": expires.Format(time.RFC3339), "label": "ci runner",
	}).expect(t, http.StatusCreated)
	var k map[string]any
	r.json(t, &k)
	if !keyPattern.MatchString(k["key"].(string)) || !strings.Contains(k["key"].(string), k["id"].(string)) {
		t.Fatalf("created %v", k)
	}
	if !slices.Equal(toStrings(k["scopes"]), []string{"sessions:read"}) || k["expiresAt"] != expires.Format(time.RFC3339) ||
		k["label"] != "ci runner" || k["state"] != "active" {
		t.Errorf("created %v", k)
	}

	// Without scopes, a key gets both; duplicates fold; order is canonical.
	all := f.key(tn.Name, map[string]any{})
	if !slices.Equal(all.Scopes, admin.Scopes) || all.ExpiresAt != nil {
		t.Errorf("default key %+v", all.Key)
	}
	both := f.key(tn.Name, map[string]any{"scopes": []string{"sessions:write", "sessions:read", "sessions:write"}})
	if !slices.Equal(both.Scopes, admin.Scopes) {
		t.Errorf("scopes %v", both.Scopes)
	}

	path := "/tenants/" + tn.Name + "/keys"
	for _, tc := range []struct {
		body       any
		field, say string
	}{
		{map[string]any{"scopes": []string{}}, "scopes", "at least one scope"},
		{map[string]any{"scopes": []string{"sessions:read", "admin"}}, "scopes[1]", `unknown scope "admin"`},
		{map[string]any{"expiresAt": time.Now().Add(-time.Minute).Format(time.RFC3339)}, "expiresAt", "not in the future"},
		{map[string]any{"expiresAt": "tomorrow"}, "expiresAt", "RFC 3339"},
		{map[string]any{"expiresAt": 12}, "expiresAt", "string"},
		{map[string]any{"label": strings.Repeat("x", 101)}, "label", "at most 100"},
		{map[string]any{"label": "a\nb"}, "label", "control"},
		{map[string]any{"scope": []string{"sessions:read"}}, "scope", "unknown field"},
	} {
		p := f.admin("POST", path, tc.body).problem(t, http.StatusBadRequest, "invalid-request", tc.say)
		if p["field"] != tc.field {
			t.Errorf("%v: field %v, want %s", tc.body, p["field"], tc.field)
		}
	}
	f.admin("POST", "/tenants/"+uniqueName("none")+"/keys", map[string]any{}).problem(t, http.StatusNotFound, "not-found", "no tenant")
}

// A key made through the admin API is a real key of the AAP API; revoked,
// it stops working at once, even though it was cached.
func TestAdminKeyAuthenticatesUntilRevoked(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	tn := f.tenant("revoke")
	k := f.key(tn.Name, map[string]any{"label": "app"})
	for range 3 {
		f.aap("GET", "/sessions", k.Secret, nil).expect(t, http.StatusOK)
	}
	f.admin("DELETE", "/tenants/"+tn.Name+"/keys/"+k.ID, nil).expect(t, http.StatusNoContent)
	f.aap("GET", "/sessions", k.Secret, nil).problem(t, http.StatusUnauthorized, "unauthorized", "revoked")
	// Revoking again changes nothing.
	f.admin("DELETE", "/tenants/"+tn.Name+"/keys/"+k.ID, nil).expect(t, http.StatusNoContent)

	var page admin.KeyPage
	f.admin("GET", "/tenants/"+tn.Name+"/keys", nil).expect(t, http.StatusOK).json(t, &page)
	if len(page.Keys) != 1 || page.Keys[0].State != "revoked" || page.Keys[0].RevokedAt == nil {
		t.Errorf("after revoke: %+v", page.Keys)
	}

	// Another tenant's key is not found through this tenant, and stays.
	other := f.tenant("other")
	ok := f.key(other.Name, map[string]any{})
	f.admin("DELETE", "/tenants/"+tn.Name+"/keys/"+ok.ID, nil).problem(t, http.StatusNotFound, "not-found", ok.ID)
	f.admin("DELETE", "/tenants/"+tn.Name+"/keys/nosuchkey", nil).problem(t, http.StatusNotFound, "not-found", "nosuchkey")
	f.aap("GET", "/sessions", ok.Secret, nil).expect(t, http.StatusOK)
}

// A key past its expiresAt is refused, though it was used (and cached)
// just before.
func TestAdminExpiredKeyIsRefused(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	tn := f.tenant("expiry")
	expires := time.Now().Add(1500 * time.Millisecond)
	k := f.key(tn.Name, map[string]any{"expiresAt": expires.Format(time.RFC3339Nano)})
	f.aap("GET", "/sessions", k.Secret, nil).expect(t, http.StatusOK)
	time.Sleep(time.Until(expires) + 50*time.Millisecond)
	f.aap("GET", "/sessions", k.Secret, nil).problem(t, http.StatusUnauthorized, "unauthorized", "expired")
	var page admin.KeyPage
	f.admin("GET", "/tenants/"+tn.Name+"/keys", nil).expect(t, http.StatusOK).json(t, &page)
	if len(page.Keys) != 1 || page.Keys[0].State != "expired" {
		t.Errorf("listed %+v, want one expired key", page.Keys)
	}
}

// Listing shows what an operator needs, never a secret or a hash, and
// pages through every key, newest first.
func TestAdminKeyList(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	tn := f.tenant("list")
	var made []admin.CreatedKey
	for i := range 5 {
		made = append(made, f.key(tn.Name, map[string]any{"label": "k" + string(rune('0'+i))}))
	}
	var listed []admin.Key
	cursor, pages := "", 0
	for {
		r := f.admin("GET", "/tenants/"+tn.Name+"/keys?limit=2&cursor="+cursor, nil).expect(t, http.StatusOK)
		for _, k := range made {
			rec, err := f.st.APIKeyGetByPublicID(t.Context(), k.ID)
			if err != nil {
				t.Fatal(err)
			}
			body := string(r.body)
			for _, secret := range []string{k.Secret, strings.TrimPrefix(k.Secret, "aapd_"+k.ID+"_"), hex.EncodeToString(rec.Hash), base64.StdEncoding.EncodeToString(rec.Hash)} {
				if strings.Contains(body, secret) {
					t.Fatalf("the key list shows a secret or a hash: %s", body)
				}
			}
		}
		var page admin.KeyPage
		r.json(t, &page)
		var raw struct {
			Keys []map[string]any `json:"keys"`
		}
		r.json(t, &raw)
		for _, k := range raw.Keys {
			for _, field := range []string{"id", "label", "scopes", "createdAt", "lastUsedAt", "revokedAt", "expiresAt", "state"} {
				if _, ok := k[field]; !ok {
					t.Errorf("a listed key has no %q: %v", field, k)
				}
			}
			if _, ok := k["key"]; ok {
				t.Errorf("a listed key has its key: %v", k)
			}
		}
		listed = append(listed, page.Keys...)
		pages++
		if page.NextCursor == "" {
			break
		}
		cursor = page.NextCursor
	}
	if pages != 3 || len(listed) != 5 {
		t.Fatalf("%d pages, %d keys", pages, len(listed))
	}
	for i, k := range listed {
		if want := made[len(made)-1-i]; k.ID != want.ID || k.Label != want.Label {
			t.Errorf("key %d: %s %q, want %s %q (newest first)", i, k.ID, k.Label, want.ID, want.Label)
		}
	}
	f.admin("GET", "/tenants/"+tn.Name+"/keys?cursor=bm9wZQ", nil).problem(t, http.StatusBadRequest, "invalid-request", "cursor")
	f.admin("GET", "/tenants/"+uniqueName("none")+"/keys", nil).problem(t, http.StatusNotFound, "not-found", "no tenant")
}

// Audit lines record each change with its tenant and target, and never a
// secret: not the key, not the operator token.
func TestAdminAuditLines(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	tn := f.tenant("audit")
	k := f.key(tn.Name, map[string]any{"label": "audited", "scopes": []string{"sessions:write"}})
	f.admin("DELETE", "/tenants/"+tn.Name+"/keys/"+k.ID, nil).expect(t, http.StatusNoContent)
	f.admin("PUT", "/tenants/"+tn.Name+"/limits", map[string]any{"maxRunningTurns": 2}).expect(t, http.StatusOK)
	f.admin("DELETE", "/tenants/"+tn.Name, nil).expect(t, http.StatusNoContent)

	lines := f.logs.audits(t)
	for _, want := range []struct{ action, target string }{
		{"tenant.create", tn.ID}, {"key.create", k.ID}, {"key.revoke", k.ID}, {"limits.set", tn.ID}, {"tenant.delete", tn.ID},
	} {
		if !hasAudit(lines, want.action, tn.Name, want.target) {
			t.Errorf("no audit line %s of %s: %v", want.action, want.target, lines)
		}
	}
	for _, l := range lines {
		if l["action"] == "key.create" && l["target"] == k.ID && (l["label"] != "audited" || !slices.Equal(toStrings(l["scopes"]), []string{"sessions:write"})) {
			t.Errorf("key.create line %v", l)
		}
	}
	all := f.logs.String()
	rec := auth.HashKey(k.Secret)
	for _, secret := range []string{k.Secret, strings.TrimPrefix(k.Secret, "aapd_"+k.ID+"_"), f.token, hex.EncodeToString(rec), base64.StdEncoding.EncodeToString(rec)} {
		if strings.Contains(all, secret) {
			t.Fatalf("the logs hold a secret:\n%s", all)
		}
	}
}

func toStrings(v any) []string {
	list, _ := v.([]any)
	out := make([]string, len(list))
	for i, s := range list {
		out[i], _ = s.(string)
	}
	return out
}
