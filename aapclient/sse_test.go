package aapclient

import (
	"errors"
	"io"
	"strings"
	"testing"
)

func TestSSEReader(t *testing.T) {
	in := ": keep-alive\n\n" +
		"id: 1\r\nevent: turn_start\r\ndata: {}\r\n\r\n" +
		"id: 2\nevent: text_delta\ndata:{\"delta\":\ndata: \"a\"}\n\n" +
		"data: untyped\n\n" +
		"id: 4\nevent: text_delta\ndata: {\"delta\":\"cut" // no end: dropped
	r := newSSEReader(strings.NewReader(in))
	want := []sseEvent{
		{typ: "turn_start", id: 1, data: []byte("{}")},
		{typ: "text_delta", id: 2, data: []byte("{\"delta\":\n\"a\"}")},
		{typ: "message", id: 0, data: []byte("untyped")},
	}
	for i, w := range want {
		got, err := r.next()
		if err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		if got.typ != w.typ || got.id != w.id || string(got.data) != string(w.data) {
			t.Fatalf("event %d = %q %d %q, want %q %d %q", i, got.typ, got.id, got.data, w.typ, w.id, w.data)
		}
	}
	if _, err := r.next(); !errors.Is(err, io.EOF) {
		t.Fatalf("a cut event: %v, want io.EOF and no event", err)
	}
}
