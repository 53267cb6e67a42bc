package admin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/aapd/aapd/store"
	"github.com/aapd/aapd/webhooks"
)

// Bounds of a tenant's webhooks.
const (
	// MaxWebhooks is how many endpoints a tenant may have.
	MaxWebhooks = 20
	// maxDescription bounds an endpoint's description.
	maxDescription = 512
	// SecretOverlap is how long a rotated-out secret keeps signing beside
	// the new one, so that receivers can take the new one without missing
	// a request.
	SecretOverlap = 24 * time.Hour
)

// WebhookRequest describes an endpoint to create.
type WebhookRequest struct {
	// URL is where the events are POSTed: https, and a public address
	// unless the server admits private ones (--webhook-allow-private).
	URL string `json:"url"`
	// Events are the event types sent to it (store.WebhookEventTypes).
	Events      []string `json:"events"`
	Description string   `json:"description"`
}

// Webhook is an endpoint as listed: never its secret.
type Webhook struct {
	ID          string    `json:"id"`
	URL         string    `json:"url"`
	Description string    `json:"description"`
	Events      []string  `json:"events"`
	CreatedAt   time.Time `json:"createdAt"`
	// State is "enabled" or "disabled" (DisabledAt, DisabledReason).
	State          string     `json:"state"`
	DisabledAt     *time.Time `json:"disabledAt,omitempty"`
	DisabledReason string     `json:"disabledReason,omitempty"`
	// FailingSince is the first failed attempt since the last success.
	FailingSince *time.Time `json:"failingSince,omitempty"`
	// PreviousSecretExpiresAt is, after a rotation, when the previous
	// secret stops signing beside the current one.
	PreviousSecretExpiresAt *time.Time `json:"previousSecretExpiresAt,omitempty"`
}

// CreatedWebhook is an endpoint with its signing secret: the one time it is
// shown (at creation, and at each rotation).
type CreatedWebhook struct {
	Webhook
	Secret string `json:"secret"`
}

// WebhookPage is a page of a tenant's endpoints, oldest first.
type WebhookPage struct {
	Webhooks   []Webhook `json:"webhooks"`
	NextCursor string    `json:"nextCursor,omitempty"`
}

// Delivery is one event to one endpoint, named by the event's id.
type Delivery struct {
	EventID    string    `json:"eventId"`
	EventType  string    `json:"eventType"`
	OccurredAt time.Time `json:"occurredAt"`
	// State is "pending", "delivered" or "failed".
	State         string     `json:"state"`
	NextAttemptAt *time.Time `json:"nextAttemptAt,omitempty"`
	Attempts      []Attempt  `json:"attempts"`
	FinishedAt    *time.Time `json:"finishedAt,omitempty"`
}

// Attempt is one attempt of a delivery.
type Attempt struct {
	At time.Time `json:"at"`
	// StatusCode is the receiver's answer, 0 when there was none.
	StatusCode int   `json:"statusCode"`
	LatencyMS  int64 `json:"latencyMs"`
	// Error says why the attempt failed; absent when it succeeded.
	Error string `json:"error,omitempty"`
}

// DeliveryPage is a page of an endpoint's deliveries, newest event first.
type DeliveryPage struct {
	Deliveries []Delivery `json:"deliveries"`
	NextCursor string     `json:"nextCursor,omitempty"`
}

func (s *Service) webhookOf(e store.WebhookEndpoint) Webhook {
	w := Webhook{ID: e.ID, URL: e.URL, Description: e.Description, Events: e.Events, CreatedAt: e.CreatedAt.UTC(),
		State: "enabled", DisabledAt: utc(e.DisabledAt), DisabledReason: e.DisabledReason, FailingSince: utc(e.FailingSince)}
	if e.DisabledAt != nil {
		w.State = "disabled"
	}
	if e.PreviousSecretUntil != nil && e.PreviousSecretUntil.After(s.now()) {
		w.PreviousSecretExpiresAt = utc(e.PreviousSecretUntil)
	}
	return w
}

func deliveryOf(d store.WebhookDelivery) Delivery {
	out := Delivery{EventID: d.Event.ID, EventType: d.Event.Type, OccurredAt: d.Event.OccurredAt.UTC(), State: d.State,
		NextAttemptAt: utc(d.NextAttemptAt), FinishedAt: utc(d.FinishedAt), Attempts: make([]Attempt, len(d.Log))}
	for i, a := range d.Log {
		out.Attempts[i] = Attempt{At: a.At.UTC(), StatusCode: a.StatusCode, LatencyMS: a.LatencyMS, Error: a.Error}
	}
	return out
}

// validate checks an endpoint to create and returns it as stored: its
// events in their canonical order.
func (r WebhookRequest) validate(allowPrivate bool) (WebhookRequest, error) {
	if strings.TrimSpace(r.URL) == "" {
		return r, invalid("url", "is required: where the events are sent (https://…)")
	}
	if err := webhooks.CheckURL(r.URL, allowPrivate); err != nil {
		return r, invalid("url", "%v", err)
	}
	known := strings.Join(store.WebhookEventTypes, ", ")
	if len(r.Events) == 0 {
		return r, invalid("events", "name at least one event type: %s", known)
	}
	for i, e := range r.Events {
		if !slices.Contains(store.WebhookEventTypes, e) {
			return r, invalid(fmt.Sprintf("events[%d]", i), "unknown event type %q: the types are %s", e, known)
		}
	}
	var events []string
	for _, e := range store.WebhookEventTypes {
		if slices.Contains(r.Events, e) {
			events = append(events, e)
		}
	}
	r.Events = events
	switch {
	case len(r.Description) > maxDescription:
		return r, invalid("description", "at most %d bytes", maxDescription)
	case strings.IndexFunc(r.Description, unicode.IsControl) >= 0:
		return r, invalid("description", "must not hold control characters")
	}
	return r, nil
}

// CreateWebhook registers an endpoint of a tenant and returns it with its
// signing secret, which is shown this once.
func (s *Service) CreateWebhook(ctx context.Context, tenant string, req WebhookRequest) (CreatedWebhook, error) {
	req, err := req.validate(s.webhookAllowPrivate)
	if err != nil {
		return CreatedWebhook{}, err
	}
	t, err := s.tenant(ctx, tenant)
	if err != nil {
		return CreatedWebhook{}, err
	}
	secret, err := webhooks.NewSecret()
	if err != nil {
		return CreatedWebhook{}, err
	}
	e, err := s.st.WebhookEndpointCreate(ctx, store.WebhookEndpointCreateParams{
		TenantID: t.ID, URL: req.URL, Description: req.Description, Events: req.Events, Secret: secret, Max: MaxWebhooks,
	})
	if errors.Is(err, store.ErrWebhookLimit) {
		return CreatedWebhook{}, invalid("", "tenant %q has %d webhooks, the most it may have: delete one first", tenant, MaxWebhooks)
	}
	if err != nil {
		return CreatedWebhook{}, err
	}
	s.audit(ctx, "webhook.create", t, e.ID, slog.String("url", e.URL), slog.Any("events", e.Events))
	return CreatedWebhook{Webhook: s.webhookOf(e), Secret: secret}, nil
}

// webhook finds a tenant and an endpoint of it.
func (s *Service) webhook(ctx context.Context, tenant, id string) (store.Tenant, store.WebhookEndpoint, error) {
	t, err := s.tenant(ctx, tenant)
	if err != nil {
		return t, store.WebhookEndpoint{}, err
	}
	if !store.ValidID("wh_", id) {
		return t, store.WebhookEndpoint{}, notFound("tenant %q has no webhook %q", tenant, id)
	}
	e, err := s.st.WebhookEndpointGet(ctx, t.ID, id)
	if errors.Is(err, store.ErrNotFound) {
		return t, e, notFound("tenant %q has no webhook %q", tenant, id)
	}
	return t, e, err
}

// webhookTenant finds the tenant of a change to one of its endpoints,
// which the change's own statement finds, or says it has none
// (store.ErrNotFound): the endpoint is not read first, a read the request
// would then make twice.
func (s *Service) webhookTenant(ctx context.Context, tenant, id string) (store.Tenant, error) {
	t, err := s.tenant(ctx, tenant)
	if err != nil {
		return t, err
	}
	if !store.ValidID("wh_", id) {
		return t, notFound("tenant %q has no webhook %q", tenant, id)
	}
	return t, nil
}

// GetWebhook returns an endpoint of a tenant.
func (s *Service) GetWebhook(ctx context.Context, tenant, id string) (Webhook, error) {
	_, e, err := s.webhook(ctx, tenant, id)
	if err != nil {
		return Webhook{}, err
	}
	return s.webhookOf(e), nil
}

// ListWebhooks pages through a tenant's endpoints, oldest first.
func (s *Service) ListWebhooks(ctx context.Context, tenant, cursor string, limit int) (WebhookPage, error) {
	limit, err := checkLimit(limit)
	if err != nil {
		return WebhookPage{}, err
	}
	t, err := s.tenant(ctx, tenant)
	if err != nil {
		return WebhookPage{}, err
	}
	page, err := s.st.WebhookEndpointList(ctx, t.ID, cursor, limit)
	if errors.Is(err, store.ErrBadCursor) {
		return WebhookPage{}, badCursor()
	}
	if err != nil {
		return WebhookPage{}, err
	}
	out := WebhookPage{Webhooks: make([]Webhook, len(page.Endpoints)), NextCursor: page.Next}
	for i, e := range page.Endpoints {
		out.Webhooks[i] = s.webhookOf(e)
	}
	return out, nil
}

// DeleteWebhook deletes an endpoint of a tenant, with its deliveries: what
// it was still to be sent is not sent.
func (s *Service) DeleteWebhook(ctx context.Context, tenant, id string) error {
	t, err := s.webhookTenant(ctx, tenant, id)
	if err != nil {
		return err
	}
	err = s.st.WebhookEndpointDelete(ctx, t.ID, id)
	if errors.Is(err, store.ErrNotFound) {
		return notFound("tenant %q has no webhook %q", tenant, id)
	}
	if err != nil {
		return err
	}
	s.audit(ctx, "webhook.delete", t, id)
	return nil
}

// RotateWebhookSecret gives an endpoint a new signing secret, shown this
// once; the one it replaces keeps signing beside it for SecretOverlap.
func (s *Service) RotateWebhookSecret(ctx context.Context, tenant, id string) (CreatedWebhook, error) {
	t, err := s.webhookTenant(ctx, tenant, id)
	if err != nil {
		return CreatedWebhook{}, err
	}
	secret, err := webhooks.NewSecret()
	if err != nil {
		return CreatedWebhook{}, err
	}
	e, err := s.st.WebhookEndpointRotateSecret(ctx, t.ID, id, secret, SecretOverlap)
	if errors.Is(err, store.ErrNotFound) {
		return CreatedWebhook{}, notFound("tenant %q has no webhook %q", tenant, id)
	}
	if err != nil {
		return CreatedWebhook{}, err
	}
	s.audit(ctx, "webhook.rotate-secret", t, id, slog.Time("previous_secret_expires_at", e.PreviousSecretUntil.UTC()))
	return CreatedWebhook{Webhook: s.webhookOf(e), Secret: secret}, nil
}

// EnableWebhook enables a disabled endpoint again: new events are sent to
// it. The deliveries that failed with its disabling stay failed;
// Redeliver sends one again.
func (s *Service) EnableWebhook(ctx context.Context, tenant, id string) (Webhook, error) {
	t, err := s.webhookTenant(ctx, tenant, id)
	if err != nil {
		return Webhook{}, err
	}
	e, err := s.st.WebhookEndpointEnable(ctx, t.ID, id)
	if errors.Is(err, store.ErrNotFound) {
		return Webhook{}, notFound("tenant %q has no webhook %q", tenant, id)
	}
	if err != nil {
		return Webhook{}, err
	}
	s.audit(ctx, "webhook.enable", t, id)
	return s.webhookOf(e), nil
}

// ListDeliveries pages through an endpoint's deliveries, newest event
// first, with every attempt of each.
func (s *Service) ListDeliveries(ctx context.Context, tenant, id, cursor string, limit int) (DeliveryPage, error) {
	limit, err := checkLimit(limit)
	if err != nil {
		return DeliveryPage{}, err
	}
	t, _, err := s.webhook(ctx, tenant, id)
	if err != nil {
		return DeliveryPage{}, err
	}
	page, err := s.st.WebhookDeliveryList(ctx, t.ID, id, cursor, limit)
	if errors.Is(err, store.ErrBadCursor) {
		return DeliveryPage{}, badCursor()
	}
	if err != nil {
		return DeliveryPage{}, err
	}
	out := DeliveryPage{Deliveries: make([]Delivery, len(page.Deliveries)), NextCursor: page.Next}
	for i, d := range page.Deliveries {
		out.Deliveries[i] = deliveryOf(d)
	}
	return out, nil
}

// Redeliver sends an event to an endpoint again, now, with the same event
// id and body (receivers deduplicate by the id) and a new schedule of
// attempts. A disabled endpoint must be enabled first.
func (s *Service) Redeliver(ctx context.Context, tenant, id, eventID string) (Delivery, error) {
	t, e, err := s.webhook(ctx, tenant, id)
	if err != nil {
		return Delivery{}, err
	}
	if e.DisabledAt != nil {
		return Delivery{}, &Error{Kind: StateConflict, Msg: fmt.Sprintf("webhook %s is disabled (%s): enable it first", id, e.DisabledReason)}
	}
	if !store.ValidID("evt_", eventID) {
		return Delivery{}, notFound("webhook %s has no delivery of event %q", id, eventID)
	}
	d, err := s.st.WebhookRedeliver(ctx, t.ID, id, eventID, s.now())
	if errors.Is(err, store.ErrNotFound) {
		return Delivery{}, notFound("webhook %s has no delivery of event %q", id, eventID)
	}
	if err != nil {
		return Delivery{}, err
	}
	s.audit(ctx, "webhook.redeliver", t, id, slog.String("event", eventID))
	return deliveryOf(d), nil
}
