package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/aapclient"
	"github.com/aapd/aapd/store"
	"github.com/aapd/aapd/store/storetest"
)

// Background turns (docs/background.md) through a real server.

// startBackground starts a background turn through aapclient.
func (c *client) startBackground(sid string, body any, opts ...aapclient.CallOption) *aapclient.BackgroundTurn {
	c.t.Helper()
	bt, err := c.api().StartBackgroundTurn(context.Background(), sid, turnRequest(c.t, body), opts...)
	if err != nil {
		c.t.Fatalf("POST /sessions/%s/turns (respond-async): %v", sid, err)
	}
	return bt
}

// waitEnd waits for a turn's end with aapclient.WaitTurn.
func (c *client) waitEnd(sid, turnID string) aapclient.TurnInfo {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	info, err := c.api().WaitTurn(ctx, sid, turnID)
	if err != nil {
		c.t.Fatalf("wait for turn %s: %v", turnID, err)
	}
	return info
}

func historyLines(msgs []aap.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = string(m.Role) + ": " + m.Content.PlainText()
	}
	return out
}

// Prefer: respond-async answers 202 at once, with Preference-Applied, the
// turn's Location and its record; the turn runs as a streamed one, its
// events followable, and an Idempotency-Key works as for any turn.
func TestPreferRespondAsyncAnswers202WithTheTurnsRecord(t *testing.T) {
	s := startServer(t)
	c := s.newTenant(t)
	sid := c.echoSession(nil)

	r := c.do("POST", "/sessions/"+sid+"/turns", streamUser("delta", slowWords(20, 10)),
		"Prefer", "respond-async", "Idempotency-Key", "bg-1").expect(t, http.StatusAccepted)
	var rec aapclient.TurnInfo
	r.json(t, &rec)
	if r.Header.Get("Preference-Applied") != "respond-async" || r.Header.Get("Location") != "/sessions/"+sid+"/turns/"+rec.TurnID ||
		r.Header.Get("Aapd-Turn-Id") != rec.TurnID {
		t.Errorf("headers = %v", r.Header)
	}
	if (rec.Status != aapclient.TurnRunning && rec.Status != aapclient.TurnQueued) || !rec.Background || rec.Stream != aap.StreamDelta || rec.SessionID != sid {
		t.Errorf("record = %+v", rec)
	}
	// While it runs, the session is its: another turn is a 409 naming it.
	p := c.do("POST", "/sessions/"+sid+"/turns", user("hi")).expect(t, http.StatusConflict).problem(t)
	if p["turnId"] != rec.TurnID {
		t.Errorf("409 names %v, want %s", p["turnId"], rec.TurnID)
	}
	// The retry gets the same turn, replayed; another body with the key is a 422.
	again := c.do("POST", "/sessions/"+sid+"/turns", streamUser("delta", slowWords(20, 10)),
		"Prefer", "respond-async", "Idempotency-Key", "bg-1").expect(t, http.StatusAccepted)
	if again.Header.Get("Aapd-Turn-Id") != rec.TurnID || again.Header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("retry: headers %v", again.Header)
	}
	c.do("POST", "/sessions/"+sid+"/turns", user("other"), "Prefer", "respond-async", "Idempotency-Key", "bg-1").expect(t, 422)

	events := c.followTurn(sid, rec.TurnID, 0).read(-1)
	if events[0].Type != aap.EventTurnStart || events[len(events)-1].Type != aap.EventTurnStop || events[len(events)-1].StopReason != aap.StopEndTurn {
		t.Errorf("events = %v", types(events))
	}
	info := c.waitEnd(sid, rec.TurnID)
	if info.Status != aapclient.TurnCompleted || info.Attempts != 1 || !info.Background {
		t.Errorf("ended record = %+v", info)
	}
	want := []string{"user: " + slowWords(20, 10), "assistant: " + wordsText(20)}
	if got := historyLines(c.history(sid, aap.HistoryFull)); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("history = %q\nwant %q", got, want)
	}

	// Through aapclient: start, then wait for the end.
	bt := c.startBackground(sid, user("again"))
	if bt.Location != "/sessions/"+sid+"/turns/"+bt.TurnID || bt.Replayed {
		t.Errorf("background turn = %+v", bt)
	}
	if info := c.waitEnd(sid, bt.TurnID); info.Status != aapclient.TurnCompleted || info.StopReason != aap.StopEndTurn {
		t.Errorf("ended = %+v", info)
	}
}

// A background turn that stops for a client tool call ends as it would in
// a stream: completed, stop reason tool_use, the call pending; the client
// answers it with the next turn, in the background or not.
func TestBackgroundTurnStoppingForAClientToolEndsAsInAStream(t *testing.T) {
	s := startServer(t)
	c := s.newTenant(t)
	sid := c.echoSession(nil, "lookup")
	bt := c.startBackground(sid, user(`/tool lookup {"q":"x"}`))
	info := c.waitEnd(sid, bt.TurnID)
	if info.Status != aapclient.TurnCompleted || info.StopReason != aap.StopToolUse {
		t.Fatalf("record = %+v", info)
	}
	calls := toolCalls(c.history(sid, aap.HistoryFull))
	if len(calls) != 1 || calls[0].Name != "lookup" {
		t.Fatalf("tool calls = %+v", calls)
	}
	next := c.startBackground(sid, map[string]any{"messages": []any{map[string]any{"role": "tool", "toolCallId": calls[0].ToolCallID, "content": "found"}}})
	if info := c.waitEnd(sid, next.TurnID); info.Status != aapclient.TurnCompleted || info.StopReason != aap.StopEndTurn {
		t.Errorf("the answer's turn = %+v", info)
	}
}

// With every worker busy, background turns wait in the queue — not
// refused — up to the tenant's maxQueuedTurns, past which they are 429;
// they run first in, first out once workers free. A queued turn can be
// cancelled before it runs.
func TestBackgroundTurnsQueueWhileEveryWorkerIsBusyUpToMaxQueuedTurns(t *testing.T) {
	s := startServer(t, func(c *Config) { c.Workers = 1 })
	c, tn := s.newTenantWithID(t)
	if _, err := s.Store.TenantSetLimits(context.Background(), tn.ID, store.TenantLimits{MaxQueuedTurns: 3}); err != nil {
		t.Fatal(err)
	}
	s.Limits.Notify(store.Notification{Channel: store.LimitsChangedChannel, Payload: tn.ID})
	// The busy turn outlasts the queueing below on a loaded machine (4 s):
	// were it to end first, its worker would take a queued turn and the
	// fourth would find room.
	busy := c.openTurn(c.echoSession(nil), streamUser("delta", slowWords(40, 100)))
	busy.read(2)

	var queued []*aapclient.BackgroundTurn
	var sids []string
	for i := range 3 {
		sid := c.echoSession(nil)
		bt := c.startBackground(sid, user(fmt.Sprintf("queued %d", i)))
		if bt.Status != aapclient.TurnQueued || bt.Attempts != 0 {
			t.Fatalf("background turn %d with the only worker busy = %+v", i, bt.TurnInfo)
		}
		// Its message is stored at once: the turn is accepted.
		if got := historyLines(c.history(sid, aap.HistoryFull)); fmt.Sprint(got) != fmt.Sprint([]string{fmt.Sprintf("user: queued %d", i)}) {
			t.Errorf("history of queued turn %d = %q", i, got)
		}
		queued, sids = append(queued, bt), append(sids, sid)
	}
	_, err := c.api().StartBackgroundTurn(context.Background(), c.echoSession(nil), turnRequest(t, user("one too many")))
	if e := refusal(t, err, http.StatusTooManyRequests, "queue-full"); e.RetryAfter <= 0 {
		t.Errorf("429 without Retry-After: %v", e)
	}
	// The last queued turn is cancelled before a worker takes it.
	info, stopping, err := c.api().CancelTurn(context.Background(), sids[2], queued[2].TurnID)
	if err != nil || stopping || info.Status != aapclient.TurnCancelled {
		t.Fatalf("cancel a queued turn: %+v, %v, %v", info, stopping, err)
	}
	busy.read(-1)
	var last time.Time
	for i, bt := range queued[:2] {
		info := c.waitEnd(sids[i], bt.TurnID)
		if info.Status != aapclient.TurnCompleted || info.Attempts != 1 || info.FinishedAt == nil {
			t.Fatalf("queued turn %d = %+v", i, info)
		}
		if info.FinishedAt.Before(last) {
			t.Errorf("queued turn %d ended before the one queued before it", i)
		}
		last = *info.FinishedAt
		if got := historyLines(c.history(sids[i], aap.HistoryFull)); len(got) != 2 || got[1] != fmt.Sprintf("assistant: Echo: queued %d", i) {
			t.Errorf("history of queued turn %d = %q", i, got)
		}
	}
	if got := historyLines(c.history(sids[2], aap.HistoryFull)); len(got) != 1 {
		t.Errorf("the cancelled turn ran: %q", got)
	}
}

// The tests below run real aapd processes over a fake OpenAI provider whose
// answers to one step of a turn are held until the process asking dies.

// stepProvider is an OpenAI-compatible chat completions server: to a
// conversation ending with the user's message it answers with a call of the
// calculator, to one ending with the tool's result with the answer. It
// counts the calls of each step, and holds the first `hold` calls of the
// second until the process asking goes away.
type stepProvider struct {
	t     *testing.T
	hold  int
	calls chan string // the step of each call, as it comes: "user" or "tool"
}

func newStepProvider(t *testing.T, hold int) (*stepProvider, string) {
	p := &stepProvider{t: t, hold: hold, calls: make(chan string, 100)}
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	return p, srv.URL
}

func (p *stepProvider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Messages []struct {
			Role string `json:"role"`
		} `json:"messages"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil || len(body.Messages) == 0 {
		http.Error(w, `{"error":{"message":"bad request"}}`, http.StatusBadRequest)
		return
	}
	step := body.Messages[len(body.Messages)-1].Role
	p.calls <- step
	w.Header().Set("Content-Type", "application/json")
	if step == "user" {
		fmt.Fprint(w, openaiCompletion(`{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"calculator","arguments":"{\"expression\":\"6*7\"}"}}]}`,
			"tool_calls", `{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}`))
		return
	}
	if p.hold > 0 {
		p.hold--
		<-r.Context().Done() // the process asking died
		return
	}
	fmt.Fprint(w, openaiCompletion(`{"role":"assistant","content":"It is 42."}`, "stop", `{"prompt_tokens":20,"completion_tokens":4,"total_tokens":24}`))
}

// next waits for the provider's next call and returns its step.
func (p *stepProvider) next(within time.Duration) string {
	p.t.Helper()
	select {
	case step := <-p.calls:
		return step
	case <-time.After(within):
		p.t.Fatalf("the provider was not called within %s", within)
		return ""
	}
}

// none checks that the provider is not called for a while.
func (p *stepProvider) none(d time.Duration) {
	p.t.Helper()
	select {
	case step := <-p.calls:
		p.t.Errorf("the provider was asked the %q step again", step)
	case <-time.After(d):
	}
}

// stepAgentsFile is an agents configuration with one agent, "bot", on the
// provider at baseURL, with the calculator.
func stepAgentsFile(t *testing.T, baseURL string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "agents.yaml")
	err := os.WriteFile(path, []byte(fmt.Sprintf(`agents:
  - name: bot
    model:
      provider: openai
      base_url: %s/v1
      api_key: server-key
      models: [model-a]
      max_retries: 0
      timeout: 60s
    tools:
      builtin: [calculator]
`, baseURL)), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	return path
}

func botSession(c *client) string {
	return c.createSession(map[string]any{"agent": map[string]any{"name": "bot",
		"tools": []any{map[string]any{"name": "calculator", "trust": true}}}})
}

// A background turn whose replica is SIGKILLed mid-step is taken over by
// another replica, which goes on from the last committed step: the model
// is asked again only for the step that had not committed, and every
// message is stored once.
func TestBackgroundTurnSurvivesItsReplicaBeingKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	provider, base := newStepProvider(t, 1)
	dbURL, key := processTenant(t)
	agentsFile := stepAgentsFile(t, base)
	a := startProc(t, dbURL, "--config", agentsFile)
	ca := &client{t: t, base: a.base, key: key}
	sid := botSession(ca)
	bt := ca.startBackground(sid, streamUser("message", "what is 6*7?"))

	if got := provider.next(10 * time.Second); got != "user" {
		t.Fatalf("first call: %q", got)
	}
	// Asked the step after the tool's result: the tool call and its result
	// are committed.
	if got := provider.next(10 * time.Second); got != "tool" {
		t.Fatalf("second call: %q", got)
	}
	b := startProc(t, dbURL, "--config", agentsFile)
	killed := time.Now()
	a.kill()

	cb := &client{t: t, base: b.base, key: key}
	if got := provider.next(30 * time.Second); got != "tool" {
		t.Fatalf("the resuming replica asked the %q step", got)
	}
	taken := time.Since(killed)
	info := cb.waitEnd(sid, bt.TurnID)
	if info.Status != aapclient.TurnCompleted || info.Attempts != 2 || info.StopReason != aap.StopEndTurn {
		t.Errorf("record = %+v", info)
	}
	// Within the lease (30 s) and a few seconds; in fact at once, as the
	// dead process's instance lock is gone.
	if taken > 35*time.Second {
		t.Errorf("the turn was taken over %s after the kill", taken)
	}
	provider.none(500 * time.Millisecond)
	want := []string{"user: what is 6*7?", "assistant: ", "tool: 42", "assistant: It is 42."}
	if got := historyLines(cb.history(sid, aap.HistoryFull)); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("history = %q\nwant %q", got, want)
	}
	if calls := toolCalls(cb.history(sid, aap.HistoryFull)); len(calls) != 1 {
		t.Errorf("tool calls stored: %+v", calls)
	}
	events := cb.followTurn(sid, bt.TurnID, 0).read(-1)
	if n := strings.Count(strings.Join(types(events), ","), "turn_stop"); n != 1 || events[len(events)-1].Type != aap.EventTurnStop {
		t.Errorf("events = %v", types(events))
	}
}

// A background turn whose process dies as often as --turn-max-attempts
// allows fails with attempts_exhausted, keeping what it had committed.
func TestBackgroundTurnFailsWithAttemptsExhausted(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	provider, base := newStepProvider(t, 2)
	dbURL, key := processTenant(t)
	agentsFile := stepAgentsFile(t, base)
	args := []string{"--config", agentsFile, "--turn-max-attempts", "2"}
	a := startProc(t, dbURL, args...)
	ca := &client{t: t, base: a.base, key: key}
	sid := botSession(ca)
	bt := ca.startBackground(sid, user("what is 6*7?"))
	provider.next(10 * time.Second) // user
	provider.next(10 * time.Second) // tool, held
	b := startProc(t, dbURL, args...)
	a.kill()
	if got := provider.next(30 * time.Second); got != "tool" { // attempt 2, held
		t.Fatalf("attempt 2 asked the %q step", got)
	}
	c := startProc(t, dbURL, args...)
	b.kill()
	cc := &client{t: t, base: c.base, key: key}
	info := cc.waitEnd(sid, bt.TurnID)
	if info.Status != aapclient.TurnFailed || info.Attempts != 2 || info.Error == nil || info.Error.Type != aap.TurnErrorAttemptsExhausted {
		t.Errorf("record = %+v (error %+v)", info, info.Error)
	}
	provider.none(500 * time.Millisecond)
	want := []string{"user: what is 6*7?", "assistant: ", "tool: 42"}
	if got := historyLines(cc.history(sid, aap.HistoryFull)); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("history = %q\nwant %q", got, want)
	}
	// The session is free again.
	var active string
	storetest.Scan(t, dbURL, `SELECT coalesce(active_turn_id, '') FROM sessions WHERE id = $1`, []any{sid}, &active)
	if active != "" {
		t.Errorf("the session is still claimed by %s", active)
	}
}

// GET …/turns/:turnId with Prefer: wait=N answers once the turn has ended,
// or after N seconds with the record as it is then, saying so with
// Preference-Applied: wait=N (N at most 60); a wait that is not a number
// is ignored. aapclient.WaitTurn waits with it.
func TestPreferWaitAnswersATurnsRecordAtItsEnd(t *testing.T) {
	s := startServer(t)
	c := s.newTenant(t)
	sid := c.echoSession(nil)
	turnPath := func(id string) string { return "/sessions/" + sid + "/turns/" + id }

	// A turn of ten seconds: a wait of one answers with it running.
	long := c.startBackground(sid, streamUser("delta", slowWords(100, 100)))
	start := time.Now()
	r := c.do("GET", turnPath(long.TurnID), nil, "Prefer", "wait=1").expect(t, http.StatusOK)
	var rec aapclient.TurnInfo
	r.json(t, &rec)
	if rec.Status != aapclient.TurnRunning || r.Header.Get("Preference-Applied") != "wait=1" || time.Since(start) < time.Second {
		t.Errorf("after a wait of 1 s: %s, Preference-Applied %q, answered in %s", rec.Status, r.Header.Get("Preference-Applied"), time.Since(start))
	}
	c.do("POST", turnPath(long.TurnID)+"/cancel", nil).expect(t, http.StatusOK)

	// A turn of about a second, waited for among other preferences: its
	// end, in one request.
	short := c.startBackground(sid, streamUser("delta", slowWords(10, 100)))
	r = c.do("GET", turnPath(short.TurnID), nil, "Prefer", "return=minimal, wait=30").expect(t, http.StatusOK)
	r.json(t, &rec)
	if rec.Status != aapclient.TurnCompleted || rec.StopReason != aap.StopEndTurn || r.Header.Get("Preference-Applied") != "wait=30" {
		t.Errorf("waited for: %+v, Preference-Applied %q", rec, r.Header.Get("Preference-Applied"))
	}
	// An ended turn answers at once; the wait is bounded; a wait that is
	// not a number is no preference.
	if r := c.do("GET", turnPath(short.TurnID), nil, "Prefer", "wait=3600").expect(t, http.StatusOK); r.Header.Get("Preference-Applied") != "wait=60" {
		t.Errorf("wait=3600: Preference-Applied %q, want wait=60", r.Header.Get("Preference-Applied"))
	}
	if r := c.do("GET", turnPath(short.TurnID), nil, "Prefer", "wait=soon").expect(t, http.StatusOK); r.Header.Get("Preference-Applied") != "" {
		t.Errorf("wait=soon: Preference-Applied %q, want none", r.Header.Get("Preference-Applied"))
	}

	// aapclient.WaitTurn, on a turn that outlasts nothing: its record.
	bt := c.startBackground(sid, streamUser("delta", slowWords(5, 100)))
	if info := c.waitEnd(sid, bt.TurnID); info.Status != aapclient.TurnCompleted || info.StopReason != aap.StopEndTurn {
		t.Errorf("WaitTurn = %+v", info)
	}
}

// A replica that shuts down answers a GET …/turns/:turnId waiting with
// Prefer: wait on a turn another replica runs where the wait is, with the
// record (running), as it ends its followers' streams: it does not hold
// its shutdown up for the wait's length and then cut the request, and its
// client asks again elsewhere.
func TestPreferWaitEndsWhenItsReplicaShutsDown(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	dbURL, key := processTenant(t)
	a := startProc(t, dbURL, "--shutdown-delay", "2s", "--drain-timeout", "2s")
	b := startProc(t, dbURL)
	cb := &client{t: t, base: b.base, key: key}
	sid := cb.echoSession(nil)
	bt := cb.startBackground(sid, streamUser("delta", slowWords(300, 100))) // runs on b for 30 s

	type answer struct {
		status  int
		applied string
		rec     aapclient.TurnInfo
		err     error
	}
	answered := make(chan answer, 1)
	go func() {
		req, err := http.NewRequest("GET", a.base+"/sessions/"+sid+"/turns/"+bt.TurnID, nil)
		if err != nil {
			answered <- answer{err: err}
			return
		}
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Prefer", "wait=60")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			answered <- answer{err: err}
			return
		}
		defer res.Body.Close()
		var rec aapclient.TurnInfo
		err = json.NewDecoder(res.Body).Decode(&rec)
		answered <- answer{status: res.StatusCode, applied: res.Header.Get("Preference-Applied"), rec: rec, err: err}
	}()
	// The request reaches a before its shutdown delay ends, whenever it
	// is sent within it.
	time.Sleep(500 * time.Millisecond)
	a.signal(syscall.SIGTERM)

	var got answer
	select {
	case got = <-answered:
	case <-time.After(60 * time.Second):
		t.Fatal("no answer to the waiting request")
	}
	if got.err != nil || got.status != http.StatusOK || got.applied != "wait=60" || got.rec.Status != aapclient.TurnRunning {
		t.Errorf("the waiting request on the replica shutting down: %d, Preference-Applied %q, %+v, %v", got.status, got.applied, got.rec, got.err)
	}
	// Answered before the turn's end: it still runs on b.
	var rec aapclient.TurnInfo
	cb.do("GET", "/sessions/"+sid+"/turns/"+bt.TurnID, nil).expect(t, http.StatusOK).json(t, &rec)
	if rec.Status != aapclient.TurnRunning {
		t.Errorf("the turn on b: %s, want running", rec.Status)
	}
	if code := a.exitCode(30 * time.Second); code != 0 {
		t.Errorf("a exited %d", code)
	}
	cb.do("POST", "/sessions/"+sid+"/turns/"+bt.TurnID+"/cancel", nil).expect(t, http.StatusOK)
}
