package v3

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// FuzzPreferHeader feeds Prefer headers (RFC 7240) to the parsers of
// background turns: respond-async on POST …/turns, wait=N on GET
// …/turns/:turnId. The property: no panic; a preference not understood
// is ignored, never refused (no input of this header is an error, let
// alone a 5xx); a wait is whole seconds from 0 to MaxTurnWait; a header
// that names respond-async is honoured wherever it stands among the
// others.
func FuzzPreferHeader(f *testing.F) {
	for _, s := range []string{
		"respond-async", "respond-async, wait=10", "wait=5", "wait=abc", "wait=-1", "wait=99999999999",
		`wait="7"`, "WAIT = 3 ; x=y", "return=minimal, respond-async; foo", ";;,=,", "wait=", "wait=1e3",
		"wait=0x10", "wait=+5", "wait=18446744073709551616", "handling=lenient,wait=60,wait=1",
	} {
		f.Add(s, "")
	}
	f.Add("wait=abc", "wait=5")
	f.Fuzz(func(t *testing.T, first, second string) {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Header.Add("Prefer", first)
		if second != "" {
			r.Header.Add("Prefer", second)
		}
		wait := waitPreference(r)
		if wait < 0 || wait > MaxTurnWait || wait%time.Second != 0 {
			t.Fatalf("Prefer %q, %q: wait %v, want whole seconds from 0 to %v", first, second, wait, MaxTurnWait)
		}
		// A wait of digits alone is honoured, up to MaxTurnWait.
		if name, value, ok := strings.Cut(first, "="); ok && strings.TrimSpace(name) == "wait" && !strings.ContainsAny(first, ",;") {
			if v := strings.TrimSpace(value); v != "" && strings.Trim(v, "0123456789") == "" && wait == 0 && strings.Trim(v, "0") != "" {
				t.Fatalf("Prefer %q: a wait of %s seconds ignored", first, v)
			}
		}
		async := respondAsync(r)
		// respond-async added among the preferences is always found.
		r.Header.Add("Prefer", "x, respond-async")
		if !respondAsync(r) {
			t.Fatalf("Prefer %q, %q, then respond-async: not asked for", first, second)
		}
		// What the first headers asked does not depend on a header after
		// them that has neither preference.
		r = httptest.NewRequest(http.MethodGet, "/", nil)
		r.Header.Add("Prefer", first)
		if second != "" {
			r.Header.Add("Prefer", second)
		}
		r.Header.Add("Prefer", "return=minimal")
		if respondAsync(r) != async || waitPreference(r) != wait {
			t.Fatalf("Prefer %q, %q: a later return=minimal changed what was asked", first, second)
		}
	})
}
