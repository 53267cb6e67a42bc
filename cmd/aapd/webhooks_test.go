package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/aapd/aapd/aapclient"
	"github.com/aapd/aapd/store"
	"github.com/aapd/aapd/store/storetest"
	"github.com/aapd/aapd/webhooks"
)

// hookRequest is a request a hookReceiver got.
type hookRequest struct {
	header http.Header
	body   []byte
}

// id is the request's webhook-id.
func (r hookRequest) id() string { return r.header.Get("webhook-id") }

// event decodes the request's body.
func (r hookRequest) event(t testing.TB) (typ string, data map[string]any) {
	t.Helper()
	var b struct {
		Type string         `json:"type"`
		Data map[string]any `json:"data"`
	}
	if err := json.Unmarshal(r.body, &b); err != nil {
		t.Fatalf("webhook body %q: %v", r.body, err)
	}
	return b.Type, b.Data
}

// hookReceiver is a webhook receiver on loopback, over TLS; status says
// how it answers (204 when nil).
type hookReceiver struct {
	srv    *httptest.Server
	mu     sync.Mutex
	got    []hookRequest
	status func(n int) int
}

func newHookReceiver(t testing.TB, status func(n int) int) *hookReceiver {
	t.Helper()
	r := &hookReceiver{status: status}
	r.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.got = append(r.got, hookRequest{header: req.Header.Clone(), body: body})
		n := len(r.got)
		r.mu.Unlock()
		code := http.StatusNoContent
		if r.status != nil {
			code = r.status(n)
		}
		w.WriteHeader(code)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *hookReceiver) requests() []hookRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

// trust is a TLS configuration trusting the receiver's certificate.
func (r *hookReceiver) trust() *tls.Config {
	pool := x509.NewCertPool()
	pool.AddCert(r.srv.Certificate())
	return &tls.Config{RootCAs: pool}
}

// certFile writes the receiver's certificate to a PEM file, for a process
// to trust it through SSL_CERT_FILE.
func (r *hookReceiver) certFile(t testing.TB) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "receiver.pem")
	if err := os.WriteFile(f, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: r.srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// waitRequests waits until the receiver has n requests and returns them.
func (r *hookReceiver) waitRequests(t testing.TB, n int) []hookRequest {
	t.Helper()
	waitFor(t, fmt.Sprintf("%d webhook requests (have %d)", n, len(r.requests())), 15*time.Second, func() bool { return len(r.requests()) >= n })
	return r.requests()
}

// verify checks a request's signature with the Standard Webhooks library
// (each secret given must verify it) and its body against the OpenAPI
// document's WebhookEvent.
func verifyHook(t testing.TB, r hookRequest, secrets ...string) {
	t.Helper()
	for _, s := range secrets {
		wh, err := standardwebhooks.NewWebhook(s)
		if err != nil {
			t.Fatal(err)
		}
		if err := wh.Verify(r.body, r.header); err != nil {
			t.Errorf("webhook %s does not verify with secret %.10s…: %v", r.id(), s, err)
		}
	}
	for _, msg := range openAPIDoc(t).CheckSchema("WebhookEvent", r.body) {
		t.Errorf("OpenAPI: webhook body %s: %s", r.body, msg)
	}
}

// Every route of a tenant's webhooks through the checked client
// (openapi_test.go), with a receiver that checks what it gets: a text
// turn, a turn that waits for a client tool, a failed turn and a deleted
// session each make one signed event; rotation signs with both secrets;
// redelivery repeats an event's id; 410 disables an endpoint, which is
// enabled again.
func TestOpenAPIAdminWebhookRoutes(t *testing.T) {
	t.Parallel()
	rcv := newHookReceiver(t, nil)
	gone := newHookReceiver(t, func(int) int { return http.StatusGone })
	trust := rcv.trust()
	trust.RootCAs.AddCert(gone.srv.Certificate())
	s := startParallelServer(t, func(c *Config) {
		c.AdminToken, c.DatabaseURL = testOperatorToken, storetest.NewDatabase(t) // a deliverer serves its whole database
		c.WebhookAllowPrivate, c.WebhookTLS = true, trust
	})
	op := &client{t: t, base: s.base + "/admin/v1", key: testOperatorToken}
	// Every series is there before anything happens.
	before := readMetricsAs(t, s.base, testOperatorToken)
	for _, series := range []string{`aapd_webhook_attempts_total{result="success"}`, `aapd_webhook_attempts_total{result="refused"}`,
		`aapd_webhook_deliveries_total{outcome="delivered"}`, `aapd_webhook_deliveries_total{outcome="failed"}`,
		`aapd_webhook_oldest_due_seconds`, `aapd_webhook_endpoints_disabled`, `aapd_webhook_delivery_lag_seconds_count`} {
		if v, ok := before.samples[series]; !ok || v != 0 {
			t.Errorf("%s = %v (exported: %v), want 0 from the start", series, v, ok)
		}
	}
	name := uniqueName("hooks")
	op.do("POST", "/tenants", map[string]string{"name": name}).expect(t, http.StatusCreated)
	var key struct {
		Key string `json:"key"`
	}
	op.do("POST", "/tenants/"+name+"/keys", map[string]any{}).expect(t, http.StatusCreated).json(t, &key)
	app := &client{t: t, base: s.base, key: key.Key}
	path := "/tenants/" + name + "/webhooks"

	type webhook struct {
		ID     string `json:"id"`
		Secret string `json:"secret"`
		State  string `json:"state"`
	}
	var wh webhook
	op.do("POST", path, map[string]any{"url": rcv.srv.URL + "/hooks", "description": "everything",
		"events": []string{"turn.completed", "turn.failed", "turn.requires_action", "session.deleted"}}).expect(t, http.StatusCreated).json(t, &wh)
	checkProblem(t, op.do("POST", path, map[string]any{"url": "ftp://hooks.example.com", "events": []string{"turn.failed"}}), http.StatusBadRequest, "invalid-request")
	checkProblem(t, op.do("POST", path, map[string]any{"url": rcv.srv.URL, "events": []string{"turn.begun"}}), http.StatusBadRequest, "invalid-request")
	checkProblem(t, op.do("POST", "/tenants/"+uniqueName("none")+"/webhooks", map[string]any{"url": rcv.srv.URL, "events": []string{"turn.failed"}}), http.StatusNotFound, "not-found")
	op.do("GET", path+"?limit=1", nil).expect(t, http.StatusOK)
	op.do("GET", path+"/"+wh.ID, nil).expect(t, http.StatusOK)
	checkProblem(t, op.do("GET", path+"/wh_01a2185a5bfe7a2980de94b401dff1c6", nil), http.StatusNotFound, "not-found")

	// Four events, one each.
	sid := app.echoSession(nil, "lookup")
	app.say(sid, "hello")
	app.say(sid, `/tool lookup {"q":"x"}`)
	app.say(app.echoSession(nil), "/error the model broke")
	app.do("DELETE", "/sessions/"+sid, nil).expect(t, http.StatusNoContent)
	got := rcv.waitRequests(t, 4)
	var types []string
	for _, r := range got {
		verifyHook(t, r, wh.Secret)
		typ, data := r.event(t)
		types = append(types, typ)
		if data["tenant"] != name {
			t.Errorf("event %s names tenant %v", typ, data["tenant"])
		}
	}
	slices.Sort(types)
	if fmt.Sprint(types) != "[session.deleted turn.completed turn.failed turn.requires_action]" {
		t.Errorf("events %v", types)
	}

	type delivery struct {
		EventID string `json:"eventId"`
		State   string `json:"state"`
	}
	var page struct {
		Deliveries []delivery `json:"deliveries"`
		NextCursor string     `json:"nextCursor"`
	}
	waitFor(t, "every delivery recorded", 5*time.Second, func() bool {
		op.do("GET", path+"/"+wh.ID+"/deliveries", nil).expect(t, http.StatusOK).json(t, &page)
		return len(page.Deliveries) == 4 && !slices.ContainsFunc(page.Deliveries, func(d delivery) bool { return d.State != "delivered" })
	})
	op.do("GET", path+"/"+wh.ID+"/deliveries?limit=3", nil).expect(t, http.StatusOK).json(t, &page)
	op.do("GET", path+"/"+wh.ID+"/deliveries?cursor="+page.NextCursor, nil).expect(t, http.StatusOK)
	checkProblem(t, op.do("GET", path+"/"+wh.ID+"/deliveries?cursor=nonsense", nil), http.StatusBadRequest, "invalid-request")

	// Rotation: both secrets sign, for a while.
	var rotated webhook
	op.do("POST", path+"/"+wh.ID+"/rotate-secret", nil).expect(t, http.StatusOK).json(t, &rotated)
	app.say(app.echoSession(nil), "after the rotation")
	last := rcv.waitRequests(t, 5)[4]
	verifyHook(t, last, wh.Secret, rotated.Secret)

	// Redelivery: the same event id and body again.
	first := got[0]
	op.do("POST", path+"/"+wh.ID+"/deliveries/"+first.id()+"/redeliver", nil).expect(t, http.StatusAccepted)
	again := rcv.waitRequests(t, 6)[5]
	if again.id() != first.id() || string(again.body) != string(first.body) {
		t.Errorf("redelivered %s %s, want %s %s", again.id(), again.body, first.id(), first.body)
	}
	verifyHook(t, again, rotated.Secret)
	checkProblem(t, op.do("POST", path+"/"+wh.ID+"/deliveries/evt_01a2185a5bfe7a2980de94b401dff1c6/redeliver", nil), http.StatusNotFound, "not-found")

	// 410 Gone disables an endpoint; enabled again, it redelivers.
	var gw webhook
	op.do("POST", path, map[string]any{"url": gone.srv.URL, "events": []string{"turn.completed"}}).expect(t, http.StatusCreated).json(t, &gw)
	app.say(app.echoSession(nil), "to the gone endpoint")
	waitFor(t, "the endpoint's disabling", 5*time.Second, func() bool {
		var w webhook
		op.do("GET", path+"/"+gw.ID, nil).expect(t, http.StatusOK).json(t, &w)
		return w.State == "disabled"
	})
	gonePage := page
	op.do("GET", path+"/"+gw.ID+"/deliveries", nil).expect(t, http.StatusOK).json(t, &gonePage)
	checkProblem(t, op.do("POST", path+"/"+gw.ID+"/deliveries/"+gonePage.Deliveries[0].EventID+"/redeliver", nil), http.StatusConflict, "conflict")
	op.do("POST", path+"/"+gw.ID+"/enable", nil).expect(t, http.StatusOK)
	op.do("POST", path+"/"+gw.ID+"/deliveries/"+gonePage.Deliveries[0].EventID+"/redeliver", nil).expect(t, http.StatusAccepted)

	waitFor(t, "the disabled endpoint's gauge", 15*time.Second, func() bool {
		return readMetricsAs(t, s.base, testOperatorToken).sum("aapd_webhook_endpoints_disabled") == 1
	})
	after := readMetricsAs(t, s.base, testOperatorToken)
	// Seven to the receiver (four events, one after the rotation, one
	// redelivered, one of the turn the gone endpoint got too); two 410s.
	for series, want := range map[string]float64{
		`aapd_webhook_deliveries_total{outcome="delivered"}`: 7, `aapd_webhook_deliveries_total{outcome="failed"}`: 2,
		`aapd_webhook_attempts_total{result="success"}`: 7, `aapd_webhook_attempts_total{result="status"}`: 2,
		`aapd_webhook_delivery_lag_seconds_count`: 7,
	} {
		if got := after.samples[series]; got != want {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}

	op.do("DELETE", path+"/"+wh.ID, nil).expect(t, http.StatusNoContent)
	checkProblem(t, op.do("DELETE", path+"/"+wh.ID, nil), http.StatusNotFound, "not-found")
	checkProblem(t, op.do("POST", path+"/"+wh.ID+"/rotate-secret", nil), http.StatusNotFound, "not-found")
}

// Two real replicas on one database: every turn's end and every deletion,
// on either replica, is delivered once, signed, with one event id; a
// replica SIGKILLed leaves the other delivering.
func TestWebhooksOfTwoReplicasAreDeliveredOnceAndSigned(t *testing.T) {
	t.Parallel()
	rcv := newHookReceiver(t, nil)
	db := storetest.NewDatabase(t)
	env := []string{"SSL_CERT_FILE=" + rcv.certFile(t), "AAPD_ADMIN_TOKEN=" + testOperatorToken}
	a := startProcEnv(t, db, env, "--webhook-allow-private", "--shutdown-delay", "0")
	b := startProcEnv(t, db, env, "--webhook-allow-private", "--shutdown-delay", "0")
	op := &client{t: t, base: a.base + "/admin/v1", key: testOperatorToken}
	name := uniqueName("replicas")
	op.do("POST", "/tenants", map[string]string{"name": name}).expect(t, http.StatusCreated)
	var key struct {
		Key string `json:"key"`
	}
	op.do("POST", "/tenants/"+name+"/keys", map[string]any{}).expect(t, http.StatusCreated).json(t, &key)
	var wh struct {
		Secret string `json:"secret"`
	}
	op.do("POST", "/tenants/"+name+"/webhooks", map[string]any{"url": rcv.srv.URL + "/hooks",
		"events": []string{"turn.completed", "session.deleted"}}).expect(t, http.StatusCreated).json(t, &wh)

	replicas := []*client{{t: t, base: a.base, key: key.Key}, {t: t, base: b.base, key: key.Key}}
	const sessions = 20
	var wg sync.WaitGroup
	for i := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := replicas[i%2]
			sid := c.echoSession(nil)
			c.say(sid, "one")
			c.say(sid, "two")
			if i%4 == 0 {
				replicas[(i+1)%2].do("DELETE", "/sessions/"+sid, nil).expect(t, http.StatusNoContent)
			}
		}()
	}
	wg.Wait()
	rcv.waitRequests(t, sessions*2+sessions/4)
	// One replica gone, the other delivers what it is given. (What a
	// replica killed mid-attempt held is due again after its claim's 30 s:
	// the webhooks package's tests show it.)
	b.kill()
	c := replicas[0]
	c.say(c.echoSession(nil), "after the kill")
	want := sessions*2 + sessions/4 + 1
	rcv.waitRequests(t, want)
	time.Sleep(500 * time.Millisecond) // a delivery sent twice would show
	got := rcv.requests()
	ids := map[string]int{}
	counts := map[string]int{}
	for _, r := range got {
		verifyHook(t, r, wh.Secret)
		ids[r.id()]++
		typ, _ := r.event(t)
		counts[typ]++
	}
	if len(got) != want || len(ids) != want {
		t.Errorf("%d requests of %d events, want %d of each", len(got), len(ids), want)
	}
	if counts["turn.completed"] != sessions*2+1 || counts["session.deleted"] != sessions/4 {
		t.Errorf("events by type %v", counts)
	}
}

// The CLI does what the admin API does; a secret it creates is sealed with
// the key it is given, the servers' key.
func TestCLIWebhooks(t *testing.T) {
	t.Parallel()
	db := storetest.NewDatabase(t) // a delivery here is no other test server's to send
	keyBytes := make([]byte, 32)
	for i := range keyBytes {
		keyBytes[i] = byte(i)
	}
	encKey := base64.StdEncoding.EncodeToString(keyBytes)
	tenant := uniqueName("hooks")
	aapd(t, "tenants", "create", "--database-url", db, tenant).ok(t)
	base := []string{"--database-url", db, "--tenant", tenant}
	cmd := func(sub string, args ...string) []string {
		return append(append([]string{"webhooks", sub}, base...), args...)
	}

	out := strings.Fields(aapd(t, cmd("create", "--encryption-key", encKey, "--url", "https://hooks.example.com/aapd",
		"--events", "turn.completed, session.deleted", "--description", "billing")...).ok(t).stdout)
	if len(out) != 2 || !strings.HasPrefix(out[0], "wh_") || !strings.HasPrefix(out[1], "whsec_") {
		t.Fatalf("webhooks create printed %q, want the id and the secret", out)
	}
	id, secret := out[0], out[1]
	aapd(t, cmd("create", "--url", "http://hooks.example.com/", "--events", "turn.failed")...).failed(t, 2, "must be https")
	aapd(t, cmd("create", "--url", "https://127.0.0.1/", "--events", "turn.failed")...).failed(t, 2, "not a public address")
	aapd(t, cmd("create", "--url", "https://hooks.example.com/", "--events", "turn.started")...).failed(t, 2, "unknown event type")
	aapd(t, cmd("create", "--url", "https://hooks.example.com/")...).failed(t, 2, "events")
	aapd(t, cmd("create", "--encryption-key", encKey, "--url", "http://127.0.0.1:9/", "--events", "turn.failed", "--webhook-allow-private")...).ok(t)

	rows := table(aapd(t, cmd("list")...).ok(t).stdout)
	if len(rows) != 3 || strings.Join(rows[0], "|") != "ID|URL|EVENTS|STATE|CREATED" || rows[1][0] != id ||
		rows[1][2] != "turn.completed,session.deleted" || rows[1][3] != "enabled" {
		t.Fatalf("webhooks list %v", rows)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(aapd(t, cmd("get", id)...).ok(t).stdout), &got); err != nil || got["id"] != id || got["description"] != "billing" {
		t.Errorf("webhooks get: %v, %v", got, err)
	}
	aapd(t, cmd("get", "wh_01a2185a5bfe7a2980de94b401dff1c6")...).failed(t, 1, "no webhook")

	// The secret was sealed with the key: a store opened with it reads it.
	st, err := store.Open(context.Background(), store.Config{DatabaseURL: db, EncryptionKey: keyBytes})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	tn, err := st.TenantGetByName(context.Background(), tenant)
	if err != nil {
		t.Fatal(err)
	}
	storetest.CompletedTurn(t, st, tn.ID)
	claim, err := st.WebhookDeliveriesClaim(context.Background(), tn.ID, time.Now().Add(time.Minute), time.Minute, 10)
	if err != nil || fmt.Sprint(claim.Targets[id].Secrets) != "["+secret+"]" {
		t.Fatalf("the secret as the server reads it: %v, %v", claim.Targets[id].Secrets, err)
	}
	rows = table(aapd(t, cmd("deliveries", id)...).ok(t).stdout)
	if len(rows) != 2 || rows[1][1] != "turn.completed" || rows[1][2] != "pending" {
		t.Fatalf("webhooks deliveries %v", rows)
	}
	aapd(t, cmd("redeliver", id, rows[1][0])...).ok(t)
	aapd(t, cmd("redeliver", id, "evt_01a2185a5bfe7a2980de94b401dff1c6")...).failed(t, 1, "no delivery")
	aapd(t, cmd("redeliver", id)...).failed(t, 2, "webhook ID and one event ID")

	rotated := strings.TrimSpace(aapd(t, cmd("rotate-secret", "--encryption-key", encKey, id)...).ok(t).stdout)
	if !strings.HasPrefix(rotated, "whsec_") || rotated == secret {
		t.Errorf("rotate-secret printed %q", rotated)
	}
	aapd(t, cmd("enable", id)...).ok(t)
	aapd(t, cmd("delete", id)...).ok(t)
	aapd(t, cmd("delete", id)...).failed(t, 1, "no webhook")
}

// Background turns fire the same events as any turn: a background turn's
// end, one that stops for a client tool, and a queued one cancelled before
// a worker took it (status cancelled, no usage: no worker ran it).
func TestWebhooksTellOfBackgroundTurns(t *testing.T) {
	t.Parallel()
	rcv := newHookReceiver(t, nil)
	s := startServer(t, func(c *Config) {
		c.DatabaseURL, c.Workers = storetest.NewDatabase(t), 1 // a deliverer serves its whole database
		c.WebhookAllowPrivate, c.WebhookTLS = true, rcv.trust()
	})
	c, tn := s.newTenantWithID(t)
	secret, err := webhooks.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Store.WebhookEndpointCreate(context.Background(), store.WebhookEndpointCreateParams{
		TenantID: tn.ID, URL: rcv.srv.URL + "/hooks", Events: store.WebhookEventTypes, Secret: secret, Max: 20,
	}); err != nil {
		t.Fatal(err)
	}
	done := c.echoSession(nil)
	c.waitEnd(done, c.startBackground(done, user("in the background")).TurnID)
	tool := c.echoSession(nil, "lookup")
	c.waitEnd(tool, c.startBackground(tool, user(`/tool lookup {"q":"x"}`)).TurnID)

	// The only worker busy, a background turn waits in the queue; cancelled
	// there, it ends without a worker.
	busy := c.openTurn(c.echoSession(nil), streamUser("delta", slowWords(10, 100)))
	busy.read(2)
	queuedSID := c.echoSession(nil)
	queued := c.startBackground(queuedSID, user("never run"))
	if queued.Status != aapclient.TurnQueued {
		t.Fatalf("a background turn with the only worker busy: %+v", queued.TurnInfo)
	}
	if _, _, err := c.api().CancelTurn(context.Background(), queuedSID, queued.TurnID); err != nil {
		t.Fatal(err)
	}
	busy.read(-1)

	got := map[string]map[string]any{} // by session
	for _, r := range rcv.waitRequests(t, 4) {
		verifyHook(t, r, secret)
		typ, data := r.event(t)
		data["type"] = typ
		got[data["sessionId"].(string)] = data
	}
	for sid, want := range map[string]string{done: "turn.completed/completed/end_turn", tool: "turn.requires_action/completed/tool_use",
		queuedSID: "turn.completed/cancelled/end_turn"} {
		d := got[sid]
		if d == nil || fmt.Sprintf("%v/%v/%v", d["type"], d["status"], d["stopReason"]) != want {
			t.Errorf("session %s: event %v, want %s", sid, d, want)
		}
	}
	if _, ok := got[queuedSID]["usage"]; ok {
		t.Errorf("a turn no worker ran reports usage: %v", got[queuedSID])
	}
}
