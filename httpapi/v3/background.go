package v3

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/aapd/aapd/agents"
	"github.com/aapd/aapd/httpapi"
	"github.com/aapd/aapd/store"
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

// preferWait is the preference with which GET …/turns/:turnId waits for
// the turn's end (RFC 7240 section 4.3: wait=<seconds>).
const preferWait = "wait"

// MaxTurnWait bounds the wait a client may ask of GET …/turns/:turnId.
const MaxTurnWait = 60 * time.Second

// waitPreference returns how long the request prefers to wait for an
// answer (Prefer: wait=N, N whole seconds), bounded by MaxTurnWait (so a
// wait of more seconds than any integer holds is MaxTurnWait too); zero
// when it has no such preference, or one that is not a whole number (RFC
// 7240: a preference not understood is ignored).
func waitPreference(r *http.Request) time.Duration {
	for _, header := range r.Header.Values("Prefer") {
		for _, pref := range strings.Split(header, ",") {
			token, _, _ := strings.Cut(pref, ";")
			name, value, ok := strings.Cut(token, "=")
			if !ok || !strings.EqualFold(strings.TrimSpace(name), preferWait) {
				continue
			}
			n, err := strconv.ParseUint(strings.Trim(strings.TrimSpace(value), `"`), 10, 64)
			switch {
			case errors.Is(err, strconv.ErrRange), err == nil && n > uint64(MaxTurnWait/time.Second):
				return MaxTurnWait
			case err != nil:
				return 0
			}
			return time.Duration(n) * time.Second
		}
	}
	return 0
}

// waitTurnEnd waits up to wait for turn t to end, following its events
// (the live stream of a turn running here, costing no read; else its
// recorded log, polled), and returns its record as it is then: ended, or
// still running or queued when the wait ran out. So a client waiting for
// a background turn asks once (aapclient.WaitTurn), where following the
// events and then reading the record took two requests. A server that
// drains ends the wait where it is, as if it had run out: the client asks
// again, elsewhere, rather than holding the shutdown up for the wait's
// whole length and then being cut.
func (d *Door) waitTurnEnd(ctx context.Context, t store.Turn, wait time.Duration) (store.Turn, error) {
	waitCtx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	go func() {
		select {
		case <-d.edge.StreamsStopped():
			cancel()
		case <-waitCtx.Done():
		}
	}()
	src := d.cfg.Runner.Follow(t.Ref())
	for after := 0; ; {
		events, done, err := src.Read(waitCtx, after)
		if err != nil {
			if waitCtx.Err() == nil || ctx.Err() != nil {
				return store.Turn{}, err
			}
			break // the wait ran out (whatever the read made of it): the record as it is
		}
		after += len(events)
		if done {
			break
		}
	}
	return d.cfg.Store.TurnGet(ctx, t.TenantID, t.SessionID, t.ID)
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
