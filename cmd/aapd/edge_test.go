package main

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/httpapi"
)

// The edge of a real `aapd serve` process, configured from its flags and
// environment: metrics on a listener of their own, CORS turned off by an
// empty AAPD_CORS_ORIGINS, and every timeout short. (Not parallel: it sets
// an environment variable for the process to inherit.) Raw requests
// throughout: headers, methods, sizes, timeouts and listeners are the wire.
func TestEdgeOfARealProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	dbURL, key := processTenant(t)
	t.Setenv("AAPD_CORS_ORIGINS", "") // set, and empty: no cross-origin access
	metricsAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	p := startProc(t, dbURL, "--metrics-addr", metricsAddr, "--body-timeout", "300ms",
		"--read-header-timeout", "300ms", "--idle-timeout", "300ms")
	anon := &client{t: t, base: p.base}
	c := &client{t: t, base: p.base, key: key}

	t.Run("metrics on their own listener only", func(t *testing.T) {
		anon.do("GET", "/metrics", nil).expect(t, http.StatusNotFound)
		m := (&client{t: t, base: "http://" + metricsAddr}).do("GET", "/metrics", nil).expect(t, http.StatusOK)
		if !strings.Contains(string(m.body), "aapd_http_requests_total{") {
			t.Errorf("metrics lack the request counter:\n%s", m.body)
		}
	})
	t.Run("made-up methods add no series", func(t *testing.T) {
		madeUpMethodsAddNoSeries(t, p.base, "http://"+metricsAddr)
	})
	t.Run("empty CORS origins allow none", func(t *testing.T) {
		pre := anon.do("OPTIONS", "/sessions", nil, "Origin", "https://playground.example", "Access-Control-Request-Method", "POST")
		pre.expect(t, http.StatusForbidden).problem(t)
		r := anon.do("GET", "/meta", nil, "Origin", "https://playground.example").expect(t, http.StatusOK)
		if v := r.Header.Get("Access-Control-Allow-Origin"); v != "" {
			t.Errorf("Access-Control-Allow-Origin: %q with CORS off", v)
		}
	})
	t.Run("slow headers are cut", func(t *testing.T) { slowHeadersAreCut(t, p.base, 300*time.Millisecond) })
	t.Run("a stalled body is a 408", func(t *testing.T) { stalledBodyIs408(t, p.base, key, 300*time.Millisecond) })
	t.Run("idle connections are closed", func(t *testing.T) { idleConnectionIsClosed(t, p.base, 300*time.Millisecond) })
	t.Run("streams outlive the body timeout", func(t *testing.T) { streamOutlivesBodyTimeout(t, c) })
}

// The same edge in process, with the defaults' shapes, for what needs no
// process of its own.
func TestEdgeTimeoutsAndLimits(t *testing.T) {
	t.Parallel()
	s := startServer(t, func(c *Config) {
		c.ReadHeaderTimeout, c.BodyTimeout, c.IdleTimeout = 300*time.Millisecond, 300*time.Millisecond, 300*time.Millisecond
		c.MaxHeaderBytes = 8 << 10
	})
	c := s.newTenant(t)
	t.Run("slow headers are cut", func(t *testing.T) { slowHeadersAreCut(t, s.base, 300*time.Millisecond) })
	t.Run("a stalled body is a 408", func(t *testing.T) { stalledBodyIs408(t, s.base, c.key, 300*time.Millisecond) })
	t.Run("idle connections are closed", func(t *testing.T) { idleConnectionIsClosed(t, s.base, 300*time.Millisecond) })
	t.Run("streams outlive the body timeout", func(t *testing.T) { streamOutlivesBodyTimeout(t, c) })
	t.Run("large headers are a 431", func(t *testing.T) {
		r := c.do("GET", "/meta", nil, "X-Big", strings.Repeat("a", 64<<10))
		r.expect(t, http.StatusRequestHeaderFieldsTooLarge)
	})
}

func TestMetricsNeedTheOperatorTokenOnTheMainListener(t *testing.T) {
	t.Parallel()
	s := startServer(t, func(c *Config) { c.AdminToken = testOperatorToken })
	anon := &client{t: t, base: s.base}
	anon.do("GET", "/metrics", nil).expect(t, http.StatusUnauthorized).problem(t)
	(&client{t: t, base: s.base, key: "not-it"}).do("GET", "/metrics", nil).expect(t, http.StatusUnauthorized)
	m := (&client{t: t, base: s.base, key: testOperatorToken}).do("GET", "/metrics", nil).expect(t, http.StatusOK)
	if !strings.Contains(string(m.body), "aapd_turns_running") {
		t.Errorf("metrics: %s", m.body)
	}
	anon.do("GET", "/healthz", nil).expect(t, http.StatusOK) // health stays public
	if s.MetricsAddr() != "" {
		t.Errorf("MetricsAddr = %q without --metrics-addr", s.MetricsAddr())
	}
}

func TestMetricsListenerOfItsOwn(t *testing.T) {
	t.Parallel()
	s := startServer(t, func(c *Config) { c.MetricsAddr = "127.0.0.1:0"; c.AdminToken = testOperatorToken })
	(&client{t: t, base: s.base, key: testOperatorToken}).do("GET", "/metrics", nil).expect(t, http.StatusNotFound)
	m := &client{t: t, base: "http://" + s.MetricsAddr()}
	m.do("GET", "/metrics", nil).expect(t, http.StatusOK)
	// Nothing but metrics there. (Asked without the OpenAPI check of
	// client.do: this listener is not the API the document describes, and
	// answers other paths with net/http's plain 404.)
	res, err := http.Get(m.base + "/sessions")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusNotFound {
		t.Errorf("GET /sessions on the metrics listener: %d, want 404", res.StatusCode)
	}
}

func TestCORSOrigins(t *testing.T) {
	t.Parallel()
	off := startServer(t, func(c *Config) { c.CORSOrigins = nil })
	some := startServer(t, func(c *Config) { c.CORSOrigins = []string{"https://app.example"} })
	preflight := func(base, origin string) response {
		return (&client{t: t, base: base}).do("OPTIONS", "/sessions", nil,
			"Origin", origin, "Access-Control-Request-Method", "POST", "Access-Control-Request-Headers", "authorization")
	}
	r := preflight(off.base, "https://app.example").expect(t, http.StatusForbidden)
	if p := r.problem(t); p["type"] != httpapi.ProblemTypeBase+"cors-refused" {
		t.Errorf("problem = %v", p)
	}
	r = preflight(some.base, "https://app.example").expect(t, http.StatusNoContent)
	if r.Header.Get("Access-Control-Allow-Origin") != "https://app.example" {
		t.Errorf("allowed origin: %v", r.Header)
	}
	preflight(some.base, "https://evil.example").expect(t, http.StatusForbidden).problem(t)
	g := (&client{t: t, base: off.base}).do("GET", "/meta", nil, "Origin", "https://app.example").expect(t, http.StatusOK)
	if v := g.Header.Get("Access-Control-Allow-Origin"); v != "" {
		t.Errorf("CORS off, yet Access-Control-Allow-Origin: %q", v)
	}
}

func TestEdgeFlagsFromEnvironment(t *testing.T) {
	clearServeEnv(t)
	db := []string{"--database-url", "postgres://x/y"}
	cfg, err := parseServeFlags(db, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	want := Edge{ReadHeaderTimeout: 10 * time.Second, BodyTimeout: 30 * time.Second, IdleTimeout: 120 * time.Second, MaxHeaderBytes: 64 << 10}
	if cfg.Edge != want || strings.Join(cfg.CORSOrigins, ",") != "*" {
		t.Errorf("defaults: %+v, CORS %q; want %+v and * (unset AAPD_CORS_ORIGINS)", cfg.Edge, cfg.CORSOrigins, want)
	}
	t.Setenv("AAPD_CORS_ORIGINS", "")
	t.Setenv("AAPD_METRICS_ADDR", "127.0.0.1:9090")
	t.Setenv("AAPD_READ_HEADER_TIMEOUT", "2s")
	t.Setenv("AAPD_BODY_TIMEOUT", "3s")
	t.Setenv("AAPD_IDLE_TIMEOUT", "4s")
	t.Setenv("AAPD_MAX_HEADER_BYTES", "") // blank number: the default
	if cfg, err = parseServeFlags(db, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	want = Edge{MetricsAddr: "127.0.0.1:9090", ReadHeaderTimeout: 2 * time.Second, BodyTimeout: 3 * time.Second, IdleTimeout: 4 * time.Second, MaxHeaderBytes: 64 << 10}
	if cfg.Edge != want || len(cfg.CORSOrigins) != 0 {
		t.Errorf("from the environment: %+v, CORS %q; want %+v and none (empty AAPD_CORS_ORIGINS)", cfg.Edge, cfg.CORSOrigins, want)
	}
	for _, tc := range []struct {
		name, env, value, want string
	}{
		{"short body timeout", "AAPD_BODY_TIMEOUT", "1ms", "--body-timeout"},
		{"no header timeout", "AAPD_READ_HEADER_TIMEOUT", "0s", "--read-header-timeout"},
		{"tiny header limit", "AAPD_MAX_HEADER_BYTES", "100", "--max-header-bytes"},
		{"empty address", "AAPD_ADDR", "", "--addr"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(tc.env, tc.value)
			_, err := parseServeFlags(db, &bytes.Buffer{})
			cliResult{err: err}.failed(t, 2, tc.want)
		})
	}
}

// madeUpMethodsAddNoSeries sends 500 requests with made-up methods to base
// and checks that /metrics at metricsBase grew by a few series at most.
func madeUpMethodsAddNoSeries(t *testing.T, base, metricsBase string) {
	t.Helper()
	m := &client{t: t, base: metricsBase}
	series := func() []string {
		var out []string
		for _, l := range strings.Split(string(m.do("GET", "/metrics", nil).expect(t, http.StatusOK).body), "\n") {
			if strings.HasPrefix(l, "aapd_http_requests_total{") {
				out = append(out, l)
			}
		}
		return out
	}
	before := len(series())
	anon := &client{t: t, base: base}
	paths := []string{"/sessions", "/meta", "/no-such-route", "/sessions/sess_x/history"}
	for i := range 500 {
		b := make([]byte, 8)
		_, _ = rand.Read(b)
		anon.do("M"+strings.ToUpper(hex.EncodeToString(b)), paths[i%len(paths)], nil)
	}
	after := series()
	if len(after)-before > 4 {
		t.Errorf("500 made-up methods added %d series", len(after)-before)
	}
	for _, l := range after {
		if strings.Contains(l, `method="M`) {
			t.Fatalf("a made-up method became a label: %s", l)
		}
	}
}

// dialRaw opens a connection to base's host, with a read deadline well
// past any timeout under test, so that a hang fails the test quickly.
func dialRaw(t *testing.T, base string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	return conn
}

// closedByServer reports whether err is the server closing the connection,
// not the test's own read deadline.
func closedByServer(err error) bool {
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

// slowHeadersAreCut: a client that trickles its headers (a slowloris) is
// disconnected once the header timeout passes, however steadily it sends.
func slowHeadersAreCut(t *testing.T, base string, timeout time.Duration) {
	// The server's header timer starts when it accepts the connection,
	// which can be before dialRaw returns: time from before the dial.
	start := time.Now()
	conn := dialRaw(t, base)
	go func() {
		if _, err := io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: aapd\r\n"); err != nil {
			return
		}
		for i := 0; ; i++ {
			time.Sleep(50 * time.Millisecond)
			if _, err := fmt.Fprintf(conn, "X-Slow-%d: 1\r\n", i); err != nil {
				return
			}
		}
	}()
	n, err := io.Copy(io.Discard, conn)
	if err == nil {
		err = io.EOF
	}
	if !closedByServer(err) || n != 0 {
		t.Fatalf("trickled headers: %d bytes, %v; want the connection closed without an answer", n, err)
	}
	if since := time.Since(start); since < timeout {
		t.Errorf("cut after %s, before the header timeout", since)
	}
}

// stalledBodyIs408: a Content-Length larger than the body sent is answered
// 408 (problem+json) once the body timeout passes.
func stalledBodyIs408(t *testing.T, base, key string, timeout time.Duration) {
	conn := dialRaw(t, base)
	start := time.Now()
	fmt.Fprintf(conn, "POST /sessions HTTP/1.1\r\nHost: aapd\r\nAuthorization: Bearer %s\r\n"+
		"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"agent\":{", key)
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer to a stalled body: %v", err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusRequestTimeout || res.Header.Get("Content-Type") != "application/problem+json" ||
		!strings.Contains(string(body), httpapi.ProblemTypeBase+"request-timeout") {
		t.Errorf("stalled body: %d %s", res.StatusCode, body)
	}
	if since := time.Since(start); since < timeout {
		t.Errorf("answered after %s, before the body timeout", since)
	}
}

// idleConnectionIsClosed: a kept-alive connection with no next request is
// closed once the idle timeout passes.
func idleConnectionIsClosed(t *testing.T, base string, timeout time.Duration) {
	conn := dialRaw(t, base)
	br := bufio.NewReader(conn)
	// The server's idle time starts once it has written the answer, which
	// is after the request is sent and before this test has read it:
	// counted from the request, a closing at the timeout is never early.
	sent := time.Now()
	io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: aapd\r\n\r\n")
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || res.Close {
		t.Fatalf("first request: %d, close %v", res.StatusCode, res.Close)
	}
	if _, err := br.ReadByte(); !closedByServer(err) {
		t.Fatalf("idle connection: %v, want it closed by the server", err)
	}
	if since := time.Since(sent); since < timeout {
		t.Errorf("closed %s after the request, before the idle timeout (%s)", since, timeout)
	}
}

// streamOutlivesBodyTimeout: a stream lasting several body timeouts runs
// to its end.
func streamOutlivesBodyTimeout(t *testing.T, c *client) {
	sid := c.echoSession(nil)
	start := time.Now()
	_, events := c.streamTurn(sid, streamUser("delta", slowWords(10, 100))) // fails on a cut, not resumed
	if len(events) == 0 || events[len(events)-1].StopReason != aap.StopEndTurn {
		t.Fatalf("stream cut short: %v", types(events))
	}
	if since := time.Since(start); since < 900*time.Millisecond {
		t.Errorf("the stream took %s; it was meant to outlast the body timeout", since)
	}
}

// testOperatorToken is an operator token of the length aapd requires.
const testOperatorToken = "operator-token-0123456789abcdef0123456789"
