package agui

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/agents"
	"github.com/aapd/aapd/store"
)

// abortWait bounds how long a run whose client went away waits for its
// cancelled turn to end (it ends at once unless its process is stuck).
const abortWait = 10 * time.Second

// stream writes the run's events until its turn ends or its client goes
// away. A client that goes away aborted the run (HttpAgent.abortRun): the
// turn is cancelled, as AAP's cancel does — the model stops, what it
// produced is kept, the session is left consistent and free for the
// thread's next run.
func (h *Handler) stream(w http.ResponseWriter, r *http.Request, in RunAgentInput, sess store.Session, handle *agents.Handle) error {
	ended := make(chan struct{})
	h.live.Store(handle.Turn.ID, ended)
	defer func() {
		h.live.Delete(handle.Turn.ID)
		close(ended)
	}()

	w.Header().Set(SessionIDHeader, sess.ID)
	w.Header().Set(TurnIDHeader, handle.Turn.ID)
	out := startSSE(w)
	tr := newTranslator(in, sess.ID, handle.Turn.ID)
	if out.write(tr.start(in.ParentRunID)) != nil {
		h.abort(handle)
		return nil
	}
	ctx := r.Context()
	var (
		pos  int
		stop aap.StopReason
	)
	for {
		readCtx, cancelRead := context.WithTimeout(ctx, h.edge.KeepAlive())
		events, done, err := handle.Events.Read(readCtx, pos)
		quiet := errors.Is(readCtx.Err(), context.DeadlineExceeded)
		cancelRead()
		switch {
		case ctx.Err() != nil:
			h.abort(handle)
			return nil
		case err != nil && quiet:
			if out.comment("keep-alive") != nil {
				h.abort(handle)
				return nil
			}
			continue
		case errors.Is(err, agents.ErrTurnGone):
			_ = out.write(append(tr.close(), runError(CodeSessionDeleted, "the thread's session was deleted during the run")))
			return nil
		case err != nil:
			h.edge.Logger().WarnContext(ctx, "AG-UI run: reading the turn's events failed", "at_event", pos, "err", err)
			_ = out.write(append(tr.close(), runError(CodeStreamFailed, "the run's events could not be read to their end; "+
				"the turn goes on, and its messages reach the thread's session")))
			return nil
		}
		var batch []Event
		for _, e := range events {
			pos++
			if e.Type == aap.EventTurnStop {
				stop = e.StopReason
			}
			batch = append(batch, tr.translate(e)...)
		}
		if out.write(batch) != nil {
			h.abort(handle)
			return nil
		}
		if done {
			break
		}
	}
	// The turn's record is written before its turn_stop is shown: it says
	// whether the turn was cancelled, and why it failed.
	rec, err := h.cfg.Store.TurnGet(ctx, handle.Turn.TenantID, handle.Turn.SessionID, handle.Turn.ID)
	if err != nil {
		h.edge.Logger().WarnContext(ctx, "AG-UI run: reading the turn's record failed", "err", err)
	}
	_ = out.write(tr.finish(stop, rec))
	return nil
}

// abort cancels the run's turn, its client gone, and waits for the turn to
// end so that the thread's next run finds its session free.
func (h *Handler) abort(handle *agents.Handle) {
	h.cfg.Runner.Cancel(handle.Turn.ID)
	ctx, cancel := context.WithTimeout(context.Background(), abortWait)
	defer cancel()
	for pos := 0; ; {
		events, done, err := handle.Events.Read(ctx, pos)
		if err != nil || done {
			return
		}
		pos += len(events)
	}
}

// sseWriter writes AG-UI events as Server-Sent Events, one data line each,
// flushed as they come.
type sseWriter struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

func startSSE(w http.ResponseWriter) *sseWriter {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	s := &sseWriter{w: w, rc: http.NewResponseController(w)}
	_ = s.rc.Flush()
	return s
}

// write writes events and flushes them.
func (s *sseWriter) write(events []Event) error {
	for _, e := range events {
		data, err := json.Marshal(e)
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintf(s.w, "data: %s\n\n", data); err != nil {
			return err
		}
	}
	return s.rc.Flush()
}

func (s *sseWriter) comment(text string) error {
	if _, err := fmt.Fprintf(s.w, ": %s\n\n", text); err != nil {
		return err
	}
	return s.rc.Flush()
}
