package aapclient

import (
	"bufio"
	"bytes"
	"io"
	"strconv"
	"strings"
)

// sseReader reads Server-Sent Events as the HTML standard defines them
// (https://html.spec.whatwg.org/multipage/server-sent-events.html), keeping
// only what AAP uses: event, data and id. Comments (keep-alives) are
// skipped; an event cut short by the end of the body is dropped, never
// returned half-read.
type sseReader struct {
	r *bufio.Reader
}

func newSSEReader(r io.Reader) *sseReader { return &sseReader{r: bufio.NewReaderSize(r, 16<<10)} }

// sseEvent is one dispatched event. id is its numeric id, 0 when it had
// none or one that is not a number (a turn's events are numbered; the
// session log's are named by cursors, which rawID holds).
type sseEvent struct {
	typ   string
	id    int
	rawID string
	data  []byte
}

// next returns the next event. At the end of the body it returns io.EOF,
// or the error that cut the body short.
func (s *sseReader) next() (sseEvent, error) {
	var (
		ev      sseEvent
		data    bytes.Buffer
		hasData bool
	)
	for {
		line, err := s.r.ReadString('\n')
		if err != nil {
			// A line without its end is part of an event that never
			// completed: drop it with the event.
			return sseEvent{}, err
		}
		line = strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
		if line == "" {
			if !hasData {
				ev = sseEvent{}
				continue
			}
			ev.data = bytes.TrimSuffix(data.Bytes(), []byte("\n"))
			if ev.typ == "" {
				ev.typ = "message"
			}
			return ev, nil
		}
		if line[0] == ':' {
			continue
		}
		name, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch name {
		case "event":
			ev.typ = value
		case "data":
			data.WriteString(value)
			data.WriteByte('\n')
			hasData = true
		case "id":
			ev.rawID = value
			if n, err := strconv.Atoi(value); err == nil && n > 0 {
				ev.id = n
			}
		}
	}
}
