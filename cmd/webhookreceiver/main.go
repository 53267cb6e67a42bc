// Command webhookreceiver is the example receiver of docs/background.md: it
// checks each aapd webhook's signature with the Standard Webhooks library,
// handles each event once (by its webhook-id), and logs it.
//
//	WEBHOOK_SECRET=whsec_… go run ./cmd/webhookreceiver -addr 127.0.0.1:9000
package main

import (
	"encoding/json"
	"flag"
	"io"
	"log"
	"net/http"
	"os"
	"sync"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// event is the body of an aapd webhook.
type event struct {
	Type      string `json:"type"`
	Timestamp string `json:"timestamp"`
	Data      struct {
		Tenant     string `json:"tenant"`
		SessionID  string `json:"sessionId"`
		TurnID     string `json:"turnId"`
		Status     string `json:"status"`
		StopReason string `json:"stopReason"`
		Error      *struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	} `json:"data"`
}

func main() {
	addr := flag.String("addr", "127.0.0.1:9000", "address to listen on")
	flag.Parse()
	wh, err := standardwebhooks.NewWebhook(os.Getenv("WEBHOOK_SECRET")) // whsec_…, from aapd
	if err != nil {
		log.Fatal(err)
	}
	var (
		mu   sync.Mutex
		seen = map[string]bool{} // handled webhook-ids: keep them in your database
	)
	http.HandleFunc("POST /hooks", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, "cannot read the body", http.StatusBadRequest)
			return
		}
		// The signature covers webhook-id, webhook-timestamp (at most 5
		// minutes old) and the body, byte for byte.
		if err := wh.Verify(body, r.Header); err != nil {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		var ev event
		if err := json.Unmarshal(body, &ev); err != nil {
			http.Error(w, "not an event", http.StatusBadRequest)
			return
		}
		id := r.Header.Get("webhook-id") // the same on every retry of the event
		mu.Lock()
		again := seen[id]
		seen[id] = true
		mu.Unlock()
		if !again {
			what := "session " + ev.Data.SessionID
			if ev.Data.TurnID != "" {
				what += ", turn " + ev.Data.TurnID + ": " + ev.Data.Status + ", " + ev.Data.StopReason
			}
			log.Printf("%s %s (tenant %s): %s", id, ev.Type, ev.Data.Tenant, what)
		}
		w.WriteHeader(http.StatusNoContent) // any 2xx: delivered
	})
	log.Printf("receiving webhooks on http://%s/hooks", *addr)
	log.Fatal(http.ListenAndServe(*addr, nil))
}
