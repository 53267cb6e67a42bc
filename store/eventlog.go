package store

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/aapd/aapd/aap"
)

// The stored form of a turn's events: a JSON array of entries. An entry is
// one event, {"t": type, "d": payload}, or a run of consecutive deltas of
// one kind, {"t": "text_delta", "r": "their text, concatenated", "n": [the
// byte length of each]}. A 300-word answer streamed word by word is one
// entry of about the answer's size instead of 300 rows, and every delta
// can still be given back exactly, with its id, to a client resuming in the
// middle of it.
type logEntry struct {
	T aap.EventType   `json:"t"`
	D json.RawMessage `json:"d,omitempty"`
	R *string         `json:"r,omitempty"`
	N []int           `json:"n,omitempty"`
}

func isDelta(t aap.EventType) bool {
	return t == aap.EventTextDelta || t == aap.EventThinkingDelta
}

// encodeEvents writes events in the stored form.
func encodeEvents(events []aap.Event) (string, error) {
	var (
		entries []logEntry
		run     strings.Builder
		runType aap.EventType
		lens    []int
	)
	endRun := func() {
		if lens != nil {
			text := run.String()
			entries = append(entries, logEntry{T: runType, R: &text, N: lens})
			run.Reset()
			lens = nil
		}
	}
	for i, e := range events {
		if isDelta(e.Type) {
			if e.Type != runType {
				endRun()
				runType = e.Type
			}
			run.WriteString(e.Delta)
			lens = append(lens, len(e.Delta))
			continue
		}
		endRun()
		runType = ""
		d, err := json.Marshal(e)
		if err != nil {
			return "", fmt.Errorf("encode event %d: %w", i+1, err)
		}
		entries = append(entries, logEntry{T: e.Type, D: d})
	}
	endRun()
	b, err := json.Marshal(entries)
	return string(b), err
}

// decodeEvents reads events written by encodeEvents and appends them to dst.
func decodeEvents(dst []aap.Event, data []byte) ([]aap.Event, error) {
	var entries []logEntry
	if err := json.Unmarshal(data, &entries); err != nil {
		return nil, fmt.Errorf("decode event log: %w", err)
	}
	for _, en := range entries {
		if en.R != nil {
			text := *en.R
			for _, n := range en.N {
				if n < 0 || n > len(text) {
					return nil, fmt.Errorf("decode event log: a %s run is shorter than its deltas", en.T)
				}
				dst = append(dst, aap.Event{Type: en.T, Delta: text[:n]})
				text = text[n:]
			}
			continue
		}
		e, err := aap.ParseEvent(en.T, en.D)
		if err != nil {
			return nil, err
		}
		dst = append(dst, e)
	}
	return dst, nil
}
