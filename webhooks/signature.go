package webhooks

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/aapd/aapd/store"
)

// Standard Webhooks v1 (https://www.standardwebhooks.com): each request
// carries webhook-id (the event's id, the same on every attempt),
// webhook-timestamp (the attempt's time, in Unix seconds) and
// webhook-signature ("v1,<base64 HMAC-SHA256 of id.timestamp.body>", one
// for each secret that signs, separated by spaces). The body is
// {"type","timestamp","data"}.

// SecretPrefix starts every signing secret.
const SecretPrefix = "whsec_"

// NewSecret returns a new signing secret: SecretPrefix and the base64 of
// 32 random bytes.
func NewSecret() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("make a webhook secret: %w", err)
	}
	return SecretPrefix + base64.StdEncoding.EncodeToString(b), nil
}

// payload is the body of a request.
type payload struct {
	Type      string                 `json:"type"`
	Timestamp time.Time              `json:"timestamp"`
	Data      store.WebhookEventData `json:"data"`
}

// Body is the body of an event's requests: the same bytes on every attempt.
func Body(tenantName string, ev store.WebhookEvent) ([]byte, error) {
	p := payload{Type: ev.Type, Timestamp: ev.OccurredAt.UTC(), Data: ev.Data}
	p.Data.Tenant = tenantName
	b, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("encode event %s: %w", ev.ID, err)
	}
	return b, nil
}

// Sign sets the Standard Webhooks headers of a request with the event id,
// the attempt's time and body, signed with every secret.
func Sign(h http.Header, secrets []string, eventID string, at time.Time, body []byte) error {
	sigs := make([]string, 0, len(secrets))
	for _, s := range secrets {
		wh, err := standardwebhooks.NewWebhook(s)
		if err != nil {
			return fmt.Errorf("webhook secret: %w", err)
		}
		sig, err := wh.Sign(eventID, at, body)
		if err != nil {
			return fmt.Errorf("sign event %s: %w", eventID, err)
		}
		sigs = append(sigs, sig)
	}
	h.Set(standardwebhooks.HeaderWebhookID, eventID)
	h.Set(standardwebhooks.HeaderWebhookTimestamp, strconv.FormatInt(at.Unix(), 10))
	h.Set(standardwebhooks.HeaderWebhookSignature, strings.Join(sigs, " "))
	return nil
}
