package auth_test

import (
	"context"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/aapd/aapd/auth"
	"github.com/aapd/aapd/auth/authtest"
)

// finder serves a fixed list of issuers, as the store would.
func finder(issuers ...auth.Issuer) auth.IssuerFinder {
	return func(_ context.Context, iss string, audiences []string) ([]auth.Issuer, error) {
		var out []auth.Issuer
		for _, i := range issuers {
			if i.Issuer == iss && slices.Contains(audiences, i.Audience) {
				out = append(out, i)
			}
		}
		return out, nil
	}
}

func newVerifier(t *testing.T, issuers ...auth.Issuer) *auth.Verifier {
	t.Helper()
	v := auth.NewVerifier(auth.VerifierConfig{Find: finder(issuers...), JWKSTimeout: 2 * time.Second})
	t.Cleanup(v.Close)
	return v
}

func refused(t *testing.T, v *auth.Verifier, token, why string) {
	t.Helper()
	p, err := v.Verify(context.Background(), token)
	var te *auth.TokenError
	if !errors.As(err, &te) {
		t.Errorf("%s: Verify = %+v, %v; want a *TokenError", why, p, err)
	}
}

func TestVerifierRefusesHostileTokens(t *testing.T) {
	t.Parallel()
	rs := authtest.NewRS256(t, "k1")
	jwks := authtest.NewJWKS(t, rs)
	other := authtest.NewRS256(t, "k1") // same kid, another key
	v := newVerifier(t,
		auth.Issuer{ID: "i1", TenantID: "A", Issuer: "https://id.a", Audience: "aapd-a", JWKSURL: jwks.URL},
		auth.Issuer{ID: "i2", TenantID: "B", Issuer: "https://id.a", Audience: "aapd-b", JWKSURL: jwks.URL},
	)
	good := authtest.Claims("https://id.a", "aapd-a", "user1")
	if p, err := v.Verify(context.Background(), rs.Sign(t, good)); err != nil || p.TenantID != "A" || p.Subject != "user1" || p.IssuerID != "i1" {
		t.Fatalf("a good token: %+v, %v", p, err)
	}
	with := func(edit func(jwt.MapClaims)) jwt.MapClaims {
		c := authtest.Claims("https://id.a", "aapd-a", "user1")
		edit(c)
		return c
	}
	// alg none.
	none, _ := jwt.NewWithClaims(jwt.SigningMethodNone, good).SignedString(jwt.UnsafeAllowNoneSignatureType)
	refused(t, v, none, "alg none")
	// HS256 with the RSA public key as the secret.
	der := x509.MarshalPKCS1PublicKey(&rs.Key.(*rsa.PrivateKey).PublicKey)
	for _, secret := range [][]byte{der, []byte(rs.PublicPEM(t))} {
		hs := jwt.NewWithClaims(jwt.SigningMethodHS256, good)
		hs.Header["kid"] = "k1"
		raw, _ := hs.SignedString(secret)
		refused(t, v, raw, "HS256 with the public key")
	}
	refused(t, v, rs.Sign(t, with(func(c jwt.MapClaims) { c["exp"] = time.Now().Add(-time.Hour).Unix() })), "expired")
	refused(t, v, rs.Sign(t, with(func(c jwt.MapClaims) { delete(c, "exp") })), "no exp")
	refused(t, v, rs.Sign(t, with(func(c jwt.MapClaims) { c["nbf"] = time.Now().Add(time.Hour).Unix() })), "not yet valid")
	refused(t, v, rs.Sign(t, with(func(c jwt.MapClaims) { c["iat"] = time.Now().Add(time.Hour).Unix() })), "issued in the future")
	refused(t, v, rs.Sign(t, with(func(c jwt.MapClaims) { c["aud"] = "someone-else" })), "wrong aud")
	refused(t, v, rs.Sign(t, with(func(c jwt.MapClaims) { c["iss"] = "https://evil" })), "wrong iss")
	refused(t, v, rs.Sign(t, with(func(c jwt.MapClaims) { delete(c, "sub") })), "no sub")
	refused(t, v, rs.Sign(t, with(func(c jwt.MapClaims) { c["sub"] = "a\x00b" })), "sub with NUL")
	refused(t, v, rs.Sign(t, with(func(c jwt.MapClaims) { c["aud"] = []string{"aapd-a", "aapd-b"} })), "audiences of two tenants")
	refused(t, v, rs.Sign(t, with(func(c jwt.MapClaims) { c["scope"] = 7 })), "scope not a string")
	refused(t, v, other.Sign(t, good), "signed by another key with the same kid")
	// Tampered payload: another subject under the original signature.
	parts := strings.Split(rs.Sign(t, good), ".")
	payload, _ := base64.RawURLEncoding.DecodeString(parts[1])
	parts[1] = base64.RawURLEncoding.EncodeToString([]byte(strings.Replace(string(payload), "user1", "user2", 1)))
	refused(t, v, strings.Join(parts, "."), "tampered payload")
	refused(t, v, "not.a.jwt", "garbage")
	refused(t, v, strings.Repeat("a", auth.MaxTokenBytes+1), "too long")
}

func TestVerifierRefreshesUnknownKidAtABoundedRate(t *testing.T) {
	t.Parallel()
	k1, k2, k3 := authtest.NewES256(t, "k1"), authtest.NewES256(t, "k2"), authtest.NewES256(t, "k3")
	jwks := authtest.NewJWKS(t, k1)
	v := newVerifier(t, auth.Issuer{ID: "i1", TenantID: "A", Issuer: "https://id", Audience: "aapd", JWKSURL: jwks.URL})
	claims := authtest.Claims("https://id", "aapd", "u")
	if _, err := v.Verify(context.Background(), k1.Sign(t, claims)); err != nil {
		t.Fatal(err)
	}
	if n := jwks.Fetches(); n != 1 {
		t.Fatalf("fetches after the first token = %d, want 1", n)
	}
	// Rotation: k2 appears; a token signed with it refreshes the set.
	jwks.Set(k1, k2)
	if _, err := v.Verify(context.Background(), k2.Sign(t, claims)); err != nil {
		t.Fatalf("token of the rotated-in key: %v", err)
	}
	// The refresh budget is spent: k3 is unknown, and stays so without a
	// fetch, however many tokens name it.
	jwks.Set(k1, k2, k3)
	before := jwks.Fetches()
	for range 5 {
		refused(t, v, authtest.NewES256(t, "k9").Sign(t, claims), "unknown kid")
	}
	refused(t, v, k3.Sign(t, claims), "kid published after the last allowed refresh")
	if n := jwks.Fetches() - before; n != 0 {
		t.Errorf("%d fetches for unknown kids after the budget was spent, want 0", n)
	}
}

func TestVerifierStaticKeysAcceptTheirOneAlgorithm(t *testing.T) {
	t.Parallel()
	es, ed, rs := authtest.NewES256(t, ""), authtest.NewEdDSA(t, ""), authtest.NewRS256(t, "")
	v := newVerifier(t,
		auth.Issuer{ID: "es", TenantID: "A", Issuer: "https://es", Audience: "aapd", PublicKeys: []string{es.PublicPEM(t)}},
		auth.Issuer{ID: "ed", TenantID: "A", Issuer: "https://ed", Audience: "aapd", PublicKeys: []string{ed.PublicPEM(t), rs.PublicPEM(t)}},
	)
	for _, c := range []struct {
		name   string
		signer *authtest.Signer
		iss    string
		ok     bool
	}{
		{"ES256", es, "https://es", true},
		{"EdDSA", ed, "https://ed", true},
		{"RS256 beside EdDSA", rs, "https://ed", true},
		{"EdDSA key not registered", authtest.NewEdDSA(t, ""), "https://ed", false},
		{"RS256 where only ES256 is registered", rs, "https://es", false},
	} {
		p, err := v.Verify(context.Background(), c.signer.Sign(t, authtest.Claims(c.iss, "aapd", "u")))
		if (err == nil) != c.ok {
			t.Errorf("%s: %+v, %v; want ok=%v", c.name, p, err, c.ok)
		}
	}
}

func TestTokenScopeClaimNarrows(t *testing.T) {
	t.Parallel()
	es := authtest.NewES256(t, "")
	v := newVerifier(t, auth.Issuer{ID: "es", TenantID: "A", Issuer: "https://es", Audience: "aapd", PublicKeys: []string{es.PublicPEM(t)}})
	for scope, want := range map[string][]string{
		"<absent>":                     auth.AllScopes,
		"sessions:read":                {"sessions:read"},
		"openid sessions:write email":  {"sessions:write"},
		"sessions:write sessions:read": {"sessions:write", "sessions:read"},
		"":                             nil,
		"admin":                        nil,
	} {
		c := authtest.Claims("https://es", "aapd", "u")
		if scope != "<absent>" {
			c["scope"] = scope
		}
		p, err := v.Verify(context.Background(), es.Sign(t, c))
		if err != nil || !slices.Equal(p.Scopes, want) {
			t.Errorf("scope %q: %v, %v; want %v", scope, p.Scopes, err, want)
		}
	}
}

func TestJWKSFetchIsBoundedAndChecked(t *testing.T) {
	t.Parallel()
	es := authtest.NewES256(t, "k1")
	huge := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte(`{"keys":[`))
		for range auth.DefaultJWKSMaxBytes / 8 {
			w.Write([]byte(`{},{},{}`))
		}
	}))
	defer huge.Close()
	redirect := httptest.NewServer(http.RedirectHandler("http://id.example/jwks", http.StatusFound))
	defer redirect.Close()
	v := newVerifier(t,
		auth.Issuer{ID: "huge", TenantID: "A", Issuer: "https://huge", Audience: "aapd", JWKSURL: huge.URL},
		auth.Issuer{ID: "redir", TenantID: "A", Issuer: "https://redir", Audience: "aapd", JWKSURL: redirect.URL},
		auth.Issuer{ID: "plain", TenantID: "A", Issuer: "https://plain", Audience: "aapd", JWKSURL: "http://id.example/jwks"},
	)
	for _, iss := range []string{"https://huge", "https://redir", "https://plain"} {
		refused(t, v, es.Sign(t, authtest.Claims(iss, "aapd", "u")), iss)
	}
}
