// Package authtest mints end-user tokens and serves key sets for tests: the
// part of an identity provider that aapd talks to.
package authtest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Signer is a private key of an issuer, with its kid.
type Signer struct {
	Kid    string
	Method jwt.SigningMethod
	Key    crypto.Signer
}

// NewRS256 returns an RSA 2048 signer.
func NewRS256(t testing.TB, kid string) *Signer {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return &Signer{Kid: kid, Method: jwt.SigningMethodRS256, Key: k}
}

// NewES256 returns an ECDSA P-256 signer.
func NewES256(t testing.TB, kid string) *Signer {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return &Signer{Kid: kid, Method: jwt.SigningMethodES256, Key: k}
}

// NewEdDSA returns an Ed25519 signer.
func NewEdDSA(t testing.TB, kid string) *Signer {
	t.Helper()
	_, k, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return &Signer{Kid: kid, Method: jwt.SigningMethodEdDSA, Key: k}
}

// PublicPEM is the public key as an issuer registers it.
func (s *Signer) PublicPEM(t testing.TB) string {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(s.Key.Public())
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
}

// JWK is the public key as a key set lists it.
func (s *Signer) JWK() map[string]any {
	b64 := base64.RawURLEncoding.EncodeToString
	jwk := map[string]any{"kid": s.Kid, "use": "sig"}
	switch pub := s.Key.Public().(type) {
	case *rsa.PublicKey:
		jwk["kty"], jwk["n"], jwk["e"] = "RSA", b64(pub.N.Bytes()), b64(big.NewInt(int64(pub.E)).Bytes())
	case *ecdsa.PublicKey:
		pt, _ := pub.Bytes() // 0x04 || X || Y
		jwk["kty"], jwk["crv"], jwk["x"], jwk["y"] = "EC", "P-256", b64(pt[1:33]), b64(pt[33:])
	case ed25519.PublicKey:
		jwk["kty"], jwk["crv"], jwk["x"] = "OKP", "Ed25519", b64(pub)
	}
	return jwk
}

// Sign signs claims with the key's algorithm, naming its kid.
func (s *Signer) Sign(t testing.TB, claims jwt.Claims) string {
	t.Helper()
	tok := jwt.NewWithClaims(s.Method, claims)
	if s.Kid != "" {
		tok.Header["kid"] = s.Kid
	}
	raw, err := tok.SignedString(s.Key)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// Claims are valid claims for an end user: issued now, expiring in an hour.
func Claims(iss, aud, sub string) jwt.MapClaims {
	now := time.Now()
	return jwt.MapClaims{"iss": iss, "aud": aud, "sub": sub, "iat": now.Unix(), "exp": now.Add(time.Hour).Unix()}
}

// JWKS is a key set served on loopback, counting its fetches.
type JWKS struct {
	*httptest.Server
	mu      sync.Mutex
	signers []*Signer
	fetches atomic.Int64
}

// NewJWKS serves the signers' public keys until the test ends.
func NewJWKS(t testing.TB, signers ...*Signer) *JWKS {
	t.Helper()
	j := &JWKS{signers: signers}
	j.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		j.fetches.Add(1)
		j.mu.Lock()
		keys := make([]map[string]any, len(j.signers))
		for i, s := range j.signers {
			keys[i] = s.JWK()
		}
		j.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"keys": keys})
	}))
	t.Cleanup(j.Close)
	return j
}

// Set replaces the keys served: a rotation.
func (j *JWKS) Set(signers ...*Signer) {
	j.mu.Lock()
	j.signers = signers
	j.mu.Unlock()
}

// Fetches counts the requests served.
func (j *JWKS) Fetches() int64 { return j.fetches.Load() }
