package httpapi

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"net/http"
)

// IdempotencyKeyHeader makes a POST safe to retry: a retry with the same key
// and body gets the original outcome back (docs/durability.md).
const IdempotencyKeyHeader = "Idempotency-Key"

// TurnIDHeader carries the id of the turn a request started, in every
// response mode of every door.
const TurnIDHeader = "Aapd-Turn-Id"

// ReplayedHeader is set on a response that replays an earlier request's.
const ReplayedHeader = "Idempotent-Replayed"

// idempotencyKey returns the request's key, if any, checking its form.
func idempotencyKey(r *http.Request) (string, error) {
	key := r.Header.Get(IdempotencyKeyHeader)
	if key == "" {
		return "", nil
	}
	if len(key) > 255 {
		return "", probInvalid.with("the %s header is longer than 255 characters", IdempotencyKeyHeader)
	}
	for _, c := range key {
		if c < 0x20 || c > 0x7e {
			return "", probInvalid.with("the %s header must be printable ASCII", IdempotencyKeyHeader)
		}
	}
	return key, nil
}

// requestHash identifies a request for idempotency: its method, path and
// body, with the body's insignificant whitespace removed so that a client
// re-encoding the same JSON still matches.
func requestHash(r *http.Request, body []byte) []byte {
	var compact bytes.Buffer
	if json.Compact(&compact, body) != nil {
		compact.Reset()
		compact.Write(body)
	}
	h := sha256.New()
	h.Write([]byte(r.Method + " " + r.URL.Path + "\n"))
	h.Write(compact.Bytes())
	return h.Sum(nil)
}
