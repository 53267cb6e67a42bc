package auth_test

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aapd/aapd/auth"
)

// keyPattern is the documented shape: aapd_, a 16-character base32 public
// id, _, a 43-character base64url secret.
var keyPattern = regexp.MustCompile(`^aapd_([a-z2-7]{16})_([A-Za-z0-9_-]{43})$`)

func generate(t *testing.T) auth.NewKey {
	t.Helper()
	k, err := auth.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestGenerateKeyShape(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	ids := map[string]bool{}
	for range 200 {
		k := generate(t)
		m := keyPattern.FindStringSubmatch(k.Secret)
		if m == nil {
			t.Fatalf("key %q does not have the documented shape", k.Secret)
		}
		if m[1] != k.PublicID {
			t.Errorf("public id %q, key carries %q", k.PublicID, m[1])
		}
		if !strings.HasPrefix(k.Secret, auth.KeyPrefix) {
			t.Errorf("key %q lacks prefix %q", k.Secret, auth.KeyPrefix)
		}
		if string(k.Hash) != string(auth.HashKey(k.Secret)) || len(k.Hash) != 32 {
			t.Errorf("hash %x is not HashKey of the key", k.Hash)
		}
		if strings.Contains(string(k.Hash), k.Secret) {
			t.Error("the hash contains the key")
		}
		id, err := auth.ParseKey(k.Secret)
		if err != nil || id != k.PublicID {
			t.Errorf("ParseKey(generated) = %q, %v", id, err)
		}
		if seen[k.Secret] || ids[k.PublicID] {
			t.Fatalf("a key or public id repeated after %d keys", len(seen))
		}
		seen[k.Secret], ids[k.PublicID] = true, true
	}
}

func TestHashKeyIsDeterministicAndDistinct(t *testing.T) {
	t.Parallel()
	a, b := generate(t), generate(t)
	if string(auth.HashKey(a.Secret)) != string(auth.HashKey(a.Secret)) {
		t.Error("HashKey is not deterministic")
	}
	if string(auth.HashKey(a.Secret)) == string(auth.HashKey(b.Secret)) {
		t.Error("two keys hash alike")
	}
}

func TestParseKeyRejectsMalformedShapes(t *testing.T) {
	t.Parallel()
	k := generate(t)
	id, secret := k.PublicID, strings.TrimPrefix(k.Secret, auth.KeyPrefix+k.PublicID+"_")
	cases := []struct {
		name, key string
	}{
		{"empty", ""},
		{"prefix only", "aapd_"},
		{"no prefix", id + "_" + secret},
		{"other prefix", "sk_" + id + "_" + secret},
		{"prefix in capitals", "AAPD_" + id + "_" + secret},
		{"no separator", "aapd_" + id + secret},
		{"no secret", "aapd_" + id + "_"},
		{"public id too short", "aapd_" + id[:15] + "_" + secret},
		{"public id too long", "aapd_" + id + "a_" + secret},
		{"public id in capitals", "aapd_" + strings.ToUpper(id) + "_" + secret},
		{"public id outside base32", "aapd_" + "0189abcdefghijkl" + "_" + secret},
		{"secret too short", "aapd_" + id + "_" + secret[:42]},
		{"secret too long", "aapd_" + id + "_" + secret + "A"},
		{"trailing newline", k.Secret + "\n"},
		{"leading space", " " + k.Secret},
		{"bearer scheme included", "Bearer " + k.Secret},
		{"JWT", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl"},
	}
	for _, tc := range cases {
		got, err := auth.ParseKey(tc.key)
		if !errors.Is(err, auth.ErrMalformedKey) {
			t.Errorf("%s: ParseKey(%q) = %q, %v; want ErrMalformedKey", tc.name, tc.key, got, err)
		}
		if err != nil && got != "" {
			t.Errorf("%s: a public id %q came with the error", tc.name, got)
		}
	}
}

func TestVerifyKey(t *testing.T) {
	t.Parallel()
	k := generate(t)
	other := generate(t)
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	past, future := now.Add(-time.Second), now.Add(time.Hour)
	wrongSecret := auth.KeyPrefix + k.PublicID + "_" + strings.Repeat("A", 43)
	cases := []struct {
		name      string
		presented string
		stored    auth.StoredKey
		want      error
	}{
		{"valid", k.Secret, auth.StoredKey{Hash: k.Hash}, nil},
		{"valid until later", k.Secret, auth.StoredKey{Hash: k.Hash, ExpiresAt: &future}, nil},
		{"wrong secret", wrongSecret, auth.StoredKey{Hash: k.Hash}, auth.ErrUnknownKey},
		{"another key", other.Secret, auth.StoredKey{Hash: k.Hash}, auth.ErrUnknownKey},
		{"no stored hash", k.Secret, auth.StoredKey{}, auth.ErrUnknownKey},
		{"revoked", k.Secret, auth.StoredKey{Hash: k.Hash, RevokedAt: &past}, auth.ErrRevokedKey},
		{"expired", k.Secret, auth.StoredKey{Hash: k.Hash, ExpiresAt: &past}, auth.ErrExpiredKey},
		{"expires this instant", k.Secret, auth.StoredKey{Hash: k.Hash, ExpiresAt: &now}, auth.ErrExpiredKey},
		{"revoked and expired", k.Secret, auth.StoredKey{Hash: k.Hash, RevokedAt: &past, ExpiresAt: &past}, auth.ErrRevokedKey},
		// Without the secret, nothing about the key's state is revealed.
		{"wrong secret for a revoked key", wrongSecret, auth.StoredKey{Hash: k.Hash, RevokedAt: &past}, auth.ErrUnknownKey},
		{"wrong secret for an expired key", wrongSecret, auth.StoredKey{Hash: k.Hash, ExpiresAt: &past}, auth.ErrUnknownKey},
	}
	for _, tc := range cases {
		if err := auth.VerifyKey(tc.presented, tc.stored, now); !errors.Is(err, tc.want) || (tc.want == nil && err != nil) {
			t.Errorf("%s: VerifyKey = %v, want %v", tc.name, err, tc.want)
		}
	}
}

func TestPrincipalTravelsInTheContext(t *testing.T) {
	t.Parallel()
	if _, ok := auth.FromContext(context.Background()); ok {
		t.Error("a bare context has a principal")
	}
	p := auth.Principal{TenantID: "t1", KeyID: "abc", Scopes: []string{"sessions"}}
	got, ok := auth.FromContext(auth.NewContext(context.Background(), p))
	if !ok || got.TenantID != "t1" || got.KeyID != "abc" || len(got.Scopes) != 1 {
		t.Errorf("FromContext = %+v, %v", got, ok)
	}
}
