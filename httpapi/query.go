package httpapi

import (
	"net/http"
	"net/url"
	"strings"
)

// Query returns the parameters of a request's query string, or a 400
// (invalid-request) when the string does not parse: a bad escape
// (?after=%%%), a semicolon separator. r.URL.Query() drops what it cannot
// parse without a word, so a malformed cursor would be read as none and a
// list would answer 200 with its first page: a client's mistake silently
// accepted. Every handler that reads its query reads it here, once; the
// refusal names the parameter when its name could be read, and is written
// in the door's error shape like any other.
func Query(r *http.Request) (url.Values, error) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err == nil {
		return q, nil
	}
	p := probInvalid.with("the query string does not parse (%v): escape each parameter's value (RFC 3986 percent-encoding) and separate the parameters with &", err)
	p.Field = badQueryParam(r.URL.RawQuery)
	return nil, p
}

// badQueryParam names the first parameter of raw whose value does not
// unescape; "" when it is a name that does not, or a separator.
func badQueryParam(raw string) string {
	for _, pair := range strings.Split(raw, "&") {
		if strings.Contains(pair, ";") {
			return ""
		}
		name, value, _ := strings.Cut(pair, "=")
		n, err := url.QueryUnescape(name)
		if err != nil {
			return ""
		}
		if _, err := url.QueryUnescape(value); err != nil {
			return n
		}
	}
	return ""
}
