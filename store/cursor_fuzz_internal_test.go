package store

import (
	"errors"
	"testing"
)

// FuzzCursor feeds list cursors (a client's ?cursor=, the admin API's) to
// their decoding. The property: no panic; a cursor is refused with
// ErrBadCursor (a 400) or names an id of the page's kind, and the id a
// page ends at round-trips through its cursor.
func FuzzCursor(f *testing.F) {
	f.Add(encodeCursor("sess_0a1b2c3d4e5f60718293a4b5c6d7e8f9"), "sess_")
	f.Add(encodeCursor("whk_01"), "whk_")
	f.Add("not base64!", "sess_")
	f.Add("", "sess_")
	f.Add(encodeCursor("sess_\x00"), "sess_")
	f.Fuzz(func(t *testing.T, cursor, prefix string) {
		for _, decode := range []func(string, string) (string, error){decodeCursor, idCursor} {
			id, err := decode(cursor, prefix)
			if err != nil {
				if !errors.Is(err, ErrBadCursor) {
					t.Fatalf("refused with %v, not ErrBadCursor", err)
				}
				continue
			}
			if cursor == "" {
				continue
			}
			if again, err := decode(encodeCursor(id), prefix); err != nil || again != id {
				t.Fatalf("id %q does not round-trip through its cursor: %q, %v", id, again, err)
			}
		}
	})
}
