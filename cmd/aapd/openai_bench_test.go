package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	openaidoor "github.com/aapd/aapd/httpapi/openai"
	"github.com/aapd/aapd/store/storetest"
)

// BenchmarkOpenAITurn measures one echo turn through the OpenAI door
// against the same turn through AAP v3 (docs/benchmarks.md): POST
// /openai/v1/responses on a conversation and POST /sessions/{id}/turns on
// a session, each answered whole ("none") or streamed ("streamed", read to
// its end). The door's cost is its translation: the turn is the same.
func BenchmarkOpenAITurn(b *testing.B) {
	s := startServer(b)
	tn := storetest.NewTenant(b, s.Store)
	c := &client{t: b, base: s.base, key: tn.Key}
	for _, bc := range []struct {
		name, path string
		body       func(sid string) any
	}{
		{"door=aap-v3/stream=none", "/sessions/{id}/turns", func(string) any {
			return map[string]any{"stream": "none", "messages": []any{map[string]any{"role": "user", "content": "hello there"}}}
		}},
		{"door=openai/stream=none", openaidoor.Prefix + "/responses", func(sid string) any {
			return map[string]any{"model": "echo", "conversation": sid, "input": "hello there"}
		}},
		{"door=aap-v3/stream=streamed", "/sessions/{id}/turns", func(string) any {
			return map[string]any{"stream": "delta", "messages": []any{map[string]any{"role": "user", "content": "hello there"}}}
		}},
		{"door=openai/stream=streamed", openaidoor.Prefix + "/responses", func(sid string) any {
			return map[string]any{"model": "echo", "conversation": sid, "input": "hello there", "stream": true}
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			sid := c.echoSession(nil)
			url := s.base + bc.path
			if bc.path == "/sessions/{id}/turns" {
				url = s.base + "/sessions/" + sid + "/turns"
			}
			body, _ := json.Marshal(bc.body(sid))
			for b.Loop() {
				req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+tn.Key)
				req.Header.Set("Content-Type", "application/json")
				res, err := http.DefaultClient.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				n, _ := io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if res.StatusCode != http.StatusOK || n == 0 {
					b.Fatalf("%s: status %d", bc.name, res.StatusCode)
				}
			}
		})
	}
}
