package store

import (
	"reflect"
	"strings"
	"testing"

	"github.com/aapd/aapd/aap"
)

func TestEventLogFoldsDeltasAndGivesEveryEventBackExactly(t *testing.T) {
	calc := aap.ToolCall{ToolCallID: "c1", Name: "calculator", Input: []byte(`{"expression":"6*7"}`)}
	events := []aap.Event{
		aap.TurnStart(),
		{Type: aap.EventThinkingDelta, Delta: "hmm "},
		{Type: aap.EventThinkingDelta, Delta: "ok"},
		{Type: aap.EventTextDelta, Delta: "Héllo"},
		{Type: aap.EventTextDelta, Delta: ""},
		{Type: aap.EventTextDelta, Delta: " wörld \"quoted\" \u0000 \\"},
		aap.ToolCallEvent(calc),
		aap.ToolResultEvent("c1", aap.TextContent("42")),
		{Type: aap.EventTextDelta, Delta: "again"},
		{Type: aap.EventText, Text: "whole"},
		aap.TurnStop(aap.StopEndTurn),
	}
	data, err := encodeEvents(events)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeEvents(nil, []byte(data))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(events) {
		t.Fatalf("decoded %d events, want %d", len(got), len(events))
	}
	for i := range events {
		want, _ := events[i].MarshalJSON()
		have, _ := got[i].MarshalJSON()
		if got[i].Type != events[i].Type || string(want) != string(have) {
			t.Errorf("event %d = %s %s, want %s %s", i+1, got[i].Type, have, events[i].Type, want)
		}
	}
	// Runs are one entry each: 2 thinking deltas, 3 text deltas.
	if n := strings.Count(data, `"t":"text_delta"`); n != 2 {
		t.Errorf("%d text_delta entries, want 2 (one run, then one more after the tool): %s", n, data)
	}
}

func TestEventLogRefusesARunShorterThanItsDeltas(t *testing.T) {
	if _, err := decodeEvents(nil, []byte(`[{"t":"text_delta","r":"ab","n":[1,5]}]`)); err == nil {
		t.Error("a run claiming more bytes than it has was decoded")
	}
}

func TestPgTextMakesAnyStringStorable(t *testing.T) {
	for in, want := range map[string]string{
		"plain":        "plain",
		"a\x00b":       "a\uFFFDb",
		"bad \xff utf": "bad \uFFFD utf",
	} {
		if got := PgText(in); got != want {
			t.Errorf("PgText(%q) = %q, want %q", in, got, want)
		}
	}
	if !reflect.DeepEqual(PgText(""), "") {
		t.Error("empty text changed")
	}
}
