package logctx_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"testing"

	"github.com/aapd/aapd/logctx"
)

func TestHandlerAddsTheContextsFields(t *testing.T) {
	var buf bytes.Buffer
	log := logctx.Wrap(logctx.Wrap(slog.New(slog.NewJSONHandler(&buf, nil))))
	f := logctx.New("req-1")
	ctx := logctx.NewContext(context.Background(), f)
	f.SetTenant("ten_1")
	f.SetSession("sess_1")
	log.With("k", "v").InfoContext(ctx, "one")
	f.SetTurn("turn_1")
	log.InfoContext(ctx, "two")
	log.InfoContext(context.Background(), "three")

	want := []map[string]string{
		{"msg": "one", "request_id": "req-1", "tenant": "ten_1", "session": "sess_1", "k": "v"},
		{"msg": "two", "request_id": "req-1", "tenant": "ten_1", "session": "sess_1", "turn": "turn_1"},
		{"msg": "three"},
	}
	dec := json.NewDecoder(&buf)
	for i, w := range want {
		var line map[string]any
		if err := dec.Decode(&line); err != nil {
			t.Fatalf("line %d: %v", i, err)
		}
		for k, v := range w {
			if line[k] != v {
				t.Errorf("line %d: %s = %v, want %q", i, k, line[k], v)
			}
		}
		for _, k := range []string{"request_id", "tenant", "session", "turn"} {
			if _, ok := w[k]; !ok && line[k] != nil {
				t.Errorf("line %d has %s = %v", i, k, line[k])
			}
		}
	}
	var nilFields *logctx.Fields
	nilFields.SetTurn("x") // no panic
}
