package v3

import (
	"net/http"
	"strings"

	"github.com/aapd/aapd/agents"
	"github.com/aapd/aapd/httpapi"
)

// Background turns (docs/background.md): POST /sessions/:id/turns with
// Prefer: respond-async (RFC 7240) answers 202 at once with the turn's
// record, which the client polls (GET …/turns/:turnId) or follows
// (GET …/turns/:turnId/events); the turn runs as a streamed one would.

// PreferenceAppliedHeader says which preferences of the request the
// response honoured (RFC 7240 section 3).
const PreferenceAppliedHeader = "Preference-Applied"

// preferAsync is the preference that asks for a background turn.
const preferAsync = "respond-async"

// respondAsync reports whether the request prefers an asynchronous answer:
// a Prefer header (any of them) lists respond-async, in any case, with or
// without parameters.
func respondAsync(r *http.Request) bool {
	for _, header := range r.Header.Values("Prefer") {
		for _, pref := range strings.Split(header, ",") {
			token, _, _ := strings.Cut(pref, ";")
			token, _, _ = strings.Cut(token, "=")
			if strings.EqualFold(strings.TrimSpace(token), preferAsync) {
				return true
			}
		}
	}
	return false
}

// startBackground starts p as a background turn and answers 202 with its
// record (running, or queued when every worker is busy), Location naming
// it. A retry with the same Idempotency-Key answers the same, with the
// record of the turn the first request started, as it is now.
func (d *Door) startBackground(w http.ResponseWriter, r *http.Request, p agents.StartParams) error {
	h, err := d.cfg.Runner.StartBackground(r.Context(), p)
	if err != nil {
		return err
	}
	d.edge.Started(w, r, h)
	w.Header().Set(PreferenceAppliedHeader, preferAsync)
	w.Header().Set("Location", "/sessions/"+h.Turn.SessionID+"/turns/"+h.Turn.ID)
	return httpapi.WriteJSON(w, http.StatusAccepted, turnInfo(h.Turn))
}
