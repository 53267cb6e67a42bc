package openai

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/aapd/aapd/aap"
)

// streamEvent is one event of a streamed response: its type and its
// members, sequence_number among them. No event has a top-level "error"
// member but error events: the Go SDK ends a stream at one, null or not.
type streamEvent map[string]any

// streamer translates a turn's AAP events into the events of a streamed
// response, in the order the official SDKs' stream helpers require:
// response.created and response.in_progress; per item
// output_item.added, its parts' and deltas' events, its .done events and
// output_item.done; response.completed, .failed or .incomplete. Its
// output is a pure function of the turn's events, so a stream resumed
// after a sequence number (starting_after) numbers its events alike.
type streamer struct {
	resp *Response
	n    int // sequence_number of the next event
	// serverTool tells aapd's tools' calls (mcp_call) from the client's
	// functions' (function_call).
	serverTool func(name string) bool
	sessionHex string

	// seq is the seq of the assistant message being streamed, block the
	// index of its block being streamed (-1 before the first); results
	// counts the tool results since it, which precede the next one.
	seq     int64
	block   int
	results int
	// open is the item whose deltas are streaming (a message's text, a
	// reasoning summary), nil between items.
	open *Item
	// calls maps a server tool's call id to its mcp_call's output index.
	calls map[string]int
	// filter, if set, drops the events a resumed stream's client has.
	filter func([]streamEvent) []streamEvent
}

// keep is the events to write of those translated.
func (s *streamer) keep(events []streamEvent) []streamEvent {
	if s.filter == nil {
		return events
	}
	return s.filter(events)
}

func newStreamer(resp *Response, t *translator, nextSeq int64) *streamer {
	return &streamer{resp: resp, serverTool: t.serverTool, sessionHex: t.sessionHex, seq: nextSeq, block: -1, calls: map[string]int{}}
}

func (s *streamer) emit(typ string, members streamEvent) streamEvent {
	members["type"] = typ
	members["sequence_number"] = s.n
	s.n++
	return members
}

// snapshot is the response as an event carries it.
func (s *streamer) snapshot() Response {
	r := *s.resp
	r.Output = append([]Item(nil), s.resp.Output...)
	return r
}

// start is the stream's first events: both carry the response as it
// starts, encoded once.
func (s *streamer) start() []streamEvent {
	var resp any = s.snapshot()
	if b, err := json.Marshal(resp); err == nil {
		resp = json.RawMessage(b)
	}
	return []streamEvent{
		s.emit("response.created", streamEvent{"response": resp}),
		s.emit("response.in_progress", streamEvent{"response": resp}),
	}
}

// nextBlock moves to the next block of the assistant message being
// streamed, or to the next message after tool results.
func (s *streamer) nextBlock() {
	if s.results > 0 {
		s.seq += int64(s.results) + 1
		s.results, s.block = 0, -1
	}
	s.block++
}

// add appends an item to the output and announces it.
func (s *streamer) add(item Item) (int, streamEvent) {
	s.resp.Output = append(s.resp.Output, item)
	i := len(s.resp.Output) - 1
	return i, s.emit("response.output_item.added", streamEvent{"output_index": i, "item": item})
}

// close ends the item whose deltas are streaming.
func (s *streamer) close() []streamEvent {
	o := s.open
	if o == nil {
		return nil
	}
	s.open = nil
	i := len(s.resp.Output) - 1
	var out []streamEvent
	switch o.Type {
	case typeMessage:
		part := o.Content[0]
		out = append(out,
			s.emit("response.output_text.done", streamEvent{"item_id": o.ID, "output_index": i, "content_index": 0, "text": *part.Text, "logprobs": []any{}}),
			s.emit("response.content_part.done", streamEvent{"item_id": o.ID, "output_index": i, "content_index": 0, "part": part}))
	case typeReasoning:
		part := (*o.Summary)[0]
		out = append(out,
			s.emit("response.reasoning_summary_text.done", streamEvent{"item_id": o.ID, "output_index": i, "summary_index": 0, "text": *part.Text}),
			s.emit("response.reasoning_summary_part.done", streamEvent{"item_id": o.ID, "output_index": i, "summary_index": 0, "part": part}))
	}
	o.Status = "completed"
	if o.Type == typeReasoning {
		o.Status = ""
	}
	s.resp.Output[i] = *o
	return append(out, s.emit("response.output_item.done", streamEvent{"output_index": i, "item": *o}))
}

// text streams text or thinking: a delta, or a whole block.
func (s *streamer) text(thinking bool, text string, whole bool) []streamEvent {
	kind := typeMessage
	if thinking {
		kind = typeReasoning
	}
	var out []streamEvent
	if s.open != nil && (s.open.Type != kind || whole) {
		out = s.close()
	}
	if s.open == nil {
		s.nextBlock()
		empty := ""
		var item Item
		if thinking {
			item = Item{ID: itemID(idReasoning, s.sessionHex, s.seq, s.block), Type: typeReasoning, Summary: &[]Part{}}
		} else {
			item = Item{ID: itemID(idMessage, s.sessionHex, s.seq, s.block), Type: typeMessage, Status: "in_progress", Role: "assistant", Content: []Part{}}
		}
		i, added := s.add(item)
		out = append(out, added)
		part := textPart("output_text", empty)
		if thinking {
			part = textPart("summary_text", empty)
			out = append(out, s.emit("response.reasoning_summary_part.added", streamEvent{"item_id": item.ID, "output_index": i, "summary_index": 0, "part": part}))
			item.Summary = &[]Part{part}
		} else {
			out = append(out, s.emit("response.content_part.added", streamEvent{"item_id": item.ID, "output_index": i, "content_index": 0, "part": part}))
			item.Content = []Part{part}
		}
		s.open = &item
	}
	i := len(s.resp.Output) - 1
	if thinking {
		summary := []Part{(*s.open.Summary)[0]}
		summary[0].Text = ptr(*summary[0].Text + text)
		s.open.Summary = &summary
		out = append(out, s.emit("response.reasoning_summary_text.delta", streamEvent{"item_id": s.open.ID, "output_index": i, "summary_index": 0, "delta": text}))
	} else {
		part := s.open.Content[0]
		part.Text = ptr(*part.Text + text)
		s.open.Content = []Part{part}
		out = append(out, s.emit("response.output_text.delta", streamEvent{"item_id": s.open.ID, "output_index": i, "content_index": 0, "delta": text, "logprobs": []any{}}))
	}
	if whole {
		out = append(out, s.close()...)
	}
	return out
}

// event translates one AAP event of the turn.
func (s *streamer) event(e aap.Event) []streamEvent {
	switch e.Type {
	case aap.EventTextDelta:
		return s.text(false, e.Delta, false)
	case aap.EventThinkingDelta:
		return s.text(true, e.Delta, false)
	case aap.EventText:
		return s.text(false, e.Text, true)
	case aap.EventThinking:
		return s.text(true, e.Thinking, true)
	case aap.EventToolCall:
		out := s.close()
		s.nextBlock()
		return append(out, s.call(e.ToolCall)...)
	case aap.EventToolResult:
		out := s.close()
		i, ok := s.calls[e.ToolCallID]
		if !ok {
			return out // a result of a client's function, or aapd's note closing a call
		}
		s.results++
		item := s.resp.Output[i]
		text := e.Content.PlainText()
		if failedResult(text) {
			item.Status, item.Error = "failed", &text
		} else {
			item.Status, item.Output = "completed", &text
		}
		s.resp.Output[i] = item
		return append(out, s.emit("response.output_item.done", streamEvent{"output_index": i, "item": item}))
	}
	return nil
}

// call is a tool call's item: a function_call with its arguments' events,
// or an mcp_call whose output comes with its result.
func (s *streamer) call(c aap.ToolCall) []streamEvent {
	args := string(inputOf(c))
	if !s.serverTool(c.Name) {
		empty := ""
		item := Item{ID: itemID(idCall, s.sessionHex, s.seq, s.block), Type: typeFunctionCall, Status: "in_progress",
			CallID: c.ToolCallID, Name: c.Name, Arguments: &empty}
		i, added := s.add(item)
		item.Status, item.Arguments = "completed", &args
		s.resp.Output[i] = item
		return []streamEvent{added,
			s.emit("response.function_call_arguments.delta", streamEvent{"item_id": item.ID, "output_index": i, "delta": args}),
			s.emit("response.function_call_arguments.done", streamEvent{"item_id": item.ID, "output_index": i, "name": c.Name, "arguments": args}),
			s.emit("response.output_item.done", streamEvent{"output_index": i, "item": item}),
		}
	}
	item := Item{ID: itemID(idMCP, s.sessionHex, s.seq, s.block), Type: typeMCPCall, Status: "in_progress", Name: c.Name,
		Arguments: &args, ServerLabel: ServerLabel}
	i, added := s.add(item)
	s.calls[c.ToolCallID] = i
	return []streamEvent{added,
		s.emit("response.mcp_call_arguments.done", streamEvent{"item_id": item.ID, "output_index": i, "arguments": args}),
	}
}

// end is the stream's last event, with the response as it ended.
func (s *streamer) end(final *Response) []streamEvent {
	out := s.close()
	typ := "response.completed"
	switch final.Status {
	case statusFailed, statusCancelled:
		typ = "response.failed"
	case statusIncomplete:
		typ = "response.incomplete"
	}
	return append(out, s.emit(typ, streamEvent{"response": *final}))
}

// encode appends an event's data to buf: a JSON object of its members
// in the order of their names, as json.Marshal writes a map, with the
// members every delta has (strings, numbers, an empty list, encoded
// JSON) written directly rather than through reflection.
func encode(buf []byte, e streamEvent) ([]byte, error) {
	var names [8]string
	keys := names[:0]
	for k := range e {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	buf = append(buf, '{')
	for i, k := range keys {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = appendString(buf, k)
		buf = append(buf, ':')
		switch v := e[k].(type) {
		case string:
			buf = appendString(buf, v)
		case int:
			buf = strconv.AppendInt(buf, int64(v), 10)
		case json.RawMessage:
			buf = append(buf, v...)
		case []any:
			if len(v) != 0 {
				return nil, fmt.Errorf("encode %s: a list of %d", k, len(v))
			}
			buf = append(buf, "[]"...)
		default:
			b, err := json.Marshal(v)
			if err != nil {
				return nil, fmt.Errorf("encode %s: %w", k, err)
			}
			buf = append(buf, b...)
		}
	}
	return append(buf, '}'), nil
}

// appendString appends s as a JSON string, escaped as encoding/json
// escapes it (HTML's <, > and & included).
func appendString(buf []byte, s string) []byte {
	const hex = "0123456789abcdef"
	buf = append(buf, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			buf = append(buf, s[start:i]...)
			switch c {
			case '"', '\\':
				buf = append(buf, '\\', c)
			case '\n':
				buf = append(buf, '\\', 'n')
			case '\r':
				buf = append(buf, '\\', 'r')
			case '\t':
				buf = append(buf, '\\', 't')
			case '\b':
				buf = append(buf, '\\', 'b')
			case '\f':
				buf = append(buf, '\\', 'f')
			default:
				buf = append(buf, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			buf = append(buf, s[start:i]...)
			buf = append(buf, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			buf = append(buf, s[start:i]...)
			buf = append(buf, '\\', 'u', '2', '0', '2', hex[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	return append(append(buf, s[start:]...), '"')
}
