package admin

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"

	"github.com/aapd/aapd/httpapi"
)

// maxBody bounds a request body: the largest, an issuer with its public
// keys, is a few kilobytes.
const maxBody = 1 << 20

// decode reads a JSON object into v, refusing unknown fields (a misspelt
// field silently ignored would make a key or a limit other than meant) and
// anything after the object.
func decode(w http.ResponseWriter, r *http.Request, v any) error {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) || errors.Is(err, os.ErrDeadlineExceeded) {
			return err // 413, or 408 for a body that took too long (fail)
		}
		return invalid("", "could not read the request body: %v", err)
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return invalid("", "the request body is empty; send a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return describe(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return invalid("", "the body must hold one JSON object and nothing after it")
	}
	return nil
}

// describe turns a decoding error into a refusal naming the field.
func describe(err error) error {
	var (
		syntax *json.SyntaxError
		typ    *json.UnmarshalTypeError
	)
	switch {
	case errors.As(err, &syntax):
		return invalid("", "malformed JSON at byte %d: %v", syntax.Offset, err)
	case errors.As(err, &typ):
		if typ.Field == "" {
			return invalid("", "the body must be a JSON object, not %s", typ.Value)
		}
		return invalid(typ.Field, "must be %s, not %s", jsonType(typ.Type.String()), typ.Value)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name, _ := strconv.Unquote(strings.TrimPrefix(err.Error(), "json: unknown field "))
		return invalid(name, "unknown field")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return invalid("", "malformed JSON: the body ends early")
	}
	return invalid("", "malformed JSON: %v", err)
}

// jsonType names a Go type the way a JSON client thinks of it.
func jsonType(goType string) string {
	switch {
	case strings.Contains(goType, "int"), strings.Contains(goType, "float"):
		return "a number"
	case strings.HasSuffix(goType, "string"):
		return "a string"
	case strings.Contains(goType, "Time"):
		return "an RFC 3339 time"
	case strings.HasPrefix(goType, "[]"):
		return "an array"
	}
	return goType
}

// pageParams reads ?limit= and ?cursor= of a list.
func pageParams(r *http.Request) (cursor string, limit int, err error) {
	q, err := httpapi.Query(r)
	if err != nil {
		return "", 0, err
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxPageLimit {
			return "", 0, invalid("limit", "must be a whole number from 1 to %d", MaxPageLimit)
		}
		limit = n
	}
	return q.Get("cursor"), limit, nil
}
