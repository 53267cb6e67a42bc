package sandboxagent

import (
	"encoding/json"
	"net/http"

	"github.com/aapd/aapd/httpapi"
)

// The seed's error vocabulary (ErrorType): a ProblemDetails' type is
// "urn:sandbox-agent:error:" and one of these, with its title.
const (
	errInvalidRequest   = "invalid_request"
	errUnsupportedAgent = "unsupported_agent"
	errNotInstalled     = "agent_not_installed"
	errTokenInvalid     = "token_invalid"
	errPermissionDenied = "permission_denied"
	errSessionNotFound  = "session_not_found"
	errSessionExists    = "session_already_exists"
	errModeNotSupported = "mode_not_supported"
	errStreamError      = "stream_error"
	errTimeout          = "timeout"
)

// errorTitles are the seed's titles of its error types.
var errorTitles = map[string]string{
	errInvalidRequest:   "Invalid Request",
	errUnsupportedAgent: "Unsupported Agent",
	errNotInstalled:     "Agent Not Installed",
	errTokenInvalid:     "Token Invalid",
	errPermissionDenied: "Permission Denied",
	errSessionNotFound:  "Session Not Found",
	errSessionExists:    "Session Already Exists",
	errModeNotSupported: "Mode Not Supported",
	errStreamError:      "Stream Error",
	errTimeout:          "Timeout",
}

// Slugs of the problems this door names itself (httpapi.NewProblem), one
// per error type of the seed that aapd's own kinds do not cover.
const (
	slugUnsupportedAgent = "sandbox-agent/unsupported-agent"
	slugNotInstalled     = "sandbox-agent/agent-not-installed"
	slugSessionExists    = "sandbox-agent/session-already-exists"
	slugModeNotSupported = "sandbox-agent/mode-not-supported"
)

// errorTypes maps the slug of every refusal (the edge's, docs/errors.md,
// and this door's) to the seed's error type; a slug missing here is
// invalid_request for a 4xx and stream_error for a 5xx. The status stays
// the edge's: 409 for a running turn or an ended session, 429 for a limit,
// 503 for the database.
var errorTypes = map[string]string{
	"invalid-request":        errInvalidRequest,
	"method-not-allowed":     errInvalidRequest,
	"payload-too-large":      errInvalidRequest,
	"request-timeout":        errInvalidRequest,
	"idempotency-key-reused": errInvalidRequest,
	"turn-running":           errInvalidRequest,
	"session-ended":          errInvalidRequest,
	"unauthorized":           errTokenInvalid,
	"insufficient-scope":     errPermissionDenied,
	"cors-refused":           errPermissionDenied,
	"not-found":              errSessionNotFound,
	"rate-limited":           errTimeout,
	"auth-throttled":         errTimeout,
	"running-turns-limit":    errTimeout,
	"fair-share":             errTimeout,
	"overloaded":             errTimeout,
	"unavailable":            errTimeout,
	"internal":               errStreamError,
	slugUnsupportedAgent:     errUnsupportedAgent,
	slugNotInstalled:         errNotInstalled,
	slugSessionExists:        errSessionExists,
	slugModeNotSupported:     errModeNotSupported,
}

// problemDetails is the seed's ProblemDetails, with aapd's members as its
// extensions (the schema allows any): the request id, the offending field,
// the running turn of a 409, and aapd's own problem type.
type problemDetails struct {
	Type      string `json:"type"`
	Title     string `json:"title"`
	Status    int    `json:"status"`
	Detail    string `json:"detail,omitempty"`
	Instance  string `json:"instance,omitempty"`
	RequestID string `json:"requestId,omitempty"`
	Field     string `json:"field,omitempty"`
	TurnID    string `json:"turnId,omitempty"`
	AapdType  string `json:"aapdType"`
}

// writeProblem is the door's httpapi.ProblemWriter: every refusal, the
// edge's included, as the seed's ProblemDetails (application/json, as the
// seed's document and its server have it).
func writeProblem(w http.ResponseWriter, _ *http.Request, p *httpapi.Problem) {
	typ, ok := errorTypes[p.Slug()]
	if !ok {
		typ = errInvalidRequest
		if p.Status >= 500 {
			typ = errStreamError
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(p.Status)
	_ = json.NewEncoder(w).Encode(problemDetails{
		Type: "urn:sandbox-agent:error:" + typ, Title: errorTitles[typ], Status: p.Status, Detail: p.Detail,
		Instance: p.Instance, RequestID: p.RequestID, Field: p.Field, TurnID: p.TurnID, AapdType: p.Type,
	})
}

// problem is a refusal of this door's own, of one of the seed's error types.
func problem(status int, slug, format string, args ...any) *httpapi.Problem {
	return httpapi.NewProblem(status, slug, errorTitles[errorTypes[slug]], format, args...)
}
