package main

import (
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/aapd/aapd/auth/authtest"
)

// expectInvalidToken checks a refused token: 401 problem+json with a
// Bearer invalid_token challenge, never a 500. The tests of this file make
// raw requests: credentials and their challenges are the wire itself.
func expectInvalidToken(t *testing.T, r response, why string) {
	t.Helper()
	if r.StatusCode != http.StatusUnauthorized {
		t.Errorf("%s: %s %s: status %d, want 401; body %s", why, r.Request.Method, r.Request.URL.Path, r.StatusCode, r.body)
		return
	}
	checkProblem(t, r, http.StatusUnauthorized, "unauthorized")
	if ch := r.Header.Get("WWW-Authenticate"); !strings.HasPrefix(ch, "Bearer ") || !strings.Contains(ch, `error="invalid_token"`) {
		t.Errorf("%s: WWW-Authenticate = %q", why, ch)
	}
}

func TestHostileTokensAreRefusedWith401(t *testing.T) {
	t.Parallel()
	s := startParallelServer(t)
	_, tenantA := s.newTenantWithKey(t)
	_, tenantB := s.newTenantWithKey(t)
	rs := authtest.NewRS256(t, "a1")
	jwks := authtest.NewJWKS(t, rs)
	s.registerIssuer(t, tenantA, "https://id.a.example", "aapd", jwks.URL)
	bKey := authtest.NewES256(t, "b1")
	s.registerIssuer(t, tenantB, "https://id.b.example", "aapd", "", bKey.PublicPEM(t))
	// Tenant B also registered A's issuer for another audience.
	s.registerIssuer(t, tenantB, "https://id.a.example", "aapd-b", jwks.URL)

	claims := func(edit ...func(jwt.MapClaims)) jwt.MapClaims {
		c := authtest.Claims("https://id.a.example", "aapd", "user1")
		for _, e := range edit {
			e(c)
		}
		return c
	}
	user1 := s.bearer(t, rs.Sign(t, claims()))
	sid := user1.echoSession(nil)

	none, _ := jwt.NewWithClaims(jwt.SigningMethodNone, claims()).SignedString(jwt.UnsafeAllowNoneSignatureType)
	hs := jwt.NewWithClaims(jwt.SigningMethodHS256, claims())
	hs.Header["kid"] = "a1"
	hmacWithPEM, _ := hs.SignedString([]byte(rs.PublicPEM(t)))
	hmacWithDER, _ := hs.SignedString(x509.MarshalPKCS1PublicKey(&rs.Key.(*rsa.PrivateKey).PublicKey))
	parts := strings.Split(rs.Sign(t, claims()), ".")
	payload, _ := base64.RawURLEncoding.DecodeString(parts[1])
	parts[1] = base64.RawURLEncoding.EncodeToString([]byte(strings.Replace(string(payload), "user1", "user2", 1)))
	tampered := strings.Join(parts, ".")

	hostile := []struct{ name, token string }{
		{"alg none", none},
		{"HS256 with the RSA public key (PEM) as the secret", hmacWithPEM},
		{"HS256 with the RSA public key (DER) as the secret", hmacWithDER},
		{"expired", rs.Sign(t, claims(func(c jwt.MapClaims) { c["exp"] = time.Now().Add(-2 * time.Minute).Unix() }))},
		{"no exp", rs.Sign(t, claims(func(c jwt.MapClaims) { delete(c, "exp") }))},
		{"not yet valid", rs.Sign(t, claims(func(c jwt.MapClaims) { c["nbf"] = time.Now().Add(5 * time.Minute).Unix() }))},
		{"wrong aud", rs.Sign(t, claims(func(c jwt.MapClaims) { c["aud"] = "not-aapd" }))},
		{"wrong iss", rs.Sign(t, claims(func(c jwt.MapClaims) { c["iss"] = "https://evil.example" }))},
		{"no sub", rs.Sign(t, claims(func(c jwt.MapClaims) { delete(c, "sub") }))},
		{"unknown kid", authtest.NewRS256(t, "a9").Sign(t, claims())},
		{"known kid, another key", authtest.NewRS256(t, "a1").Sign(t, claims())},
		{"tampered payload", tampered},
		{"A's iss and aud signed with B's issuer's key", bKey.Sign(t, claims())},
		{"audiences of two tenants", rs.Sign(t, claims(func(c jwt.MapClaims) { c["aud"] = []string{"aapd", "aapd-b"} }))},
		{"not a JWT", "eyJhbGciOiJSUzI1NiJ9.garbage"},
	}
	for _, h := range hostile {
		c := s.bearer(t, h.token)
		expectInvalidToken(t, c.do("GET", "/sessions/"+sid, nil), h.name)
		expectInvalidToken(t, c.do("GET", "/sessions", nil), h.name)
		expectInvalidToken(t, c.do("POST", "/sessions/"+sid+"/turns", user("hi")), h.name)
	}

	// A genuine user of tenant B is a stranger to A's sessions: 404, as
	// for any other tenant.
	userB := s.bearer(t, bKey.Sign(t, authtest.Claims("https://id.b.example", "aapd", "user1")))
	checkProblem(t, userB.do("GET", "/sessions/"+sid, nil), http.StatusNotFound, "not-found")
	// The legitimate user still gets in.
	user1.do("GET", "/sessions/"+sid, nil).expect(t, http.StatusOK)
}

func TestStaticPEMIssuersAcceptES256AndEdDSA(t *testing.T) {
	t.Parallel()
	s := startParallelServer(t)
	_, tenant := s.newTenantWithKey(t)
	es, ed := authtest.NewES256(t, ""), authtest.NewEdDSA(t, "")
	s.registerIssuer(t, tenant, "https://static.example", "aapd", "", es.PublicPEM(t), ed.PublicPEM(t))
	for _, signer := range []*authtest.Signer{es, ed} {
		c := s.bearer(t, signer.Sign(t, authtest.Claims("https://static.example", "aapd", "u-"+signer.Method.Alg())))
		sid := c.echoSession(nil)
		if got := c.say(sid, "hello").Messages[0].Content.PlainText(); got != "Echo: hello" {
			t.Errorf("%s: answer %q", signer.Method.Alg(), got)
		}
	}
	// An RS256 token where only ES256 and EdDSA keys are registered.
	rs := authtest.NewRS256(t, "")
	expectInvalidToken(t, s.bearer(t, rs.Sign(t, authtest.Claims("https://static.example", "aapd", "u"))).do("GET", "/sessions", nil), "RS256")
}

func TestJWKSKeyRotationIsAcceptedAfterARefreshOfBoundedRate(t *testing.T) {
	t.Parallel()
	s := startParallelServer(t)
	_, tenant := s.newTenantWithKey(t)
	k1, k2, k3 := authtest.NewRS256(t, "k1"), authtest.NewRS256(t, "k2"), authtest.NewRS256(t, "k3")
	jwks := authtest.NewJWKS(t, k1)
	s.registerIssuer(t, tenant, "https://rotating.example", "aapd", jwks.URL)
	claims := authtest.Claims("https://rotating.example", "aapd", "user1")

	s.bearer(t, k1.Sign(t, claims)).do("GET", "/sessions", nil).expect(t, http.StatusOK)
	// The issuer rotates: k2 is published, and a token signed with it
	// makes aapd fetch the key set again.
	jwks.Set(k1, k2)
	s.bearer(t, k2.Sign(t, claims)).do("GET", "/sessions", nil).expect(t, http.StatusOK)
	fetched := jwks.Fetches()
	if fetched != 2 {
		t.Errorf("key set fetched %d times, want 2 (once at first use, once for k2)", fetched)
	}
	// Unknown kids now cost no fetch until --jwks-min-refresh has passed.
	jwks.Set(k2, k3)
	for range 5 {
		expectInvalidToken(t, s.bearer(t, authtest.NewRS256(t, "forged").Sign(t, claims)).do("GET", "/sessions", nil), "unknown kid")
	}
	expectInvalidToken(t, s.bearer(t, k3.Sign(t, claims)).do("GET", "/sessions", nil), "kid published after the allowed refresh")
	if n := jwks.Fetches(); n != fetched {
		t.Errorf("unknown kids caused %d more fetches, want none", n-fetched)
	}
}

func TestARemovedIssuerIsForgottenAtOnce(t *testing.T) {
	t.Parallel()
	s := startParallelServer(t)
	_, tenant := s.newTenantWithKey(t)
	es := authtest.NewES256(t, "")
	iss := s.registerIssuer(t, tenant, "https://removed.example", "aapd", "", es.PublicPEM(t))
	c := s.bearer(t, es.Sign(t, authtest.Claims("https://removed.example", "aapd", "user1")))
	c.do("GET", "/sessions", nil).expect(t, http.StatusOK)
	if err := s.Store.TokenIssuerDelete(t.Context(), tenant, iss.ID); err != nil {
		t.Fatal(err)
	}
	// Well within the issuer cache's TTL (a minute): the notification
	// made the server forget it.
	waitFor(t, "the removed issuer's token to be refused", 5*time.Second, func() bool {
		return c.do("GET", "/sessions", nil).StatusCode == http.StatusUnauthorized
	})
}
