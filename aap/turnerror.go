package aap

// TurnError says why a turn failed (an aapd extension): turn_stop carries it
// beside stopReason "error", and so do the turn's record and the stream
// "none" response. Type is one of the stable TurnError* values, for
// programs; Message is for people, and never holds secrets or the server's
// internals.
type TurnError struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// Stable TurnError types (docs/protocols.md).
const (
	// TurnErrorModel: the model (its provider) failed or could not be reached.
	TurnErrorModel = "model_error"
	// TurnErrorStepLimit: the agent called its model as often as one turn may.
	TurnErrorStepLimit = "step_limit"
	// TurnErrorInterrupted: the process running the turn stopped (a crash,
	// or a shutdown past its drain timeout), or the turn lost its session.
	TurnErrorInterrupted = "interrupted"
	// TurnErrorStorage: the turn's results could not be written to the
	// database; what was committed before is kept.
	TurnErrorStorage = "storage_error"
	// TurnErrorSessionDeleted: the session was deleted while the turn ran.
	TurnErrorSessionDeleted = "session_deleted"
	// TurnErrorAttemptsExhausted: a background turn's process stopped
	// before it finished as often as a turn may be begun
	// (--turn-max-attempts); what it had committed is kept.
	TurnErrorAttemptsExhausted = "attempts_exhausted"
	// TurnErrorInternal: anything else; the server's log has the details.
	TurnErrorInternal = "internal"
)
