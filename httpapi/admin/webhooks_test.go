package admin_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aapd/aapd/httpapi/admin"
	"github.com/aapd/aapd/store/storetest"
)

// The webhooks of a tenant through the admin API: created with a secret
// shown once, listed, read, rotated, deleted; another tenant's are not
// found; every change has an audit line without the secret.
func TestAdminWebhooks(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	tn, other := f.tenant("hooks"), f.tenant("hooks")
	path := "/tenants/" + tn.Name + "/webhooks"

	var created admin.CreatedWebhook
	r := f.admin("POST", path, map[string]any{
		"url": "https://hooks.example.com/aapd", "description": "billing",
		"events": []string{"session.deleted", "turn.completed", "turn.completed"},
	}).expect(t, http.StatusCreated)
	r.json(t, &created)
	if r.header.Get("Location") != admin.Prefix+path+"/"+created.ID {
		t.Errorf("Location %q", r.header.Get("Location"))
	}
	if !strings.HasPrefix(created.ID, "wh_") || !strings.HasPrefix(created.Secret, "whsec_") || len(created.Secret) != 50 ||
		created.State != "enabled" || fmt.Sprint(created.Events) != "[turn.completed session.deleted]" || created.Description != "billing" {
		t.Errorf("created %+v", created)
	}

	var got admin.Webhook
	f.admin("GET", path+"/"+created.ID, nil).expect(t, http.StatusOK).json(t, &got)
	if got.ID != created.ID || got.URL != "https://hooks.example.com/aapd" || strings.Contains(string(f.admin("GET", path+"/"+created.ID, nil).body), "whsec_") {
		t.Errorf("got %+v", got)
	}
	f.admin("GET", "/tenants/"+other.Name+"/webhooks/"+created.ID, nil).problem(t, http.StatusNotFound, "not-found", "no webhook")
	f.admin("GET", path+"/wh_nonsense", nil).problem(t, http.StatusNotFound, "not-found", "no webhook")
	f.admin("DELETE", "/tenants/"+other.Name+"/webhooks/"+created.ID, nil).problem(t, http.StatusNotFound, "not-found", "no webhook")

	var rotated admin.CreatedWebhook
	f.admin("POST", path+"/"+created.ID+"/rotate-secret", nil).expect(t, http.StatusOK).json(t, &rotated)
	if rotated.Secret == created.Secret || !strings.HasPrefix(rotated.Secret, "whsec_") || rotated.PreviousSecretExpiresAt == nil ||
		rotated.PreviousSecretExpiresAt.Sub(time.Now().Add(admin.SecretOverlap)).Abs() > time.Minute {
		t.Errorf("rotated %+v", rotated)
	}

	for range 2 {
		f.admin("POST", path, map[string]any{"url": "https://hooks.example.com/" + uniqueName("x"), "events": []string{"turn.failed"}}).expect(t, http.StatusCreated)
	}
	var ids []string
	for cursor := ""; ; {
		var page admin.WebhookPage
		f.admin("GET", path+"?limit=2&cursor="+cursor, nil).expect(t, http.StatusOK).json(t, &page)
		for _, w := range page.Webhooks {
			ids = append(ids, w.ID)
		}
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	if len(ids) != 3 || ids[0] != created.ID {
		t.Errorf("listed %v", ids)
	}
	f.admin("GET", path+"?cursor=bm9uc2Vuc2U", nil).problem(t, http.StatusBadRequest, "invalid-request", "cursor")

	f.admin("DELETE", path+"/"+created.ID, nil).expect(t, http.StatusNoContent)
	f.admin("GET", path+"/"+created.ID, nil).problem(t, http.StatusNotFound, "not-found", "no webhook")

	var actions []string
	for _, a := range f.logs.audits(t) {
		if a["tenant"] == tn.Name && strings.HasPrefix(a["action"].(string), "webhook.") {
			actions = append(actions, a["action"].(string))
		}
	}
	if fmt.Sprint(actions) != "[webhook.create webhook.rotate-secret webhook.create webhook.create webhook.delete]" {
		t.Errorf("audit actions %v", actions)
	}
	if strings.Contains(f.logs.String(), created.Secret) || strings.Contains(f.logs.String(), rotated.Secret) {
		t.Error("a secret is in the logs")
	}
}

// Bad input is a 400 naming the field; http and private addresses only
// with --webhook-allow-private.
func TestAdminWebhookInputIsValidated(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	tn := f.tenant("hooks")
	path := "/tenants/" + tn.Name + "/webhooks"
	all := []string{"turn.completed"}
	for _, c := range []struct {
		body  any
		field string
	}{
		{map[string]any{"events": all}, "url"},
		{map[string]any{"url": "http://hooks.example.com/", "events": all}, "url"},
		{map[string]any{"url": "https://127.0.0.1:8443/", "events": all}, "url"},
		{map[string]any{"url": "https://localhost/", "events": all}, "url"},
		{map[string]any{"url": "https://user:pw@hooks.example.com/", "events": all}, "url"},
		{map[string]any{"url": "hooks.example.com", "events": all}, "url"},
		{map[string]any{"url": "https://hooks.example.com/"}, "events"},
		{map[string]any{"url": "https://hooks.example.com/", "events": []string{}}, "events"},
		{map[string]any{"url": "https://hooks.example.com/", "events": []string{"turn.completed", "turn.started"}}, "events[1]"},
		{map[string]any{"url": "https://hooks.example.com/", "events": "turn.completed"}, "events"},
		{map[string]any{"url": "https://hooks.example.com/", "events": all, "description": strings.Repeat("d", 513)}, "description"},
		{map[string]any{"url": "https://hooks.example.com/", "events": all, "secret": "mine"}, "secret"},
	} {
		f.admin("POST", path, c.body).problem(t, http.StatusBadRequest, "invalid-request", c.field)
	}
	f.admin("POST", "/tenants/"+uniqueName("none")+"/webhooks", map[string]any{"url": "https://hooks.example.com/", "events": all}).
		problem(t, http.StatusNotFound, "not-found", "no tenant")

	for range admin.MaxWebhooks {
		f.admin("POST", path, map[string]any{"url": "https://hooks.example.com/", "events": all}).expect(t, http.StatusCreated)
	}
	f.admin("POST", path, map[string]any{"url": "https://hooks.example.com/", "events": all}).
		problem(t, http.StatusBadRequest, "invalid-request", "the most it may have")

	private := newFixture(t, func(c *admin.Config) { c.WebhookAllowPrivate = true })
	pt := private.tenant("hooks")
	for _, u := range []string{"http://127.0.0.1:9000/hooks", "https://10.0.0.7/hooks", "https://localhost:8443/"} {
		private.admin("POST", "/tenants/"+pt.Name+"/webhooks", map[string]any{"url": u, "events": all}).expect(t, http.StatusCreated)
	}
}

// A turn's end and a session's deletion are listed as the endpoint's
// deliveries; a delivery is redelivered by its event id; a disabled
// endpoint is enabled again before it redelivers.
func TestAdminWebhookDeliveries(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	tn := f.tenant("hooks")
	k := f.key(tn.Name, map[string]any{})
	path := "/tenants/" + tn.Name + "/webhooks"
	var wh admin.CreatedWebhook
	f.admin("POST", path, map[string]any{"url": "https://hooks.example.com/", "events": []string{"turn.completed", "session.deleted"}}).
		expect(t, http.StatusCreated).json(t, &wh)
	var sess struct {
		SessionID string `json:"sessionId"`
	}
	f.aap("POST", "/sessions", k.Secret, map[string]any{"agent": map[string]any{"name": "echo"}}).expect(t, http.StatusCreated).json(t, &sess)
	f.aap("POST", "/sessions/"+sess.SessionID+"/turns", k.Secret,
		map[string]any{"messages": []any{map[string]any{"role": "user", "content": "hi"}}}).expect(t, http.StatusOK)
	f.aap("DELETE", "/sessions/"+sess.SessionID, k.Secret, nil).expect(t, http.StatusNoContent)

	var page admin.DeliveryPage
	f.admin("GET", path+"/"+wh.ID+"/deliveries?limit=1", nil).expect(t, http.StatusOK).json(t, &page)
	if len(page.Deliveries) != 1 || page.Deliveries[0].EventType != "session.deleted" || page.NextCursor == "" {
		t.Fatalf("first page %+v", page)
	}
	var next admin.DeliveryPage
	f.admin("GET", path+"/"+wh.ID+"/deliveries?cursor="+page.NextCursor, nil).expect(t, http.StatusOK).json(t, &next)
	if len(next.Deliveries) != 1 || next.Deliveries[0].EventType != "turn.completed" || next.NextCursor != "" {
		t.Fatalf("second page %+v", next)
	}
	d := next.Deliveries[0]
	if d.State != "pending" || d.NextAttemptAt == nil || d.Attempts == nil || !strings.HasPrefix(d.EventID, "evt_") {
		t.Errorf("delivery %+v", d)
	}

	var again admin.Delivery
	f.admin("POST", path+"/"+wh.ID+"/deliveries/"+d.EventID+"/redeliver", nil).expect(t, http.StatusAccepted).json(t, &again)
	if again.EventID != d.EventID || again.State != "pending" {
		t.Errorf("redelivered %+v", again)
	}
	f.admin("POST", path+"/"+wh.ID+"/deliveries/evt_01a2185a5bfe7a2980de94b401dff1c6/redeliver", nil).
		problem(t, http.StatusNotFound, "not-found", "no delivery")
	f.admin("POST", path+"/"+wh.ID+"/deliveries/nonsense/redeliver", nil).problem(t, http.StatusNotFound, "not-found", "no delivery")

	storetest.Exec(t, storetest.URL(t), `UPDATE webhook_endpoints SET disabled_at = now(), disabled_reason = 'the endpoint answered 410 Gone'
		WHERE tenant_id = $1 AND id = $2`, tn.ID, wh.ID)
	var disabled admin.Webhook
	f.admin("GET", path+"/"+wh.ID, nil).expect(t, http.StatusOK).json(t, &disabled)
	if disabled.State != "disabled" || disabled.DisabledAt == nil || disabled.DisabledReason != "the endpoint answered 410 Gone" {
		t.Errorf("disabled %+v", disabled)
	}
	f.admin("POST", path+"/"+wh.ID+"/deliveries/"+d.EventID+"/redeliver", nil).problem(t, http.StatusConflict, "conflict", "enable it first")
	var enabled admin.Webhook
	f.admin("POST", path+"/"+wh.ID+"/enable", nil).expect(t, http.StatusOK).json(t, &enabled)
	if enabled.State != "enabled" || enabled.DisabledAt != nil {
		t.Errorf("enabled %+v", enabled)
	}
	f.admin("POST", path+"/"+wh.ID+"/deliveries/"+d.EventID+"/redeliver", nil).expect(t, http.StatusAccepted)
}
