package openai

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/aapd/aapd/httpapi"
)

// apiError is the body of every refusal: OpenAI's error object.
type apiError struct {
	Error errorObject `json:"error"`
}

type errorObject struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

// OpenAI's error types.
const (
	errInvalidRequest = "invalid_request_error"
	errServer         = "server_error"
	errRateLimit      = "rate_limit_error"
)

// ShouldRetryHeader tells the official SDKs whether to retry a refusal:
// they retry 408, 409, 429 and 5xx unless it says false.
const ShouldRetryHeader = "X-Should-Retry"

// Slugs of the refusals this door names itself (docs/errors.md).
const (
	slugUnsupported = "openai/unsupported"
	slugNotLatest   = "openai/not-latest"
	slugUnknownItem = "openai/item-not-found"
)

// codes maps the slug of a refusal (the edge's, docs/errors.md, and this
// door's) to OpenAI's error code; a slug missing here has none.
var codes = map[string]string{
	"unauthorized":           "invalid_api_key",
	"insufficient-scope":     "insufficient_permissions",
	"cors-refused":           "insufficient_permissions",
	"not-found":              "not_found",
	"turn-running":           "conversation_locked",
	"session-ended":          "conversation_ended",
	"compaction-conflict":    "conversation_locked",
	"idempotency-key-reused": "idempotency_key_reused",
	"payload-too-large":      "request_too_large",
	"rate-limited":           "rate_limit_exceeded",
	"auth-throttled":         "rate_limit_exceeded",
	"running-turns-limit":    "rate_limit_exceeded",
	"fair-share":             "rate_limit_exceeded",
	"queue-full":             "rate_limit_exceeded",
	"overloaded":             "server_overloaded",
	"unavailable":            "server_unavailable",
	"internal":               "server_error",
	slugUnsupported:          "unsupported_value",
	slugNotLatest:            "previous_response_not_latest",
	slugUnknownItem:          "not_found",
	"openai/model-not-found": "model_not_found",
}

// retryable are the refusals a retry may cure: everything else is sent
// with X-Should-Retry: false, so the SDKs do not send it again — a 409
// for a running turn among them, which the SDKs would otherwise retry at
// once (the client waits for the turn, then sends again).
var retryable = map[string]bool{
	"request-timeout":     true,
	"rate-limited":        true,
	"auth-throttled":      true,
	"running-turns-limit": true,
	"fair-share":          true,
	"queue-full":          true,
	"overloaded":          true,
	"unavailable":         true,
	"internal":            true,
}

// writeError is the door's httpapi.ProblemWriter: every refusal, the
// edge's included, in OpenAI's error shape with the status the edge chose.
// The request id is sent in X-Request-Id, as the SDKs read it.
func writeError(w http.ResponseWriter, _ *http.Request, p *httpapi.Problem) {
	obj := errorObject{Message: p.Detail, Type: errInvalidRequest}
	if obj.Message == "" {
		obj.Message = p.Title
	}
	switch {
	case p.Status >= 500:
		obj.Type = errServer
	case p.Status == http.StatusTooManyRequests:
		obj.Type = errRateLimit
	}
	if p.Field != "" {
		obj.Param = &p.Field
	}
	if c, ok := codes[p.Slug()]; ok {
		obj.Code = &c
	}
	if !retryable[p.Slug()] {
		w.Header().Set(ShouldRetryHeader, "false")
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(p.Status)
	_ = json.NewEncoder(w).Encode(apiError{Error: obj})
}

// invalid is a 400 naming the offending parameter.
func invalid(param, format string, args ...any) *httpapi.Problem {
	p := httpapi.NewProblem(http.StatusBadRequest, "invalid-request", "Invalid request", format, args...)
	p.Field = param
	return p
}

// unsupported is a 400 for what aapd cannot do, naming the parameter.
func unsupported(param, format string, args ...any) *httpapi.Problem {
	p := httpapi.NewProblem(http.StatusBadRequest, slugUnsupported, "Unsupported", format, args...)
	p.Field = param
	return p
}

// notFound is a 404 naming the parameter that names nothing.
func notFound(param, format string, args ...any) *httpapi.Problem {
	p := httpapi.NotFound(format, args...)
	p.Field = param
	return p
}

func quoted(s string) string { return fmt.Sprintf("%q", s) }
