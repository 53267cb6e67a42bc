package openai

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/agents"
)

// BenchmarkGenerate measures aapd's own cost of one model call (request
// built, sent, answer read) against a server on loopback that answers at
// once, whole or streamed, as the agent loop asks.
func BenchmarkGenerate(b *testing.B) {
	const answer = "Hello there, how are you doing today?"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if strings.Contains(string(body), `"stream":true`) {
			w.Header().Set("Content-Type", "text/event-stream")
			for _, word := range strings.SplitAfter(answer, " ") {
				io.WriteString(w, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"`+word+`"},"finish_reason":null}]}`+"\n\n")
			}
			io.WriteString(w, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":50,"completion_tokens":8,"total_tokens":58}}`+"\n\ndata: [DONE]\n\n")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"`+answer+`"},"finish_reason":"stop"}],"usage":{"prompt_tokens":50,"completion_tokens":8,"total_tokens":58}}`)
	}))
	defer srv.Close()
	m, err := New(Config{BaseURL: srv.URL + "/v1", APIKey: "x", DefaultModel: "m"})
	if err != nil {
		b.Fatal(err)
	}
	var history []agents.Message
	for range 10 {
		history = append(history, agents.Messages(aap.UserMessage("Hello there, how are you doing today?"), aap.Message{Role: aap.RoleAssistant, Content: aap.TextContent(answer)})...)
	}
	for _, whole := range []bool{true, false} {
		name := "streamed"
		if whole {
			name = "whole"
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				resp, err := m.Generate(context.Background(), agents.ModelRequest{Messages: history, Whole: whole}, func(agents.ModelDelta) {})
				if err != nil || resp.Message.Content.PlainText() != answer {
					b.Fatalf("%v %+v", err, resp)
				}
			}
		})
	}
}
