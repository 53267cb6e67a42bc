package main

import (
	"bytes"
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aapd/aapd/store"
	"github.com/aapd/aapd/store/storetest"
)

// Quotas and fairness (docs/tenancy.md), against a real server. Nothing
// here asserts a duration: a request over a limit is found by sending
// until one is refused, within a count no slow machine can stretch past
// the refill.

// slowTurn is a turn that runs until it is cancelled: its stream is open
// and its turn admitted when it returns.
type slowTurn struct {
	c      *client
	sid    string
	turnID string
	stream *turnStream
}

// startSlowTurn opens a streaming turn of the echo agent that would take
// minutes; the test cancels it when it ends.
func (c *client) startSlowTurn() *slowTurn {
	c.t.Helper()
	sid := c.echoSession(nil)
	stream := c.openTurn(sid, streamUser("delta", slowWords(3000, 50)))
	st := &slowTurn{c: c, sid: sid, turnID: stream.TurnID(), stream: stream}
	c.t.Cleanup(st.stop)
	return st
}

// stop cancels the turn and waits for its end.
func (st *slowTurn) stop() {
	if st.stream == nil {
		return
	}
	_, _, _ = st.c.api().CancelTurn(context.Background(), st.sid, st.turnID) // waitTurn judges
	st.stream.close()
	st.stream = nil
	st.c.waitTurn(st.sid, st.turnID)
}

// turnRefusal sends a turn through aapclient and asserts it is refused
// with the status, the problem type and, with retry, a Retry-After (the
// OpenAPI check holds it to whole seconds ≥ 1).
func (c *client) turnRefusal(t *testing.T, sid string, status int, slug string, retry bool) {
	t.Helper()
	_, err := c.as(t).api().SendTurn(t.Context(), sid, turnRequest(t, user("one more")))
	if e := refusal(t, err, status, slug); retry && e.RetryAfter < time.Second {
		t.Errorf("%s %s: Retry-After %s, want whole seconds ≥ 1", e.Method, e.Path, e.RetryAfter)
	}
}

// checkRetryAfter asserts a whole number of seconds of at least one.
func checkRetryAfter(t *testing.T, r response) {
	t.Helper()
	if n, err := strconv.Atoi(r.Header.Get("Retry-After")); err != nil || n < 1 {
		t.Errorf("Retry-After = %q, want whole seconds ≥ 1", r.Header.Get("Retry-After"))
	}
}

// Tenant A fills every worker; its next turn is refused with 429
// fair-share (A alone is the load: not a 503), while B's turns still
// start, up to B's fair share.
func TestFairShareOfBusyWorkers(t *testing.T) {
	const workers = 4
	s := startServer(t, func(c *Config) { c.Workers = workers })
	a, b := s.newTenant(t), s.newTenant(t)
	for range workers {
		a.startSlowTurn()
	}
	a.turnRefusal(t, a.echoSession(nil), http.StatusTooManyRequests, "fair-share", true) // a lone tenant over the pool

	b.startSlowTurn() // below its share of 2: admitted beyond the pool
	if got := b.say(b.echoSession(nil), "hello").Messages[0].Content.PlainText(); got != "Echo: hello" {
		t.Fatalf("B's turn answered %q", got)
	}
	a.turnRefusal(t, a.echoSession(nil), http.StatusTooManyRequests, "fair-share", true)
	// B at its share of 2 (one slow turn running, one more now): refused too.
	bs := b.startSlowTurn()
	b.turnRefusal(t, b.echoSession(nil), http.StatusTooManyRequests, "fair-share", false)
	bs.stop()
}

// maxRunningTurns refuses a tenant's turn beyond it with 429, and only
// that tenant's.
func TestMaxRunningTurns(t *testing.T) {
	s := startServer(t, func(c *Config) {
		c.DatabaseURL = storetest.NewDatabase(t) // the only replica: the whole limit is its
		c.Limits.MaxRunningTurns = 1
	})
	a, b := s.newTenant(t), s.newTenant(t)
	running := a.startSlowTurn()
	sid := a.echoSession(nil)
	a.turnRefusal(t, sid, http.StatusTooManyRequests, "running-turns-limit", true)
	b.say(b.echoSession(nil), "mine is free")

	running.stop()
	api := a.api()
	waitFor(t, "A's turn to be admitted again", 10*time.Second, func() bool {
		_, err := api.SendTurn(t.Context(), sid, turnRequest(t, user("now")))
		return err == nil
	})
}

// A burst over the rate gets 429 with Retry-After and the RateLimit
// headers, which successful requests carry too; another tenant's budget is
// untouched; a second key of the tenant shares its budget and is held to
// its own share of it. (Raw: the RateLimit headers are the wire.)
func TestRateLimit(t *testing.T) {
	s := startServer(t, func(c *Config) {
		c.DatabaseURL = storetest.NewDatabase(t)
		c.Limits.RequestsPerSecond, c.Limits.Burst = 1, 3
	})
	a, tn := s.newTenantWithID(t)
	b := s.newTenant(t)
	for i := range 3 {
		r := a.do("GET", "/sessions", nil).expect(t, http.StatusOK)
		if got, want := r.Header.Get("RateLimit-Policy"), `"tenant";q=3;w=3`; got != want {
			t.Fatalf("request %d: RateLimit-Policy %q, want %q", i, got, want)
		}
		if got := r.Header.Get("RateLimit"); !strings.HasPrefix(got, `"tenant";r=`) || !strings.Contains(got, ";t=") {
			t.Fatalf("request %d: RateLimit %q", i, got)
		}
	}
	refused := sendUntilRefused(t, a)
	checkProblem(t, refused, http.StatusTooManyRequests, "rate-limited")
	checkRetryAfter(t, refused)
	if got := refused.Header.Get("RateLimit"); !strings.HasPrefix(got, `"tenant";r=0;t=`) {
		t.Errorf("refused: RateLimit %q, want r=0", got)
	}

	b.do("GET", "/sessions", nil).expect(t, http.StatusOK)

	second := &client{t: t, base: s.base, key: storetest.NewKey(t, s.Store, tn.ID, "second")}
	r := sendUntilRefused(t, second) // the tenant's bucket is shared
	if got := r.Header.Get("RateLimit-Policy"); !strings.Contains(got, `"principal";q=`) {
		t.Errorf("two keys active: RateLimit-Policy %q lacks the principal's share", got)
	}
}

// A change of a tenant's limits applies at once, without a restart: the
// notification reaches the server long before its cache's TTL. (Raw: the
// RateLimit headers are the wire.)
func TestLimitChangeAppliesWithoutRestart(t *testing.T) {
	s := startServer(t, func(c *Config) { c.DatabaseURL = storetest.NewDatabase(t) })
	a, tn := s.newTenantWithID(t)
	ctx := context.Background()
	if r := a.do("GET", "/sessions", nil).expect(t, http.StatusOK); r.Header.Get("RateLimit") != "" {
		t.Fatalf("unlimited tenant got RateLimit %q", r.Header.Get("RateLimit"))
	}
	if _, err := s.Store.TenantSetLimits(ctx, tn.ID, store.TenantLimits{RequestsPerSecond: 1, Burst: 2}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the new limit to apply", 10*time.Second, func() bool {
		return a.do("GET", "/sessions", nil).Header.Get("RateLimit-Policy") == `"tenant";q=2;w=2`
	})
	checkProblem(t, sendUntilRefused(t, a), http.StatusTooManyRequests, "rate-limited")

	if _, err := s.Store.TenantSetLimits(ctx, tn.ID, store.TenantLimits{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the limit to be lifted", 10*time.Second, func() bool {
		r := a.do("GET", "/sessions", nil)
		return r.StatusCode == http.StatusOK && r.Header.Get("RateLimit") == ""
	})
}

// sendUntilRefused sends requests until one is refused with 429 and
// returns it. At a rate of a few per second, 100 requests cannot all pass
// however slow the machine.
func sendUntilRefused(t *testing.T, c *client) response {
	t.Helper()
	for range 100 {
		r := c.do("GET", "/sessions", nil)
		if r.StatusCode == http.StatusTooManyRequests {
			return r
		}
		r.expect(t, http.StatusOK)
	}
	t.Fatal("100 requests in a row passed a limit of a few per second")
	return response{}
}

// The default limits come from flags or the environment; none by default.
func TestServeLimitFlags(t *testing.T) {
	clearServeEnv(t)
	db := []string{"--database-url", "postgres://x/y"}
	cfg, err := parseServeFlags(db, &bytes.Buffer{})
	if err != nil || cfg.Limits != (store.TenantLimits{}) {
		t.Fatalf("defaults: %+v, %v", cfg.Limits, err)
	}
	t.Setenv("AAPD_RATE_LIMIT", "2.5")
	t.Setenv("AAPD_RATE_BURST", "5")
	t.Setenv("AAPD_MAX_RUNNING_TURNS", "4")
	cfg, err = parseServeFlags(append(db, "--max-running-turns", "6"), &bytes.Buffer{})
	if want := (store.TenantLimits{RequestsPerSecond: 2.5, Burst: 5, MaxRunningTurns: 6}); err != nil || cfg.Limits != want {
		t.Fatalf("from the environment and flags: %+v, %v; want %+v", cfg.Limits, err, want)
	}
	for _, bad := range [][]string{{"--rate-limit", "-1"}, {"--rate-limit", "NaN"}, {"--rate-burst", "-2"}, {"--max-running-turns", "-1"}} {
		_, err := parseServeFlags(append(db, bad...), &bytes.Buffer{})
		cliResult{err: err}.failed(t, 2, bad[0])
	}
}
