package httpapi

import (
	"context"
	"fmt"
	"net/http"

	"github.com/aapd/aapd/agents"
	v1 "github.com/aapd/aapd/httpapi/v1"
	"github.com/aapd/aapd/logctx"
)

// doorHost lends a front door in a sub-package (httpapi/v1) this server's
// plumbing: authentication, scopes, rate limits, body limits, problem
// responses and turn streams, so that every door has AAP v3's and none
// keeps a copy.
type doorHost struct{ s *Server }

var _ v1.Host = doorHost{}

func (h doorHost) Meta(fn v1.HandlerFunc) http.Handler {
	meta := h.s.handle(handlerFunc(fn))
	if h.s.cfg.MetaRequiresAuth {
		meta = h.s.authenticate(meta)
	}
	return meta
}

func (h doorHost) Guard(scope string, fn v1.HandlerFunc) http.Handler {
	return h.s.authenticate(h.s.limitRate(h.s.need(scope, handlerFunc(fn))))
}

func (h doorHost) ReadBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	return h.s.readBody(w, r)
}

func (doorHost) Decode(body []byte, v any) error { return decodeJSON(body, v) }

func (doorHost) Idempotency(r *http.Request, body []byte) (string, []byte, error) {
	key, err := idempotencyKey(r)
	if err != nil {
		return "", nil, err
	}
	return key, requestHash(r, body), nil
}

func (doorHost) RequestID(ctx context.Context) string { return requestIDFrom(ctx) }

func (doorHost) Started(w http.ResponseWriter, r *http.Request, t *agents.Handle) {
	logctx.FromContext(r.Context()).SetTurn(t.Turn.ID)
	w.Header().Set(TurnIDHeader, t.Turn.ID)
	if t.Replay {
		w.Header().Set(ReplayedHeader, "true")
	}
}

func (h doorHost) Stream(w http.ResponseWriter, r *http.Request, src agents.EventSource, prelude *v1.Prelude) error {
	if prelude != nil {
		w = &preludeWriter{ResponseWriter: w, prelude: fmt.Appendf(nil, "event: %s\ndata: %s\n\n", prelude.Event, prelude.Data)}
	}
	return h.s.streamEvents(w, r, src, 0, false)
}

// preludeWriter writes an event before the stream's own, right after the
// stream's head, where streamEvents would write its first.
type preludeWriter struct {
	http.ResponseWriter
	prelude []byte
}

func (p *preludeWriter) WriteHeader(status int) {
	p.ResponseWriter.WriteHeader(status)
	if p.prelude != nil {
		_, _ = p.ResponseWriter.Write(p.prelude)
		p.prelude = nil
	}
}

// Unwrap lets http.ResponseController flush the stream.
func (p *preludeWriter) Unwrap() http.ResponseWriter { return p.ResponseWriter }
