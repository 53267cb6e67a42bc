package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/agents"
)

// sseWriter writes Server-Sent Events, flushing each batch so the client
// sees every event as soon as it happens.
type sseWriter struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

func startSSE(w http.ResponseWriter) *sseWriter {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // tell nginx-style proxies not to buffer
	w.WriteHeader(http.StatusOK)
	s := &sseWriter{w: w, rc: http.NewResponseController(w)}
	_ = s.rc.Flush()
	return s
}

// event writes one event with its id (its position in the turn's stream).
func (s *sseWriter) event(id int, e aap.Event) error {
	data, err := json.Marshal(e)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(s.w, "id: %d\nevent: %s\ndata: %s\n\n", id, e.Type, data)
	return err
}

func (s *sseWriter) comment(text string) error {
	if _, err := fmt.Fprintf(s.w, ": %s\n\n", text); err != nil {
		return err
	}
	return s.rc.Flush()
}

func (s *sseWriter) flush() error { return s.rc.Flush() }

// streamEvents writes the events of src after position after until the turn
// ends or the client goes away, with a keep-alive comment whenever the turn
// is quiet for KeepAlive. The turn goes on if the client leaves.
func (s *Server) streamEvents(w http.ResponseWriter, r *http.Request, src agents.EventSource, after int) error {
	out := startSSE(w)
	pos := after
	for {
		ctx, cancel := context.WithTimeout(r.Context(), s.cfg.KeepAlive)
		events, done, err := src.Read(ctx, pos)
		cancel()
		if r.Context().Err() != nil {
			return nil // the client left; the turn does not depend on it
		}
		if err != nil {
			if ctx.Err() == nil {
				return err
			}
			if err := out.comment("keep-alive"); err != nil {
				return nil
			}
			continue
		}
		for _, e := range events {
			pos++
			if err := out.event(pos, e); err != nil {
				return nil
			}
		}
		if err := out.flush(); err != nil {
			return nil
		}
		if done {
			return nil
		}
	}
}
