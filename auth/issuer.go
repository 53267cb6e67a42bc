package auth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
)

// MinRSABits is the smallest RSA key aapd accepts a signature from.
const MinRSABits = 2048

// ParsePublicKeyPEM parses one PEM public key an issuer signs tokens with:
// RSA (PKIX or PKCS #1, at least MinRSABits), ECDSA on P-256, or Ed25519.
// Anything else is refused, so that every key has exactly one algorithm
// (AlgorithmFor).
func ParsePublicKeyPEM(text string) (crypto.PublicKey, error) {
	block, rest := pem.Decode([]byte(strings.TrimSpace(text)))
	if block == nil {
		return nil, errors.New("not a PEM block")
	}
	if len(strings.TrimSpace(string(rest))) > 0 {
		return nil, errors.New("more than one PEM block: give each key separately")
	}
	var (
		key any
		err error
	)
	switch block.Type {
	case "PUBLIC KEY":
		key, err = x509.ParsePKIXPublicKey(block.Bytes)
	case "RSA PUBLIC KEY":
		key, err = x509.ParsePKCS1PublicKey(block.Bytes)
	default:
		return nil, fmt.Errorf("a PEM block of type %q is not a public key", block.Type)
	}
	if err != nil {
		return nil, fmt.Errorf("parse public key: %w", err)
	}
	if _, err := AlgorithmFor(key); err != nil {
		return nil, err
	}
	return key, nil
}

// AlgorithmFor is the one JWT algorithm aapd accepts with key: RS256 for
// RSA, ES256 for ECDSA P-256, EdDSA for Ed25519. Never "none", and never
// an HMAC: a public key used as an HMAC secret would let anyone who has it
// sign tokens.
func AlgorithmFor(key crypto.PublicKey) (string, error) {
	switch k := key.(type) {
	case *rsa.PublicKey:
		if k.N.BitLen() < MinRSABits {
			return "", fmt.Errorf("RSA key of %d bits: at least %d are required", k.N.BitLen(), MinRSABits)
		}
		return "RS256", nil
	case *ecdsa.PublicKey:
		if k.Curve != elliptic.P256() {
			return "", fmt.Errorf("ECDSA key on %s: only P-256 (ES256) is accepted", k.Curve.Params().Name)
		}
		return "ES256", nil
	case ed25519.PublicKey:
		return "EdDSA", nil
	}
	return "", fmt.Errorf("unsupported public key type %T: use RSA, ECDSA P-256 or Ed25519", key)
}

// ValidateJWKSURL checks where an issuer's keys may be fetched from:
// https, or plain http on a loopback host (development and tests). A key
// set fetched over plain http from elsewhere could be replaced in transit.
func ValidateJWKSURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.User != nil {
		return fmt.Errorf("jwksUrl %q is not an absolute URL without credentials", raw)
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		if isLoopback(u.Hostname()) {
			return nil
		}
		return fmt.Errorf("jwksUrl %q must use https (plain http only on a loopback host)", raw)
	}
	return fmt.Errorf("jwksUrl %q must use https", raw)
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
