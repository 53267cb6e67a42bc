package httpapi

import (
	"errors"
	"net/http"
	"net/url"
	"testing"
)

// A query string that does not parse is a 400 naming the parameter, not
// the parameters that parsed.
func TestQueryRefusesAQueryStringThatDoesNotParse(t *testing.T) {
	t.Parallel()
	cases := []struct {
		raw, field string
		ok         bool
	}{
		{raw: "", ok: true},
		{raw: "after=c2Vzc18x&limit=2", ok: true},
		{raw: "owner=al%2Fice&after=", ok: true},
		{raw: "after=%%%", field: "after"},
		{raw: "limit=2&after=%zz", field: "after"},
		{raw: "limit=2;after=x"},
		{raw: "a%zz=1"},
		{raw: "limit=%3&after=%%%", field: "limit"},
	}
	for _, tc := range cases {
		r := &http.Request{URL: &url.URL{Path: "/sessions", RawQuery: tc.raw}}
		q, err := Query(r)
		if tc.ok {
			if err != nil {
				t.Errorf("%q: %v", tc.raw, err)
			}
			if want, _ := url.ParseQuery(tc.raw); len(q) != len(want) {
				t.Errorf("%q: %v, want %v", tc.raw, q, want)
			}
			continue
		}
		var p *Problem
		if !errors.As(err, &p) || p.Status != http.StatusBadRequest || p.Slug() != "invalid-request" || p.Field != tc.field {
			t.Errorf("%q: %#v, want a 400 invalid-request of field %q", tc.raw, err, tc.field)
		}
	}
}
