package openai

import (
	"context"
	"errors"
	"net/http"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/agents"
	"github.com/aapd/aapd/httpapi"
	"github.com/aapd/aapd/store"
)

// streamResponse writes a started turn's response as Server-Sent Events
// (stream.go) until the turn ends. A client that goes away leaves the
// turn running: its response is kept, and GET /responses/{id} reads it.
func (d *Door) streamResponse(w http.ResponseWriter, r *http.Request, h *agents.Handle, sess store.Session, in *turnInput) error {
	resp := newResponse(sess.ID, h.Turn, in.agent.Info.Name)
	in.describe(resp)
	tr := newTranslator(withTools(sess, sess.ClientTools), in.agent)
	st := newStreamer(resp, tr, h.NextSeq)
	out, ctx, done := d.edge.OpenStream(w, r)
	defer done()
	if d.write(out, st.start()) != nil {
		return nil
	}
	return d.follow(ctx, out, st, h.Events, 0, func(ctx context.Context) (*Response, error) {
		return d.respond(ctx, h, sess, in)
	})
}

// follow translates a turn's events from position pos until its
// turn_stop, then writes the stream's last event with the response final
// returns.
func (d *Door) follow(ctx context.Context, out *httpapi.SSE, st *streamer, src agents.EventSource, pos int,
	final func(context.Context) (*Response, error)) error {
	for {
		readCtx, cancel := context.WithTimeout(ctx, d.edge.KeepAlive())
		events, ended, err := src.Read(readCtx, pos)
		quiet := errors.Is(readCtx.Err(), context.DeadlineExceeded)
		cancel()
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil && quiet:
			if out.Comment("keep-alive") != nil {
				return nil
			}
			continue
		case err != nil:
			d.edge.Logger().WarnContext(ctx, "OpenAI stream: reading the turn's events failed", "at_event", pos, "err", err)
			return nil
		}
		var batch []streamEvent
		for _, e := range events {
			pos++
			if e.Type != aap.EventTurnStop {
				batch = append(batch, st.event(e)...)
			}
		}
		if d.write(out, st.keep(batch)) != nil {
			return nil
		}
		if ended {
			resp, err := final(ctx)
			if err != nil {
				d.edge.Logger().WarnContext(ctx, "OpenAI stream: reading the turn's end failed", "err", err)
				return nil
			}
			_ = d.write(out, st.keep(st.end(resp)))
			return nil
		}
	}
}

// write sends events, named by their types, in one write and one flush.
func (d *Door) write(out *httpapi.SSE, events []streamEvent) error {
	if len(events) == 0 {
		return nil
	}
	var (
		buf = make([]byte, 0, 512*len(events))
		err error
	)
	for _, e := range events {
		buf = append(append(append(buf, "event: "...), e["type"].(string)...), "\ndata: "...)
		if buf, err = encode(buf, e); err != nil {
			return err
		}
		buf = append(buf, "\n\n"...)
	}
	if err := out.Raw(buf); err != nil {
		return err
	}
	return out.Flush()
}

// withTools is the session with the client tools a turn runs with.
func withTools(sess store.Session, tools []aap.ToolSpec) store.Session {
	sess.ClientTools, sess.Pending = tools, nil
	return sess
}
