package main

import (
	"net/http"
	"strings"
	"testing"

	v3 "github.com/aapd/aapd/httpapi/v3"
	"github.com/aapd/aapd/store"
)

// wave28Case is a request to a route of the wave that added webhooks,
// retention, end users' erasure and export, fork, export and import,
// schedules, background turns, the OpenAI door and the sandbox-agent
// door, with input a client may send by mistake or on purpose.
type wave28Case struct {
	name    string
	as      string // "tenant" (the default) or "operator"
	method  string
	path    string // {sid}, {tid}, {tenant}, {other...} are replaced
	body    any
	headers []string
	status  int
	// slug, when set, is the problem type the answer must have (the
	// routes that answer RFC 9457 problems; the OpenAI and sandbox-agent
	// doors answer in their own formats).
	slug  string
	field string
}

// Issue 28's rule for every door: no input is answered with a 5xx, and a
// client's mistake is a 4xx that names it. Here, against a real server,
// for the routes this wave added: malformed JSON, wrong types, huge values,
// another tenant's ids, bad cursors, bad schedules, webhook URLs that are
// not https or not public, a document cut mid-line, Prefer headers with
// garbage values.
func TestWaveRoutesAnswerBadInputWithA4xxNeverA5xx(t *testing.T) {
	t.Parallel()
	s := startParallelServer(t, func(c *Config) { c.AdminToken = testOperatorToken })
	c, tn := s.newTenantWithID(t)
	other, otherTn := s.newTenantWithID(t)
	op := &client{t: t, base: s.base + "/admin/v1", key: testOperatorToken}

	sid, tid := c.sessionWithATurn()
	doc := string(c.do("GET", "/sessions/"+sid+"/export", nil).expect(t, http.StatusOK).body)
	cut := doc[:strings.Index(doc, "\n")+1] + doc[strings.Index(doc, "\n")+1:][:20] // the header, then half a line

	// The other tenant's things, each to be asked for as this tenant.
	otherSID := other.echoSession(nil)
	other.say(otherSID, "hello")
	otherSch := other.createSchedule(otherSID, map[string]any{"every": "1h", "messages": []any{userMessage("x")}})
	var wh struct {
		ID string `json:"id"`
	}
	op.do("POST", "/tenants/"+otherTn.Name+"/webhooks", map[string]any{"url": "https://hooks.example.com/x", "events": []string{"turn.completed"}}).
		expect(t, http.StatusCreated).json(t, &wh)
	var otherTurns v3.TurnList
	other.do("GET", "/sessions/"+otherSID+"/turns", nil).expect(t, http.StatusOK).json(t, &otherTurns)
	otherTID := otherTurns.Turns[0].TurnID
	c.do("POST", "/sandbox-agent/v1/sessions/mine", map[string]any{"agent": "echo"}).expect(t, http.StatusOK)

	const (
		bad      = http.StatusBadRequest
		notFound = http.StatusNotFound
		invalid  = "invalid-request"
		nf       = "not-found"
	)
	sched := func(kv ...any) map[string]any {
		b := map[string]any{"messages": []any{userMessage("x")}}
		for i := 0; i+1 < len(kv); i += 2 {
			b[kv[i].(string)] = kv[i+1]
		}
		return b
	}
	hook := func(url string) map[string]any {
		return map[string]any{"url": url, "events": []string{"turn.completed"}}
	}
	cases := []wave28Case{
		// ---- admin: webhooks.
		{name: "webhook: malformed JSON", as: "operator", method: "POST", path: "/tenants/{tenant}/webhooks", body: `{"url":`, status: bad, slug: invalid},
		{name: "webhook: array body", as: "operator", method: "POST", path: "/tenants/{tenant}/webhooks", body: `[]`, status: bad, slug: invalid},
		{name: "webhook: url a number", as: "operator", method: "POST", path: "/tenants/{tenant}/webhooks", body: `{"url":7,"events":["turn.completed"]}`, status: bad, slug: invalid, field: "url"},
		{name: "webhook: events a string", as: "operator", method: "POST", path: "/tenants/{tenant}/webhooks", body: `{"url":"https://hooks.example.com/x","events":"turn.completed"}`, status: bad, slug: invalid, field: "events"},
		{name: "webhook: url not https", as: "operator", method: "POST", path: "/tenants/{tenant}/webhooks", body: hook("http://hooks.example.com/x"), status: bad, slug: invalid, field: "url"},
		{name: "webhook: url of a loopback address", as: "operator", method: "POST", path: "/tenants/{tenant}/webhooks", body: hook("https://127.0.0.1/x"), status: bad, slug: invalid, field: "url"},
		{name: "webhook: url of a private address", as: "operator", method: "POST", path: "/tenants/{tenant}/webhooks", body: hook("https://10.1.2.3/x"), status: bad, slug: invalid, field: "url"},
		{name: "webhook: url of a link-local address", as: "operator", method: "POST", path: "/tenants/{tenant}/webhooks", body: hook("https://169.254.169.254/latest"), status: bad, slug: invalid, field: "url"},
		{name: "webhook: url of an IPv6 loopback", as: "operator", method: "POST", path: "/tenants/{tenant}/webhooks", body: hook("https://[::1]/x"), status: bad, slug: invalid, field: "url"},
		{name: "webhook: url localhost", as: "operator", method: "POST", path: "/tenants/{tenant}/webhooks", body: hook("https://localhost/x"), status: bad, slug: invalid, field: "url"},
		{name: "webhook: url without a host", as: "operator", method: "POST", path: "/tenants/{tenant}/webhooks", body: hook("https:///x"), status: bad, slug: invalid, field: "url"},
		{name: "webhook: url with credentials", as: "operator", method: "POST", path: "/tenants/{tenant}/webhooks", body: hook("https://u:p@hooks.example.com/x"), status: bad, slug: invalid, field: "url"},
		{name: "webhook: url not a URL", as: "operator", method: "POST", path: "/tenants/{tenant}/webhooks", body: hook("https://%zz/"), status: bad, slug: invalid, field: "url"},
		{name: "webhook: url huge", as: "operator", method: "POST", path: "/tenants/{tenant}/webhooks", body: hook("https://hooks.example.com/" + strings.Repeat("a", 100_000)), status: bad, slug: invalid, field: "url"},
		{name: "webhook: unknown event", as: "operator", method: "POST", path: "/tenants/{tenant}/webhooks", body: map[string]any{"url": "https://hooks.example.com/x", "events": []string{"turn.exploded"}}, status: bad, slug: invalid, field: "events[0]"},
		{name: "webhook: unknown member", as: "operator", method: "POST", path: "/tenants/{tenant}/webhooks", body: map[string]any{"url": "https://hooks.example.com/x", "events": []string{"turn.completed"}, "secret": "x"}, status: bad, slug: invalid, field: "secret"},
		{name: "webhooks: bad cursor", as: "operator", method: "GET", path: "/tenants/{tenant}/webhooks?cursor=garbage", status: bad, slug: invalid},
		{name: "webhooks: limit huge", as: "operator", method: "GET", path: "/tenants/{tenant}/webhooks?limit=99999999999999999999", status: bad, slug: invalid, field: "limit"},
		{name: "webhook: another tenant's", as: "operator", method: "GET", path: "/tenants/{tenant}/webhooks/{otherWebhook}", status: notFound, slug: nf},
		{name: "webhook: another tenant's, deleted", as: "operator", method: "DELETE", path: "/tenants/{tenant}/webhooks/{otherWebhook}", status: notFound, slug: nf},
		{name: "webhook: another tenant's, its secret rotated", as: "operator", method: "POST", path: "/tenants/{tenant}/webhooks/{otherWebhook}/rotate-secret", status: notFound, slug: nf},
		{name: "webhook: another tenant's, enabled", as: "operator", method: "POST", path: "/tenants/{tenant}/webhooks/{otherWebhook}/enable", status: notFound, slug: nf},
		{name: "webhook: an unknown one, deleted", as: "operator", method: "DELETE", path: "/tenants/{tenant}/webhooks/" + store.NewWebhookEndpointID(), status: notFound, slug: nf},
		{name: "webhook: not an id", as: "operator", method: "POST", path: "/tenants/{tenant}/webhooks/nope/rotate-secret", status: notFound, slug: nf},
		{name: "webhook deliveries: another tenant's", as: "operator", method: "GET", path: "/tenants/{tenant}/webhooks/{otherWebhook}/deliveries", status: notFound, slug: nf},
		{name: "webhook deliveries: bad cursor", as: "operator", method: "GET", path: "/tenants/{otherTenant}/webhooks/{otherWebhook}/deliveries?cursor=garbage", status: bad, slug: invalid},
		{name: "redeliver: not an event id", as: "operator", method: "POST", path: "/tenants/{otherTenant}/webhooks/{otherWebhook}/deliveries/evt_%00/redeliver", status: notFound, slug: nf},

		// ---- admin: tenants named with bytes no name has.
		{name: "tenant: invalid UTF-8", as: "operator", method: "GET", path: "/tenants/%FF%FE", status: notFound, slug: nf},
		{name: "tenant: NUL", as: "operator", method: "GET", path: "/tenants/a%00b", status: notFound, slug: nf},
		{name: "tenant: invalid UTF-8, retention", as: "operator", method: "GET", path: "/tenants/%C3%28/retention", status: notFound, slug: nf},
		{name: "tenant: invalid UTF-8, webhooks", as: "operator", method: "POST", path: "/tenants/%FF/webhooks", body: hook("https://hooks.example.com/x"), status: notFound, slug: nf},
		{name: "tenant: NUL, owner erasure", as: "operator", method: "DELETE", path: "/tenants/x%00/owners/alice", status: notFound, slug: nf},
		{name: "tenants: a cursor of a NUL", as: "operator", method: "GET", path: "/tenants?cursor=AA", status: bad, slug: invalid},
		{name: "tenant: huge name", as: "operator", method: "GET", path: "/tenants/" + strings.Repeat("t", 10_000), status: notFound, slug: nf},

		// ---- admin: retention.
		{name: "retention: malformed JSON", as: "operator", method: "PUT", path: "/tenants/{tenant}/retention", body: `{"idleSessionDays":`, status: bad, slug: invalid},
		{name: "retention: a string", as: "operator", method: "PUT", path: "/tenants/{tenant}/retention", body: `{"idleSessionDays":"90"}`, status: bad, slug: invalid, field: "idleSessionDays"},
		{name: "retention: a fraction", as: "operator", method: "PUT", path: "/tenants/{tenant}/retention", body: `{"fullHistoryDays":1.5}`, status: bad, slug: invalid, field: "fullHistoryDays"},
		{name: "retention: zero", as: "operator", method: "PUT", path: "/tenants/{tenant}/retention", body: `{"idleSessionDays":0}`, status: bad, slug: invalid, field: "idleSessionDays"},
		{name: "retention: negative", as: "operator", method: "PUT", path: "/tenants/{tenant}/retention", body: `{"idleSessionDays":-1}`, status: bad, slug: invalid, field: "idleSessionDays"},
		{name: "retention: huge", as: "operator", method: "PUT", path: "/tenants/{tenant}/retention", body: `{"idleSessionDays":1e300}`, status: bad, slug: invalid, field: "idleSessionDays"},
		{name: "retention: beyond a float", as: "operator", method: "PUT", path: "/tenants/{tenant}/retention", body: `{"idleSessionDays":1e400}`, status: bad, slug: invalid},
		{name: "retention: unknown member", as: "operator", method: "PUT", path: "/tenants/{tenant}/retention", body: `{"idleSessionsDays":9}`, status: bad, slug: invalid, field: "idleSessionsDays"},
		{name: "retention: empty body", as: "operator", method: "PUT", path: "/tenants/{tenant}/retention", body: ``, status: bad, slug: invalid},
		{name: "retention: two objects", as: "operator", method: "PUT", path: "/tenants/{tenant}/retention", body: `{}{}`, status: bad, slug: invalid},

		// ---- admin: an end user's erasure and export.
		{name: "owner: invalid UTF-8", as: "operator", method: "DELETE", path: "/tenants/{tenant}/owners/%FF", status: bad, slug: invalid, field: "sub"},
		{name: "owner: NUL", as: "operator", method: "DELETE", path: "/tenants/{tenant}/owners/a%00b", status: bad, slug: invalid, field: "sub"},
		{name: "owner: too long", as: "operator", method: "DELETE", path: "/tenants/{tenant}/owners/" + strings.Repeat("a", 256), status: bad, slug: invalid, field: "sub"},
		{name: "owner export: control character", as: "operator", method: "GET", path: "/tenants/{tenant}/owners/a%0Ab/export", status: bad, slug: invalid, field: "sub"},
		{name: "owner export: unknown tenant", as: "operator", method: "GET", path: "/tenants/nope-" + store.NewSessionID() + "/owners/alice/export", status: notFound, slug: nf},

		// ---- AAP v3: fork.
		{name: "fork: malformed JSON", method: "POST", path: "/sessions/{sid}/fork", body: `{"at":`, status: bad, slug: invalid},
		{name: "fork: at a string", method: "POST", path: "/sessions/{sid}/fork", body: `{"at":"start"}`, status: bad, slug: invalid},
		{name: "fork: message a string", method: "POST", path: "/sessions/{sid}/fork", body: `{"at":{"message":"2"}}`, status: bad, slug: invalid},
		{name: "fork: message negative", method: "POST", path: "/sessions/{sid}/fork", body: `{"at":{"message":-1}}`, status: bad, slug: invalid, field: "at.message"},
		{name: "fork: message huge", method: "POST", path: "/sessions/{sid}/fork", body: `{"at":{"message":9223372036854775807}}`, status: bad, slug: invalid, field: "at.message"},
		{name: "fork: message beyond int64", method: "POST", path: "/sessions/{sid}/fork", body: `{"at":{"message":1e30}}`, status: bad, slug: invalid},
		{name: "fork: message a fraction", method: "POST", path: "/sessions/{sid}/fork", body: `{"at":{"message":1.5}}`, status: bad, slug: invalid},
		{name: "fork: turn not an id", method: "POST", path: "/sessions/{sid}/fork", body: `{"at":{"turn":"x\u0000y"}}`, status: bad, slug: invalid, field: "at.turn"},
		{name: "fork: another tenant's turn", method: "POST", path: "/sessions/{sid}/fork", body: `{"at":{"turn":"{otherTurn}"}}`, status: bad, slug: invalid, field: "at.turn"},
		{name: "fork: another tenant's session", method: "POST", path: "/sessions/{otherSession}/fork", body: `{}`, status: notFound, slug: nf},
		{name: "fork: owner invalid UTF-8", method: "POST", path: "/sessions/{sid}/fork?owner=%FF", body: `{}`, status: bad, slug: invalid, field: "owner"},
		{name: "fork: owner twice", method: "POST", path: "/sessions/{sid}/fork?owner=a&owner=b", body: `{}`, status: bad, slug: invalid, field: "owner"},

		// ---- AAP v3: export and import.
		{name: "export: another tenant's session", method: "GET", path: "/sessions/{otherSession}/export", status: notFound, slug: nf},
		{name: "export: not a session id", method: "GET", path: "/sessions/sess_%FF/export", status: notFound, slug: nf},
		{name: "import: cut mid-line", method: "POST", path: "/sessions/import", body: cut, status: bad, slug: "invalid-document"},
		{name: "import: empty", method: "POST", path: "/sessions/import", body: ``, status: bad, slug: "invalid-document"},
		{name: "import: a JSON array", method: "POST", path: "/sessions/import", body: "[1,2]\n", status: bad, slug: "invalid-document"},
		{name: "import: a header of another format", method: "POST", path: "/sessions/import", body: `{"type":"header","format":"aapd-tenant","version":3}` + "\n", status: bad, slug: "invalid-document"},
		{name: "import: a header of a version to come", method: "POST", path: "/sessions/import", body: `{"type":"header","format":"aapd-session","version":99999999999999999999}` + "\n", status: bad, slug: "invalid-document"},
		{name: "import: invalid UTF-8", method: "POST", path: "/sessions/import", body: "\xff\xfe\n", status: bad, slug: "invalid-document"},
		{name: "import: NULs", method: "POST", path: "/sessions/import", body: strings.Replace(doc, `"hello"`, `"hel\u0000lo"`, 1), status: bad, slug: "invalid-document"},
		{name: "import: owner with a control character", method: "POST", path: "/sessions/import?owner=a%07", body: doc, status: bad, slug: invalid, field: "owner"},

		// ---- AAP v3: schedules.
		{name: "schedule: malformed JSON", method: "POST", path: "/sessions/{sid}/schedules", body: `{"every":`, status: bad, slug: invalid},
		{name: "schedule: null body", method: "POST", path: "/sessions/{sid}/schedules", body: `null`, status: bad, slug: invalid},
		{name: "schedule: array body", method: "POST", path: "/sessions/{sid}/schedules", body: `[]`, status: bad, slug: invalid},
		{name: "schedule: cron a number", method: "POST", path: "/sessions/{sid}/schedules", body: sched("cron", 5), status: bad, slug: invalid},
		{name: "schedule: every a number", method: "POST", path: "/sessions/{sid}/schedules", body: sched("every", 30), status: bad, slug: invalid},
		{name: "schedule: every negative", method: "POST", path: "/sessions/{sid}/schedules", body: sched("every", "-1h"), status: bad, slug: invalid, field: "every"},
		{name: "schedule: every beyond a duration", method: "POST", path: "/sessions/{sid}/schedules", body: sched("every", "99999999999999999999h"), status: bad, slug: invalid, field: "every"},
		{name: "schedule: every of years", method: "POST", path: "/sessions/{sid}/schedules", body: sched("every", "2562047h"), status: bad, slug: invalid, field: "every"},
		{name: "schedule: cron with a NUL", method: "POST", path: "/sessions/{sid}/schedules", body: sched("cron", "0 9 * * *\u0000"), status: bad, slug: invalid, field: "cron"},
		{name: "schedule: cron of a day that never comes", method: "POST", path: "/sessions/{sid}/schedules", body: sched("cron", "0 0 31 2 *"), status: bad, slug: invalid, field: "cron"},
		{name: "schedule: timezone a path", method: "POST", path: "/sessions/{sid}/schedules", body: sched("cron", "0 9 * * *", "timezone", "../../../etc/passwd"), status: bad, slug: invalid, field: "timezone"},
		{name: "schedule: timezone Local", method: "POST", path: "/sessions/{sid}/schedules", body: sched("cron", "0 9 * * *", "timezone", "Local"), status: bad, slug: invalid, field: "timezone"},
		{name: "schedule: timezone with a NUL", method: "POST", path: "/sessions/{sid}/schedules", body: sched("cron", "0 9 * * *", "timezone", "UTC\u0000"), status: bad, slug: invalid, field: "timezone"},
		{name: "schedule: timezone without cron", method: "POST", path: "/sessions/{sid}/schedules", body: sched("every", "1h", "timezone", "UTC"), status: bad, slug: invalid},
		{name: "schedule: endAt beyond year 9999", method: "POST", path: "/sessions/{sid}/schedules", body: sched("every", "1h", "endAt", "99999-01-01T00:00:00Z"), status: bad, slug: invalid, field: "endAt"},
		{name: "schedule: endAt a number", method: "POST", path: "/sessions/{sid}/schedules", body: sched("every", "1h", "endAt", 1e12), status: bad, slug: invalid},
		{name: "schedule: messages null", method: "POST", path: "/sessions/{sid}/schedules", body: `{"every":"1h","messages":null}`, status: bad, slug: invalid, field: "messages"},
		{name: "schedule: another tenant's session", method: "POST", path: "/sessions/{otherSession}/schedules", body: sched("every", "1h"), status: notFound, slug: nf},
		{name: "schedule: another tenant's schedule", method: "GET", path: "/sessions/{otherSession}/schedules/{otherSchedule}", status: notFound, slug: nf},
		{name: "schedule: another tenant's schedule on this session", method: "DELETE", path: "/sessions/{sid}/schedules/{otherSchedule}", status: notFound, slug: nf},
		{name: "schedule: not an id", method: "GET", path: "/sessions/{sid}/schedules/sch_%FF", status: notFound, slug: nf},

		// ---- AAP v3: background turns and Prefer. A preference not
		// understood is ignored (RFC 7240): the turn's record, at once.
		{name: "wait: not a number", method: "GET", path: "/sessions/{sid}/turns/{tid}", headers: []string{"Prefer", "wait=abc"}, status: http.StatusOK},
		{name: "wait: negative", method: "GET", path: "/sessions/{sid}/turns/{tid}", headers: []string{"Prefer", "wait=-1"}, status: http.StatusOK},
		{name: "wait: huge", method: "GET", path: "/sessions/{sid}/turns/{tid}", headers: []string{"Prefer", "wait=99999999999"}, status: http.StatusOK},
		{name: "wait: beyond uint64", method: "GET", path: "/sessions/{sid}/turns/{tid}", headers: []string{"Prefer", "wait=99999999999999999999999999"}, status: http.StatusOK},
		{name: "wait: empty", method: "GET", path: "/sessions/{sid}/turns/{tid}", headers: []string{"Prefer", "wait="}, status: http.StatusOK},
		{name: "wait: garbage around it", method: "GET", path: "/sessions/{sid}/turns/{tid}", headers: []string{"Prefer", `;;,=,wait=";",respond-async=x`}, status: http.StatusOK},
		{name: "wait: another tenant's turn", method: "GET", path: "/sessions/{sid}/turns/{otherTurn}", headers: []string{"Prefer", "wait=5"}, status: notFound, slug: nf},
		{name: "wait: another tenant's session", method: "GET", path: "/sessions/{otherSession}/turns/{otherTurn}", headers: []string{"Prefer", "wait=5"}, status: notFound, slug: nf},
		{name: "respond-async: malformed JSON", method: "POST", path: "/sessions/{sid}/turns", body: `{"messages":`, headers: []string{"Prefer", "respond-async"}, status: bad, slug: invalid},
		{name: "respond-async: another tenant's session", method: "POST", path: "/sessions/{otherSession}/turns", body: `{"messages":[{"role":"user","content":"hi"}]}`, headers: []string{"Prefer", "respond-async, wait=abc"}, status: notFound, slug: nf},
		{name: "turns: bad cursor", method: "GET", path: "/sessions/{sid}/turns?after=garbage", status: bad, slug: invalid, field: "after"},
		{name: "turn events: after huge", method: "GET", path: "/sessions/{sid}/turns/{tid}/events?after=99999999999999999999", status: bad, slug: invalid, field: "after"},
		{name: "turn events: Last-Event-ID beyond the log", method: "GET", path: "/sessions/{sid}/turns/{tid}/events", headers: []string{"Last-Event-ID", "9223372036854775807"}, status: bad, slug: invalid, field: "Last-Event-ID"},

		// ---- AG-UI: ids a client may send by mistake (issue 28).
		{name: "ag-ui: threadId with a NUL", method: "POST", path: "/ag-ui/agents/echo", body: `{"threadId":"t\u0000","runId":"r","messages":[{"id":"m","role":"user","content":"hi"}]}`, status: bad, slug: invalid, field: "threadId"},
		{name: "ag-ui: threadId not UTF-8", method: "POST", path: "/ag-ui/agents/echo", body: `{"threadId":"t` + "\xff\xfe" + `","runId":"r","messages":[{"id":"m","role":"user","content":"hi"}]}`, status: bad, slug: invalid, field: "threadId"},
		{name: "ag-ui: runId not UTF-8", method: "POST", path: "/ag-ui/agents/echo", body: `{"threadId":"t28","runId":"r` + "\xc3\x28" + `","messages":[{"id":"m","role":"user","content":"hi"}]}`, status: bad, slug: invalid, field: "runId"},
		{name: "ag-ui: runId with a NUL", method: "POST", path: "/ag-ui/agents/echo", body: `{"threadId":"t28","runId":"\u0000","messages":[{"id":"m","role":"user","content":"hi"}]}`, status: bad, slug: invalid, field: "runId"},
		{name: "ag-ui: threadId huge", method: "POST", path: "/ag-ui/agents/echo", body: `{"threadId":"` + strings.Repeat("t", 100_000) + `","runId":"r","messages":[{"id":"m","role":"user","content":"hi"}]}`, status: bad, slug: invalid, field: "threadId"},
		{name: "ag-ui: threadId another tenant's session", method: "POST", path: "/ag-ui/agents/echo", body: `{"threadId":"{otherSession}","runId":"r","messages":[{"id":"m","role":"user","content":"hi"}]}`, status: notFound, slug: nf},

		// ---- The OpenAI door (its own error object).
		{name: "openai: malformed JSON", method: "POST", path: "/openai/v1/responses", body: `{"model":`, status: bad},
		{name: "openai: input a number", method: "POST", path: "/openai/v1/responses", body: `{"model":"echo","input":5}`, status: bad},
		{name: "openai: max_output_tokens huge", method: "POST", path: "/openai/v1/responses", body: `{"model":"echo","input":"hi","max_output_tokens":1e300}`, status: bad},
		{name: "openai: temperature a string", method: "POST", path: "/openai/v1/responses", body: `{"model":"echo","input":"hi","temperature":"hot"}`, status: bad},
		{name: "openai: previous_response_id garbage", method: "POST", path: "/openai/v1/responses", body: `{"model":"echo","input":"hi","previous_response_id":"resp_\u0000"}`, status: notFound},
		{name: "openai: another tenant's conversation", method: "POST", path: "/openai/v1/responses", body: `{"model":"echo","input":"hi","conversation":"{otherConversation}"}`, status: notFound},
		{name: "openai: another tenant's conversation, read", method: "GET", path: "/openai/v1/conversations/{otherConversation}", status: notFound},
		{name: "openai: another tenant's items", method: "GET", path: "/openai/v1/conversations/{otherConversation}/items", status: notFound},
		{name: "openai: items limit huge", method: "GET", path: "/openai/v1/conversations/{conversation}/items?limit=99999999999999999999", status: bad},
		{name: "openai: items order sideways", method: "GET", path: "/openai/v1/conversations/{conversation}/items?order=sideways", status: bad},
		{name: "openai: items after an unknown item", method: "GET", path: "/openai/v1/conversations/{conversation}/items?after=msg_x", status: notFound},
		{name: "openai: item id of a huge seq", method: "GET", path: "/openai/v1/conversations/{conversation}/items/msg_0_99999999999999999999", status: notFound},
		{name: "openai: response not an id", method: "GET", path: "/openai/v1/responses/resp_%FF", status: notFound},
		{name: "openai: starting_after huge", method: "GET", path: "/openai/v1/responses/{otherResponse}?stream=true&starting_after=99999999999999999999", status: notFound},
		{name: "openai: create items not an array", method: "POST", path: "/openai/v1/conversations/{conversation}/items", body: `{"items":{}}`, status: bad},

		// ---- The sandbox-agent door (its own problem types).
		{name: "sandbox-agent: malformed JSON", method: "POST", path: "/sandbox-agent/v1/sessions/fresh", body: `{"agent":`, status: bad},
		{name: "sandbox-agent: agent a number", method: "POST", path: "/sandbox-agent/v1/sessions/fresh", body: `{"agent":5}`, status: bad},
		{name: "sandbox-agent: name not printable", method: "POST", path: "/sandbox-agent/v1/sessions/a%00b", body: `{"agent":"echo"}`, status: bad},
		{name: "sandbox-agent: name invalid UTF-8", method: "POST", path: "/sandbox-agent/v1/sessions/%FF", body: `{"agent":"echo"}`, status: bad},
		{name: "sandbox-agent: name huge", method: "POST", path: "/sandbox-agent/v1/sessions/" + strings.Repeat("n", 5000), body: `{"agent":"echo"}`, status: bad},
		{name: "sandbox-agent: message a number", method: "POST", path: "/sandbox-agent/v1/sessions/mine/messages", body: `{"message":5}`, status: bad},
		{name: "sandbox-agent: events offset negative", method: "GET", path: "/sandbox-agent/v1/sessions/mine/events?offset=-1", status: bad},
		{name: "sandbox-agent: events offset huge", method: "GET", path: "/sandbox-agent/v1/sessions/mine/events?offset=9223372036854775807", status: http.StatusOK},
		{name: "sandbox-agent: events limit beyond int64", method: "GET", path: "/sandbox-agent/v1/sessions/mine/events?limit=99999999999999999999", status: bad},
		{name: "sandbox-agent: include_raw maybe", method: "GET", path: "/sandbox-agent/v1/sessions/mine/events?include_raw=maybe", status: bad},
		{name: "sandbox-agent: Last-Event-ID garbage", method: "GET", path: "/sandbox-agent/v1/sessions/mine/events/sse", headers: []string{"Last-Event-ID", "abc"}, status: bad},
		{name: "sandbox-agent: events of a name not UTF-8", method: "GET", path: "/sandbox-agent/v1/sessions/%FF/events", status: notFound},
		{name: "sandbox-agent: another tenant's session", method: "GET", path: "/sandbox-agent/v1/sessions/{otherSession}/events", status: notFound},
		{name: "sandbox-agent: reply to no permission", method: "POST", path: "/sandbox-agent/v1/sessions/mine/permissions/p1/reply", body: `{"reply":"sometimes"}`, status: notFound},
		{name: "sandbox-agent: unknown permission", method: "POST", path: "/sandbox-agent/v1/sessions/mine/permissions/%FF/reply", body: `{"reply":"once"}`, status: notFound},
		{name: "sandbox-agent: answers to no question", method: "POST", path: "/sandbox-agent/v1/sessions/mine/questions/q1/reply", body: `{"answers":"yes"}`, status: notFound},
		{name: "sandbox-agent: sessions limit huge", method: "GET", path: "/sandbox-agent/v1/sessions?limit=99999999999999999999", status: bad},
	}

	// A conversation of the OpenAI door is a session; a response, a turn.
	conv, otherConv := sid, otherSID
	otherResponse := "resp_" + strings.TrimPrefix(otherSID, "sess_") + strings.TrimPrefix(otherTID, "turn_")
	repl := strings.NewReplacer("{sid}", sid, "{tid}", tid, "{tenant}", tn.Name, "{otherTenant}", otherTn.Name,
		"{otherSession}", otherSID, "{otherTurn}", otherTID, "{otherSchedule}", otherSch.ScheduleID, "{otherWebhook}", wh.ID,
		"{conversation}", conv, "{otherConversation}", otherConv, "{otherResponse}", otherResponse)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			who := c.as(t)
			if tc.as == "operator" {
				who = op.as(t)
			}
			body := tc.body
			if s, ok := body.(string); ok {
				body = repl.Replace(s)
			}
			r := who.do(tc.method, repl.Replace(tc.path), body, tc.headers...)
			if tc.slug == "" {
				if r.StatusCode >= 500 || r.StatusCode != tc.status {
					t.Errorf("%s %s: status %d, want %d; body: %.500s", tc.method, tc.path, r.StatusCode, tc.status, r.body)
				}
				return
			}
			p := checkProblem(t, r, tc.status, tc.slug)
			if p != nil && tc.field != "" && p["field"] != tc.field {
				t.Errorf("field = %v, want %q (detail %v)", p["field"], tc.field, p["detail"])
			}
		})
	}
}
