package agents

import (
	"context"
	"errors"
	"strings"
	"unicode/utf8"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/store"
)

// modelError is a failure of a model call: what its Model returned. Model
// packages scrub API keys from their errors (agents/openai), so its text
// may be shown to the client.
type modelError struct{ err error }

func (e *modelError) Error() string { return "model: " + e.err.Error() }
func (e *modelError) Unwrap() error { return e.err }

// maxErrorMessage bounds the message of a TurnError.
const maxErrorMessage = 300

// turnError says why a turn that stopped with stop reason "error" failed,
// in words a client may read: a stable type and a message that holds no
// SQL, no stack and no secret. err is the turn's error (nil when the model
// itself stopped with "error"); cause is its context's cause.
func turnError(status store.TurnStatus, cause, err error) *aap.TurnError {
	var me *modelError
	switch {
	case status == store.TurnInterrupted && errors.Is(cause, ErrShutdown):
		return &aap.TurnError{Type: aap.TurnErrorInterrupted, Message: "the server shut down before the turn finished"}
	case status == store.TurnInterrupted:
		return &aap.TurnError{Type: aap.TurnErrorInterrupted, Message: "the turn lost its session (it was deleted, or taken over after the turn stopped answering)"}
	case err == nil:
		return &aap.TurnError{Type: aap.TurnErrorModel, Message: "the model stopped with an error"}
	case errors.Is(err, errStepLimit):
		return &aap.TurnError{Type: aap.TurnErrorStepLimit, Message: errStepLimit.Error()}
	case errors.As(err, &me) && errors.Is(err, context.DeadlineExceeded):
		return &aap.TurnError{Type: aap.TurnErrorModel, Message: "the model did not answer in time"}
	case errors.As(err, &me):
		return &aap.TurnError{Type: aap.TurnErrorModel, Message: clip("the model failed: " + me.err.Error())}
	case errors.Is(err, store.ErrUnavailable), errors.Is(err, store.ErrOutcomeUnknown):
		return &aap.TurnError{Type: aap.TurnErrorStorage, Message: "the database was unavailable for too long: what the turn had committed before is kept"}
	}
	return &aap.TurnError{Type: aap.TurnErrorInternal, Message: "the turn failed; the server's log has the details"}
}

// clip cuts a message to maxErrorMessage bytes, on a character boundary.
func clip(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= maxErrorMessage {
		return s
	}
	cut := maxErrorMessage
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
