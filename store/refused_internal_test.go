package store

import (
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// A claim whose transaction the server refused is void; one whose
// connection the server ended may have committed (its answer lost), and
// must be looked for, never taken for void.
func TestRefusedTellsAVoidTransactionFromALostAnswer(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"unique violation", &pgconn.PgError{Severity: "ERROR", Code: "23505"}, true},
		{"wrapped refusal", fmt.Errorf("insert: %w", &pgconn.PgError{Severity: "ERROR", Code: "22P02"}), true},
		{"shutdown after the commit", &pgconn.PgError{Severity: "FATAL", Code: "57P01"}, false},
		{"crash", &pgconn.PgError{Severity: "FATAL", Code: "57P02"}, false},
		{"panic", &pgconn.PgError{Severity: "PANIC", Code: "XX000"}, false},
		{"connection failure", &pgconn.PgError{Severity: "ERROR", Code: "08006"}, false},
		{"network", errors.New("unexpected EOF"), false},
	} {
		if got := refused(tc.err); got != tc.want {
			t.Errorf("%s: refused = %v, want %v", tc.name, got, tc.want)
		}
	}
}
