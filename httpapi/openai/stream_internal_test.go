package openai

import (
	"encoding/json"
	"testing"
)

// An event's data is what json.Marshal writes for it, byte for byte:
// encode only writes the common members without reflection.
func FuzzEncodeWritesWhatJSONMarshalWrites(f *testing.F) {
	for _, s := range []string{"", "hello there", `"quoted" \ back`, "<b>&</b>", "tab\tnl\nret\r\x01\x1f", "é日本🙂",
		"bad \xff utf-8", "line\u2028sep\u2029", "\x7f"} {
		f.Add(s, 3)
	}
	f.Fuzz(func(t *testing.T, text string, n int) {
		text2 := "x"
		events := []streamEvent{
			{"type": "response.output_text.delta", "sequence_number": n, "item_id": text, "output_index": 0, "content_index": 0,
				"delta": text, "logprobs": []any{}},
			{"type": "response.output_item.added", "sequence_number": n, "output_index": n,
				"item": Item{ID: "msg_1", Type: typeMessage, Status: "in_progress", Role: "assistant", Content: []Part{{Type: "output_text", Text: &text}}}},
			{"type": "response.created", "sequence_number": 0, "response": json.RawMessage(`{"id":"resp_1","output":[]}`)},
			{"type": "response.content_part.added", "part": Part{Type: "output_text", Text: &text2}, "sequence_number": 1},
		}
		for _, e := range events {
			got, err := encode(nil, e)
			if err != nil {
				t.Fatal(err)
			}
			want, err := json.Marshal(e)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != string(want) {
				t.Fatalf("encode %q\n json.Marshal %q", got, want)
			}
		}
	})
}
