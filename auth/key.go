// Package auth holds aapd's credentials: the format of API keys, how they
// are hashed and checked, and the Principal a request acts as.
//
// An API key reads aapd_<public id>_<secret>. The public id locates the key
// in the database without revealing anything; the whole key is kept only as a
// SHA-256 hash (keys are 256-bit random, so a fast hash is safe) and is
// shown to its owner once, when it is created.
package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base32"
	"encoding/base64"
	"errors"
	"strings"
	"time"
)

// KeyPrefix starts every aapd API key, so leaked keys are easy to spot.
const KeyPrefix = "aapd_"

var publicIDEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// ErrMalformedKey: the credential is not an aapd API key.
var ErrMalformedKey = errors.New("malformed API key")

// NewKey is a freshly generated key: Secret is shown once and never stored.
type NewKey struct {
	PublicID string
	Secret   string // the whole key, aapd_<public id>_<secret>
	Hash     []byte
}

// GenerateKey makes a new random API key.
func GenerateKey() (NewKey, error) {
	id := make([]byte, 10)
	secret := make([]byte, 32)
	if _, err := rand.Read(id); err != nil {
		return NewKey{}, err
	}
	if _, err := rand.Read(secret); err != nil {
		return NewKey{}, err
	}
	publicID := publicIDEncoding.EncodeToString(id)
	full := KeyPrefix + publicID + "_" + base64.RawURLEncoding.EncodeToString(secret)
	return NewKey{PublicID: publicID, Secret: full, Hash: HashKey(full)}, nil
}

// ParseKey returns the public id of a key, or ErrMalformedKey.
func ParseKey(key string) (publicID string, err error) {
	rest, ok := strings.CutPrefix(key, KeyPrefix)
	if !ok {
		return "", ErrMalformedKey
	}
	publicID, secret, ok := strings.Cut(rest, "_")
	if !ok || len(publicID) != 16 || len(secret) != 43 {
		return "", ErrMalformedKey
	}
	if _, err := publicIDEncoding.DecodeString(publicID); err != nil {
		return "", ErrMalformedKey
	}
	return publicID, nil
}

// HashKey returns the stored form of a key.
func HashKey(key string) []byte {
	h := sha256.Sum256([]byte(key))
	return h[:]
}

// Key states a stored key can be in, as far as authentication cares.
var (
	ErrUnknownKey = errors.New("unknown API key")
	ErrRevokedKey = errors.New("revoked API key")
	ErrExpiredKey = errors.New("expired API key")
)

// StoredKey is what authentication needs to know of a stored key.
type StoredKey struct {
	Hash      []byte
	RevokedAt *time.Time
	ExpiresAt *time.Time
}

// VerifyKey checks a presented key against its stored record, in constant
// time with respect to the secret.
func VerifyKey(presented string, stored StoredKey, now time.Time) error {
	if subtle.ConstantTimeCompare(HashKey(presented), stored.Hash) != 1 {
		return ErrUnknownKey
	}
	if stored.RevokedAt != nil {
		return ErrRevokedKey
	}
	if stored.ExpiresAt != nil && !now.Before(*stored.ExpiresAt) {
		return ErrExpiredKey
	}
	return nil
}
