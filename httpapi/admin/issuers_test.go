package admin_test

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"net/http"
	"testing"

	"github.com/aapd/aapd/httpapi/admin"
)

// publicPEM is a public key as PEM.
func publicPEM(t *testing.T, key any) string {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
}

func TestAdminIssuers(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	tn := f.tenant("issuers")
	path := "/tenants/" + tn.Name + "/issuers"
	iss := "https://" + uniqueName("id") + ".example"

	var byURL admin.Issuer
	f.admin("POST", path, map[string]any{"issuer": iss, "audience": "app", "jwksUrl": iss + "/.well-known/jwks.json"}).
		expect(t, http.StatusCreated).json(t, &byURL)
	if byURL.ID == "" || byURL.Issuer != iss || byURL.Audience != "app" || byURL.JWKSURL != iss+"/.well-known/jwks.json" || len(byURL.PublicKeys) != 0 {
		t.Errorf("created %+v", byURL)
	}
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ed, _, _ := ed25519.GenerateKey(rand.Reader)
	var byKeys admin.Issuer
	f.admin("POST", path, map[string]any{"issuer": iss, "audience": "mobile", "publicKeys": []string{publicPEM(t, &ec.PublicKey), publicPEM(t, ed)}}).
		expect(t, http.StatusCreated).json(t, &byKeys)
	if len(byKeys.PublicKeys) != 2 || byKeys.JWKSURL != "" {
		t.Errorf("created %+v", byKeys)
	}
	// Plain http only on loopback, for development.
	f.admin("POST", path, map[string]any{"issuer": iss, "audience": "dev", "jwksUrl": "http://127.0.0.1:9999/jwks"}).expect(t, http.StatusCreated)

	// The pair belongs to one tenant, this one or another.
	other := f.tenant("other")
	f.admin("POST", "/tenants/"+other.Name+"/issuers", map[string]any{"issuer": iss, "audience": "app", "jwksUrl": "https://elsewhere.example/jwks"}).
		problem(t, http.StatusConflict, "already-exists", "already registered")
	f.admin("POST", path, map[string]any{"issuer": iss, "audience": "app", "publicKeys": []string{publicPEM(t, ed)}}).
		problem(t, http.StatusConflict, "already-exists", "already registered")

	small, _ := rsa.GenerateKey(rand.Reader, 1024)
	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	for _, tc := range []struct {
		body       map[string]any
		field, say string
	}{
		{map[string]any{"audience": "a", "jwksUrl": "https://x.example/jwks"}, "issuer", "required"},
		{map[string]any{"issuer": iss, "jwksUrl": "https://x.example/jwks"}, "audience", "required"},
		{map[string]any{"issuer": iss, "audience": "a"}, "jwksUrl", "give jwksUrl"},
		{map[string]any{"issuer": iss, "audience": "a", "publicKeys": []string{}}, "jwksUrl", "give jwksUrl"},
		{map[string]any{"issuer": iss, "audience": "a", "jwksUrl": "https://x.example/jwks", "publicKeys": []string{publicPEM(t, ed)}}, "jwksUrl", "not both"},
		{map[string]any{"issuer": iss, "audience": "a", "jwksUrl": "http://x.example/jwks"}, "jwksUrl", "https"},
		{map[string]any{"issuer": iss, "audience": "a", "jwksUrl": "ftp://x.example/jwks"}, "jwksUrl", "https"},
		{map[string]any{"issuer": iss, "audience": "a", "jwksUrl": "/jwks"}, "jwksUrl", "absolute"},
		{map[string]any{"issuer": iss, "audience": "a", "publicKeys": []string{"-----BEGIN PUBLIC KEY-----\nnope\n-----END PUBLIC KEY-----"}}, "publicKeys[0]", "parse public key"},
		{map[string]any{"issuer": iss, "audience": "a", "publicKeys": []string{publicPEM(t, ed), "not a key"}}, "publicKeys[1]", "not a PEM block"},
		{map[string]any{"issuer": iss, "audience": "a", "publicKeys": []string{publicPEM(t, &small.PublicKey)}}, "publicKeys[0]", "2048"},
		{map[string]any{"issuer": iss, "audience": "a", "publicKeys": []string{publicPEM(t, &p384.PublicKey)}}, "publicKeys[0]", "P-256"},
		{map[string]any{"issuer": iss, "audience": "a", "jwksUrl": "https://x.example/jwks", "algorithm": "none"}, "algorithm", "unknown field"},
	} {
		p := f.admin("POST", path, tc.body).problem(t, http.StatusBadRequest, "invalid-request", tc.say)
		if p["field"] != tc.field {
			t.Errorf("%v: field %v, want %s", tc.body, p["field"], tc.field)
		}
	}

	// Listed oldest first, page by page.
	var all []admin.Issuer
	cursor := ""
	for {
		var page admin.IssuerPage
		f.admin("GET", path+"?limit=2&cursor="+cursor, nil).expect(t, http.StatusOK).json(t, &page)
		all = append(all, page.Issuers...)
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	if len(all) != 3 || all[0].ID != byURL.ID || all[1].ID != byKeys.ID {
		t.Fatalf("listed %+v", all)
	}

	f.admin("DELETE", "/tenants/"+other.Name+"/issuers/"+byURL.ID, nil).problem(t, http.StatusNotFound, "not-found", byURL.ID)
	f.admin("DELETE", path+"/"+byURL.ID, nil).expect(t, http.StatusNoContent)
	f.admin("DELETE", path+"/"+byURL.ID, nil).problem(t, http.StatusNotFound, "not-found", byURL.ID)
	// The pair is free again, for any tenant.
	f.admin("POST", "/tenants/"+other.Name+"/issuers", map[string]any{"issuer": iss, "audience": "app", "jwksUrl": "https://elsewhere.example/jwks"}).
		expect(t, http.StatusCreated)
	if !hasAudit(f.logs.audits(t), "issuer.add", tn.Name, byKeys.ID) || !hasAudit(f.logs.audits(t), "issuer.remove", tn.Name, byURL.ID) {
		t.Errorf("audit lines %v", f.logs.audits(t))
	}
	f.admin("GET", path+"?cursor=eA", nil).problem(t, http.StatusBadRequest, "invalid-request", "cursor")
}
