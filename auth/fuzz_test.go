package auth_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/aapd/aapd/auth"
	"github.com/aapd/aapd/auth/authtest"
)

// FuzzVerifyToken feeds bearer credentials to the JWT verifier, against
// one issuer with a PEM key and one with a key set. The property: no
// panic; a token is either refused with a *TokenError (a 401) or names a
// subject aapd accepts as an owner, of the issuer's tenant.
func FuzzVerifyToken(f *testing.F) {
	rs, es := authtest.NewRS256(f, "k1"), authtest.NewES256(f, "k2")
	jwks := authtest.NewJWKS(f, es)
	v := auth.NewVerifier(auth.VerifierConfig{
		Find: finder(
			auth.Issuer{ID: "i1", TenantID: "A", Issuer: "https://id.a", Audience: "aapd", PublicKeys: []string{rs.PublicPEM(f)}},
			auth.Issuer{ID: "i2", TenantID: "B", Issuer: "https://id.b", Audience: "aapd", JWKSURL: jwks.URL},
		),
		JWKSTimeout: 2 * time.Second,
	})
	f.Cleanup(v.Close)
	good := authtest.Claims("https://id.a", "aapd", "user1")
	good["exp"] = time.Now().Add(24 * 365 * time.Hour).Unix()
	f.Add(rs.Sign(f, good))
	other := authtest.Claims("https://id.b", "aapd", "user2")
	other["exp"] = time.Now().Add(24 * 365 * time.Hour).Unix()
	other["scope"] = "sessions:read sessions:write"
	f.Add(es.Sign(f, other))
	none, _ := jwt.NewWithClaims(jwt.SigningMethodNone, good).SignedString(jwt.UnsafeAllowNoneSignatureType)
	f.Add(none)
	f.Add("aapd_sk_not_a_token")
	f.Add("a.b.c")
	f.Add("")
	f.Fuzz(func(t *testing.T, raw string) {
		p, err := v.Verify(context.Background(), raw)
		if err != nil {
			var te *auth.TokenError
			if !errors.As(err, &te) {
				t.Fatalf("refused with %T (%v), which would be a 500", err, err)
			}
			return
		}
		if !auth.ValidOwner(p.Subject) || (p.TenantID != "A" && p.TenantID != "B") {
			t.Fatalf("accepted token names %+v", p)
		}
	})
}

// FuzzJWKSDocument serves fuzzed key set documents to the verifier, which
// fetches them as an issuer's keys. The property: no panic and no hang; a
// token is refused with a *TokenError unless the document holds its key.
func FuzzJWKSDocument(f *testing.F) {
	rs := authtest.NewRS256(f, "k1")
	claims := authtest.Claims("https://id.a", "aapd", "user1")
	claims["exp"] = time.Now().Add(24 * 365 * time.Hour).Unix()
	token := rs.Sign(f, claims)
	var (
		mu  sync.Mutex
		doc []byte
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(doc)
	}))
	f.Cleanup(srv.Close)
	good := authtest.NewJWKS(f, rs)
	res, err := http.Get(good.URL)
	if err != nil {
		f.Fatal(err)
	}
	var seed [4096]byte
	n, _ := res.Body.Read(seed[:])
	res.Body.Close()
	f.Add(seed[:n])
	f.Add([]byte(`{"keys":[]}`))
	f.Add([]byte(`{"keys":[{"kty":"RSA","kid":"k1","n":"AQAB","e":"AQAB"}]}`))
	f.Add([]byte(`{"keys":[{"kty":"EC","kid":"k1","crv":"P-256","x":"","y":""}]}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, d []byte) {
		mu.Lock()
		doc = d
		mu.Unlock()
		v := auth.NewVerifier(auth.VerifierConfig{
			Find:        finder(auth.Issuer{ID: "i1", TenantID: "A", Issuer: "https://id.a", Audience: "aapd", JWKSURL: srv.URL}),
			JWKSTimeout: time.Second,
		})
		defer v.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := v.Verify(ctx, token); err != nil {
			var te *auth.TokenError
			if !errors.As(err, &te) {
				t.Fatalf("refused with %T (%v), which would be a 500", err, err)
			}
		}
	})
}

// FuzzPublicKeyPEM feeds an operator's PEM text (an issuer's registration)
// to the key parser. The property: no panic; an accepted key has an
// algorithm aapd verifies with.
func FuzzPublicKeyPEM(f *testing.F) {
	f.Add(authtest.NewRS256(f, "k").PublicPEM(f))
	f.Add(authtest.NewES256(f, "k").PublicPEM(f))
	f.Add(authtest.NewEdDSA(f, "k").PublicPEM(f))
	f.Add("-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n")
	f.Add("")
	f.Fuzz(func(t *testing.T, text string) {
		key, err := auth.ParsePublicKeyPEM(text)
		if err != nil {
			return
		}
		if _, err := auth.AlgorithmFor(key); err != nil {
			t.Fatalf("accepted a key no algorithm verifies with: %v", err)
		}
	})
}
