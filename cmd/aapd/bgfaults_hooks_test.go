package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/aapd/aapd/aapclient"
	"github.com/aapd/aapd/store"
	"github.com/aapd/aapd/store/storetest"
	"github.com/aapd/aapd/webhooks"
)

// faultHooks is the fault run's webhook endpoint: a receiver on loopback,
// over TLS, that verifies every request with the Standard Webhooks library
// as it arrives (the library refuses a timestamp more than 5 minutes old,
// so a check after a long run could not) and records the events of every
// turn's end by their ids.
type faultHooks struct {
	rcv *hookReceiver
	wh  *standardwebhooks.Webhook

	mu       sync.Mutex
	requests int
	bad      []string            // requests that did not verify or decode
	bodies   map[string]string   // event id → body: the same on every attempt
	ends     map[string][]string // turn id → the ids of the events of its end
}

// newFaultHooks registers the endpoint for the run's tenant and sets the
// run's replicas up to send to it.
func newFaultHooks(t *testing.T, f *faultRun, tenantID string) *faultHooks {
	t.Helper()
	secret, err := webhooks.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	h := &faultHooks{bodies: map[string]string{}, ends: map[string][]string{}}
	if h.wh, err = standardwebhooks.NewWebhook(secret); err != nil {
		t.Fatal(err)
	}
	h.rcv = &hookReceiver{srv: httptest.NewTLSServer(http.HandlerFunc(h.serve))}
	t.Cleanup(h.rcv.srv.Close)

	st, err := store.Open(context.Background(), store.Config{DatabaseURL: f.dbURL})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.WebhookEndpointCreate(context.Background(), store.WebhookEndpointCreateParams{
		TenantID: tenantID, URL: h.rcv.srv.URL + "/hooks", Events: store.WebhookEventTypes, Secret: secret, Max: 20,
	}); err != nil {
		t.Fatal(err)
	}
	// A loopback receiver: admitted by --webhook-allow-private, its
	// certificate trusted through SSL_CERT_FILE.
	f.env = append(f.env, "SSL_CERT_FILE="+h.rcv.certFile(t))
	f.args = append(f.args, "--webhook-allow-private")
	return h
}

func (h *faultHooks) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	id := r.Header.Get("webhook-id")
	var ev struct {
		Type string `json:"type"`
		Data struct {
			TurnID string `json:"turnId"`
		} `json:"data"`
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.requests++
	if err := h.wh.Verify(body, r.Header); err != nil {
		h.bad = append(h.bad, fmt.Sprintf("%s: %v (body %s)", id, err, body))
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	if err := json.Unmarshal(body, &ev); err != nil || ev.Data.TurnID == "" {
		h.bad = append(h.bad, fmt.Sprintf("%s: not a turn's event: %s", id, body))
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if first, ok := h.bodies[id]; !ok {
		h.bodies[id] = string(body)
		h.ends[ev.Data.TurnID] = append(h.ends[ev.Data.TurnID], id)
	} else if first != string(body) {
		h.bad = append(h.bad, fmt.Sprintf("%s sent again with another body:\n%s\n%s", id, first, body))
	}
	w.WriteHeader(http.StatusNoContent)
}

// check: every turn's end was delivered, verified, under exactly one event
// id, of the type its end calls for; nothing else was sent; the outbox is
// empty of pending deliveries.
func (h *faultHooks) check(f *faultRun) {
	t := f.t
	// A delivery a killed replica had claimed is due again 30 s later; one
	// whose outcome a PostgreSQL crash lost is sent again too.
	deadline := time.Now().Add(3 * time.Minute)
	for {
		var pending int
		storetest.Scan(t, f.dbURL, `SELECT count(*) FROM webhook_deliveries WHERE state <> 'delivered'`, nil, &pending)
		missing := 0
		h.mu.Lock()
		for _, turns := range f.turns {
			for _, info := range turns {
				if len(h.ends[info.TurnID]) == 0 {
					missing++
				}
			}
		}
		h.mu.Unlock()
		if pending == 0 && missing == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("webhooks: %d turns' ends never delivered; %d deliveries not delivered", missing, pending)
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	time.Sleep(time.Second) // a delivery sent once more would show

	h.mu.Lock()
	defer h.mu.Unlock()
	for _, b := range h.bad {
		t.Errorf("webhook request: %s", b)
	}
	ours := map[string]bool{}
	for s, turns := range f.turns {
		for k, info := range turns {
			ours[info.TurnID] = true
			ids := h.ends[info.TurnID]
			if len(ids) != 1 {
				t.Errorf("session %d turn %d (%s): %d events of its end %v, want 1", s, k, info.TurnID, len(ids), ids)
				continue
			}
			var ev struct {
				Type string `json:"type"`
				Data struct {
					Status string `json:"status"`
				} `json:"data"`
			}
			if err := json.Unmarshal([]byte(h.bodies[ids[0]]), &ev); err != nil {
				t.Fatal(err)
			}
			want := "turn.completed/completed"
			if info.Status == aapclient.TurnFailed {
				want = "turn.failed/failed"
			}
			if got := ev.Type + "/" + ev.Data.Status; got != want {
				t.Errorf("session %d turn %d ended %s, its event says %s", s, k, info.Status, got)
			}
			for _, msg := range openAPIDoc(t).CheckSchema("WebhookEvent", []byte(h.bodies[ids[0]])) {
				t.Errorf("OpenAPI: webhook body %s: %s", h.bodies[ids[0]], msg)
			}
		}
	}
	for turn, ids := range h.ends {
		if !ours[turn] {
			t.Errorf("events %v of turn %s, which the run did not start", ids, turn)
		}
	}
	t.Logf("webhooks: %d requests, all verified by signature, of %d events (one per turn's end); %d sent again under the same id",
		h.requests, len(h.bodies), h.requests-len(h.bodies))
}
