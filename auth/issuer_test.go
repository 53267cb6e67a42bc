package auth_test

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"testing"

	"github.com/aapd/aapd/auth"
)

func pemOf(t *testing.T, pub crypto.PublicKey) string {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
}

func TestParsePublicKeyPEM(t *testing.T) {
	rsa2048, _ := rsa.GenerateKey(rand.Reader, 2048)
	rsa1024, _ := rsa.GenerateKey(rand.Reader, 1024)
	p256, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	edPub, _, _ := ed25519.GenerateKey(rand.Reader)
	pkcs1 := string(pem.EncodeToMemory(&pem.Block{Type: "RSA PUBLIC KEY", Bytes: x509.MarshalPKCS1PublicKey(&rsa2048.PublicKey)}))
	tests := []struct {
		name    string
		pem     string
		wantAlg string // "" for refused
	}{
		{"RSA 2048", pemOf(t, &rsa2048.PublicKey), "RS256"},
		{"RSA PKCS#1", pkcs1, "RS256"},
		{"RSA 1024 is too short", pemOf(t, &rsa1024.PublicKey), ""},
		{"ECDSA P-256", pemOf(t, &p256.PublicKey), "ES256"},
		{"ECDSA P-384 is not ES256", pemOf(t, &p384.PublicKey), ""},
		{"Ed25519", pemOf(t, edPub), "EdDSA"},
		{"a private key", string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(rsa2048)})), ""},
		{"two keys in one", pemOf(t, edPub) + pemOf(t, edPub), ""},
		{"not PEM", "hello", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key, err := auth.ParsePublicKeyPEM(tt.pem)
			if tt.wantAlg == "" {
				if err == nil {
					t.Fatal("accepted")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if alg, err := auth.AlgorithmFor(key); err != nil || alg != tt.wantAlg {
				t.Errorf("algorithm %q, %v; want %q", alg, err, tt.wantAlg)
			}
		})
	}
}

func TestValidateJWKSURL(t *testing.T) {
	for url, ok := range map[string]bool{
		"https://id.example/.well-known/jwks.json": true,
		"http://127.0.0.1:8080/jwks":               true,
		"http://localhost/jwks":                    true,
		"http://[::1]:9/jwks":                      true,
		"http://id.example/jwks":                   false,
		"ftp://id.example/jwks":                    false,
		"https://user:pw@id.example/jwks":          false,
		"/jwks":                                    false,
		"":                                         false,
	} {
		if err := auth.ValidateJWKSURL(url); (err == nil) != ok {
			t.Errorf("%q: %v, want ok=%v", url, err, ok)
		}
	}
}
