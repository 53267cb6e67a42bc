package sandboxagent

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/aapd/aapd/aap"
)

// FuzzSandboxAgentRequestParts feeds the parts of a sandbox-agent request
// the door reads before it touches the database: the session id a client
// names (the {session_id} of every route), and the event log's query
// (offset, limit, include_raw). The property: no panic; a refusal is an
// *aap.Error (a 400 naming the field); an accepted session id is text
// PostgreSQL takes (valid UTF-8, printable, so no NUL: anything else
// would be a 500) and never one of aapd's own ids; accepted numbers are
// in their ranges. The bodies go through the edge's decoding, fuzzed
// through a real server (cmd/aapd FuzzFrontDoors).
func FuzzSandboxAgentRequestParts(f *testing.F) {
	for _, s := range []struct{ name, query string }{
		{"s1", "offset=1&limit=2&include_raw=true"},
		{"my session", "offset=0"},
		{"sess_0123", "limit=1000"},
		{"\xff", "offset=-1"},
		{"a\x00b", "limit=99999999999999999999"},
		{"ü", "includeRaw=maybe"},
		{strings.Repeat("n", 257), "offset=9223372036854775807&limit=0"},
		{"", "include_raw=1&includeRaw=false"},
	} {
		f.Add(s.name, s.query)
	}
	f.Fuzz(func(t *testing.T, name, query string) {
		if err := validName(name); err == nil {
			if !utf8.ValidString(name) || name == "" || len(name) > maxNameLength || strings.HasPrefix(name, "sess_") ||
				strings.ContainsFunc(name, func(r rune) bool { return !unicode.IsPrint(r) }) {
				t.Fatalf("session id %q accepted", name)
			}
		}
		if _, err := url.ParseQuery(query); err != nil {
			return // not a query a client's library sends
		}
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.URL.RawQuery = query
		if n, err := queryInt(r, "offset", 0, -1); err != nil {
			requireFieldError(t, err, "offset")
		} else if n < 0 {
			t.Fatalf("offset %d accepted from %q", n, query)
		}
		if n, err := queryInt(r, "limit", DefaultEventLimit, MaxEventLimit); err != nil {
			requireFieldError(t, err, "limit")
		} else if n < 0 || n > MaxEventLimit {
			t.Fatalf("limit %d accepted from %q", n, query)
		}
		if _, err := includeRaw(r); err != nil {
			var e *aap.Error
			if !errors.As(err, &e) || (e.Field != "include_raw" && e.Field != "includeRaw") {
				t.Fatalf("include_raw refused with %T (%v), which would not be a 400 naming it", err, err)
			}
		}
	})
}

func requireFieldError(t *testing.T, err error, field string) {
	t.Helper()
	var e *aap.Error
	if !errors.As(err, &e) || e.Field != field {
		t.Fatalf("refused with %T (%v), which would not be a 400 naming %s", err, err, field)
	}
}
