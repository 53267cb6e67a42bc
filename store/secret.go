package store

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"
)

// sealer encrypts secrets at rest with AES-256-GCM: secret option values,
// webhook signing secrets.
type sealer struct {
	aead cipher.AEAD
	// fromDatabase: no key was configured; the key is the database's own.
	fromDatabase bool
}

func newSealer(key []byte) (*sealer, error) {
	if len(key) != 32 {
		return nil, fmt.Errorf("encryption key must be 32 bytes, got %d", len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &sealer{aead: aead}, nil
}

// openSealer uses the configured key, or else the database's generated one,
// creating it on first use.
func (s *Store) openSealer(ctx context.Context, key []byte) (*sealer, error) {
	if key != nil {
		return newSealer(key)
	}
	generated := make([]byte, 32)
	if _, err := rand.Read(generated); err != nil {
		return nil, err
	}
	// Two steps, not one statement: a statement cannot see a row that a
	// replica starting at the same moment committed after it began.
	_, err := s.pool.Exec(ctx, `INSERT INTO server_settings (name, value) VALUES ('encryption_key', $1)
		ON CONFLICT (name) DO NOTHING`, generated)
	if err == nil {
		err = s.pool.QueryRow(ctx, `SELECT value FROM server_settings WHERE name = 'encryption_key'`).Scan(&key)
	}
	if err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "42P01" { // undefined_table
			return nil, ErrNotMigrated
		}
		return nil, fmt.Errorf("load encryption key: %w", interpretError(err))
	}
	sl, err := newSealer(key)
	if sl != nil {
		sl.fromDatabase = true
	}
	return sl, err
}

// sealJSON encrypts v's JSON; nil for an empty map.
func (s *sealer) sealJSON(v map[string]string) ([]byte, error) {
	if len(v) == 0 {
		return nil, nil
	}
	plain, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return s.seal(plain)
}

// seal encrypts plain behind a fresh nonce.
func (s *sealer) seal(plain []byte) ([]byte, error) {
	nonce := make([]byte, s.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	return s.aead.Seal(nonce, nonce, plain, nil), nil
}

// open decrypts what seal produced.
func (s *sealer) open(sealed []byte) ([]byte, error) {
	n := s.aead.NonceSize()
	if len(sealed) < n {
		return nil, errors.New("sealed secret is truncated")
	}
	plain, err := s.aead.Open(nil, sealed[:n], sealed[n:], nil)
	if err != nil {
		return nil, fmt.Errorf("decrypt (wrong AAPD_ENCRYPTION_KEY?): %w", err)
	}
	return plain, nil
}

// openJSON decrypts what sealJSON produced.
func (s *sealer) openJSON(sealed []byte) (map[string]string, error) {
	if len(sealed) == 0 {
		return nil, nil
	}
	plain, err := s.open(sealed)
	if err != nil {
		return nil, fmt.Errorf("secret options: %w", err)
	}
	var v map[string]string
	if err := json.Unmarshal(plain, &v); err != nil {
		return nil, err
	}
	return v, nil
}

// KeyFromDatabase reports that no encryption key was configured, so secret
// options are sealed with a key kept in the database itself: they are then
// only as safe as the database. Servers warn about it.
func (s *Store) KeyFromDatabase() bool { return s.sealer.fromDatabase }
