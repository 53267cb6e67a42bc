package openai

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"
)

// errIncomplete is a stream that ended, without an error, before the
// provider said why it stopped (no finish_reason).
var errIncomplete = errors.New("the stream ended before the answer was complete")

// StatusError is an HTTP error response from the provider. Message is the
// provider's own explanation when it gave one (such as "model not found"),
// with the API key removed should the provider have echoed it.
type StatusError struct {
	StatusCode int
	Message    string
	// retryAfter is the wait the provider asked for (Retry-After or
	// retry-after-ms); hasRetryAfter tells a 0 from no header.
	retryAfter    time.Duration
	hasRetryAfter bool
}

func (e *StatusError) Error() string {
	s := fmt.Sprintf("HTTP %d %s", e.StatusCode, http.StatusText(e.StatusCode))
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// StreamError is an error the provider reported inside a stream that had
// started (an SSE event carrying an "error" object).
type StreamError struct {
	Message string
}

func (e *StreamError) Error() string {
	return "the provider reported an error mid-stream: " + e.Message
}

// maxErrorBody bounds how much of an error response is read.
const maxErrorBody = 64 << 10

// captureStatus turns an HTTP error response into a *StatusError before
// the SDK sees it. The SDK would expect OpenAI's {"error": {...}} body;
// compatible servers also answer with {"message": ...}, {"detail": ...},
// {"error": "text"} or a proxy's HTML page, and the status code must
// survive all of them for retries to work.
func captureStatus(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
	res, err := next(req)
	if err != nil || res == nil || res.StatusCode < 400 {
		return res, err
	}
	body, _ := io.ReadAll(io.LimitReader(res.Body, maxErrorBody))
	_ = res.Body.Close()
	e := &StatusError{StatusCode: res.StatusCode, Message: errorMessage(body)}
	e.retryAfter, e.hasRetryAfter = parseRetryAfter(res.Header, time.Now())
	// The request's own key is what a careless server might echo.
	if key, ok := strings.CutPrefix(req.Header.Get("Authorization"), "Bearer "); ok {
		e.Message = redact(e.Message, key)
	}
	return nil, e
}

// errorMessage extracts a provider's explanation from an error body.
func errorMessage(body []byte) string {
	var v struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
		Detail  json.RawMessage `json:"detail"`
	}
	if json.Unmarshal(body, &v) == nil {
		var s string
		var obj struct {
			Message string `json:"message"`
		}
		switch {
		case json.Unmarshal(v.Error, &obj) == nil && obj.Message != "":
			return shorten(obj.Message)
		case json.Unmarshal(v.Error, &s) == nil && s != "":
			return shorten(s)
		case v.Message != "":
			return shorten(v.Message)
		case json.Unmarshal(v.Detail, &s) == nil && s != "":
			return shorten(s)
		case len(v.Detail) > 0:
			return shorten(string(v.Detail))
		}
	}
	return shorten(strings.Join(strings.Fields(string(body)), " "))
}

// shorten keeps error texts readable in logs and events.
func shorten(s string) string {
	const limit = 500
	if len(s) <= limit {
		return s
	}
	cut := limit
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// describeProvider replaces the SDK's stream error, whose text is the raw
// event JSON, with the provider's message.
func describeProvider(err error) error {
	var se *ssestream.StreamError
	if errors.As(err, &se) {
		return &StreamError{Message: errorMessage(se.Event.Data)}
	}
	return err
}

// scrubbed is an error whose text had API keys removed. It still unwraps
// to the original so errors.Is and errors.As keep working.
type scrubbed struct {
	msg string
	err error
}

func (e *scrubbed) Error() string { return e.msg }
func (e *scrubbed) Unwrap() error { return e.err }

// scrub removes every non-empty key from err's text: transport errors
// quote URLs and providers quote requests, and neither may leak a key into
// logs or client-visible errors.
func scrub(err error, keys ...string) error {
	msg := err.Error()
	clean := msg
	for _, k := range keys {
		clean = redact(clean, k)
	}
	if clean == msg {
		return err
	}
	return &scrubbed{msg: clean, err: err}
}

func redact(s, key string) string {
	if key == "" {
		return s
	}
	return strings.ReplaceAll(s, key, "[redacted]")
}
