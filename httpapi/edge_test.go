package httpapi

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aapd/aapd/store/storetest"
)

func TestMetricLabelsComeFromFixedSets(t *testing.T) {
	t.Parallel()
	for method, want := range map[string]string{"GET": "GET", "HEAD": "HEAD", "OPTIONS": "OPTIONS", "PATCH": "PATCH",
		"get": "other", "BREW": "other", "PROPFIND": "other", "": "other"} {
		if got := methodLabel(method); got != want {
			t.Errorf("methodLabel(%q) = %q, want %q", method, got, want)
		}
	}
	for status, want := range map[int]string{101: "1xx", 200: "2xx", 204: "2xx", 304: "3xx", 404: "4xx",
		StatusClientClosedRequest: "4xx", 503: "5xx", 0: "other", 99: "other", 600: "other", 999: "other"} {
		if got := statusClass(status); got != want {
			t.Errorf("statusClass(%d) = %q, want %q", status, got, want)
		}
	}
}

// Requests with made-up methods, on made-up and real paths, add no series
// to /metrics: a few "other" series at most, whatever their number.
func TestMadeUpMethodsDoNotGrowMetrics(t *testing.T) {
	t.Parallel()
	s := newTestServer(t, storetest.Open(t))
	series := func() []string {
		var out []string
		for _, l := range strings.Split(s.scrape(t), "\n") {
			if strings.HasPrefix(l, "aapd_http_requests_total{") {
				out = append(out, l)
			}
		}
		return out
	}
	before := len(series())
	paths := []string{"/sessions", "/meta", "/nope", "/sessions/sess_x/turns"}
	for i := range 500 {
		b := make([]byte, 6)
		_, _ = rand.Read(b)
		req, err := http.NewRequest("X"+strings.ToUpper(hex.EncodeToString(b)), s.URL+paths[i%len(paths)], nil)
		if err != nil {
			t.Fatal(err)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
	}
	after := series()
	if len(after)-before > 4 {
		t.Errorf("500 made-up methods added %d series:\n%s", len(after)-before, strings.Join(after, "\n"))
	}
	for _, l := range after {
		if strings.Contains(l, `method="X`) {
			t.Errorf("a client's method became a label: %s", l)
		}
	}
}

func TestMetricsOnTheMainHandler(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t)
	get := func(s *testServer, header ...string) *http.Response {
		req, _ := http.NewRequest("GET", s.URL+"/metrics", nil)
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res
	}
	// Neither a token nor a listener of their own: public, as before.
	if res := get(newTestServer(t, st)); res.StatusCode != http.StatusOK {
		t.Errorf("no token: status %d", res.StatusCode)
	}
	// With an operator token: only with it.
	guarded := newTestServer(t, st, func(c *Config) { c.AdminToken = "operator-secret" })
	for _, tc := range []struct {
		header []string
		status int
	}{
		{nil, http.StatusUnauthorized},
		{[]string{"Authorization", "Bearer wrong"}, http.StatusUnauthorized},
		{[]string{"Authorization", "Bearer operator-secret-and-more"}, http.StatusUnauthorized},
		{[]string{"Authorization", "Basic operator-secret"}, http.StatusUnauthorized},
		{[]string{"Authorization", "Bearer operator-secret"}, http.StatusOK},
		{[]string{"Authorization", "bearer  operator-secret "}, http.StatusOK},
	} {
		res := get(guarded, tc.header...)
		if res.StatusCode != tc.status {
			t.Errorf("%v: status %d, want %d", tc.header, res.StatusCode, tc.status)
		}
		if res.StatusCode == http.StatusUnauthorized &&
			(res.Header.Get("Content-Type") != "application/problem+json" || res.Header.Get("WWW-Authenticate") == "") {
			t.Errorf("%v: headers %v", tc.header, res.Header)
		}
	}
	// On a listener of their own: not here at all.
	separate := newTestServer(t, st, func(c *Config) { c.SeparateMetrics = true })
	if res := get(separate); res.StatusCode != http.StatusNotFound {
		t.Errorf("separate metrics: status %d on the main handler", res.StatusCode)
	}
	rec := httptest.NewRecorder()
	separate.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "aapd_turns_running") {
		t.Errorf("MetricsHandler: %d %s", rec.Code, rec.Body)
	}
}

// rawRequest writes head (and the part of the body given) on a fresh
// connection, and returns the connection and a reader of its responses.
func rawRequest(t *testing.T, url, head string) (net.Conn, *bufio.Reader) {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := io.WriteString(conn, head); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second)) // a hang fails the test, not the run
	return conn, bufio.NewReader(conn)
}

// A body that stops arriving — a Content-Length larger than what is sent —
// is answered 408 once the body timeout passes, not waited on forever; the
// client is not taken for one that went away.
func TestStalledBodyIsA408(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t)
	tn := storetest.NewTenant(t, st)
	s := newTestServer(t, st, func(c *Config) { c.BodyTimeout = 300 * time.Millisecond })
	start := time.Now()
	_, br := rawRequest(t, s.URL, "POST /sessions HTTP/1.1\r\nHost: aapd\r\nAuthorization: Bearer "+tn.Key+
		"\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"agent\":")
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no response to a stalled body: %v", err)
	}
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusRequestTimeout || res.Header.Get("Content-Type") != "application/problem+json" ||
		!strings.Contains(string(body), ProblemTypeBase+"request-timeout") {
		t.Errorf("status %d, %s", res.StatusCode, body)
	}
	if waited := time.Since(start); waited < 300*time.Millisecond {
		t.Errorf("answered after %s, before the body timeout", waited)
	}
	waitFor(t, "the access log line", func() bool {
		for _, l := range s.logs.lines(t) {
			if l["msg"] == "request" && l["path"] == "/sessions" {
				return l["status"] == float64(http.StatusRequestTimeout)
			}
		}
		return false
	})
	metrics := s.scrape(t)
	if !strings.Contains(metrics, `aapd_http_requests_total{method="POST",route="/sessions",status="4xx"} 1`) ||
		regexp.MustCompile(`aapd_http_client_disconnects_total\{[^}]*\} [1-9]`).MatchString(metrics) {
		t.Errorf("metrics:\n%s", metrics)
	}
}

// A handler that answers without reading the body (here: no credential)
// is not held by a body that never comes.
func TestUnreadStalledBodyDoesNotHoldTheConnection(t *testing.T) {
	t.Parallel()
	s := newTestServer(t, storetest.Open(t), func(c *Config) { c.BodyTimeout = 300 * time.Millisecond })
	_, br := rawRequest(t, s.URL, "POST /sessions HTTP/1.1\r\nHost: aapd\r\nContent-Length: 100\r\n\r\n{")
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	if res.StatusCode != http.StatusUnauthorized {
		t.Errorf("status %d", res.StatusCode)
	}
	if _, err := br.ReadByte(); err == nil || isTimeout(err) {
		t.Errorf("the connection stayed open: %v", err)
	}
}

// A body read to its end clears the deadline: a response that goes on
// for longer than the body timeout — a stream — is not cut, whether its
// handler read the body or left it to be drained.
func TestBodyTimeoutSparesLongResponses(t *testing.T) {
	t.Parallel()
	s := newTestServer(t, storetest.Open(t), func(c *Config) { c.BodyTimeout = 200 * time.Millisecond })
	for _, read := range []bool{true, false} {
		h := s.limitBodyTime(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if read {
				_, _ = io.ReadAll(r.Body)
			}
			w.Header().Set("Content-Type", "text/event-stream")
			for i := range 8 {
				select {
				case <-r.Context().Done():
					return // cut: the test sees too few events
				case <-time.After(100 * time.Millisecond):
				}
				_, _ = io.WriteString(w, "data: "+string(rune('0'+i))+"\n\n")
				http.NewResponseController(w).Flush()
			}
		}))
		hs := httptest.NewServer(h)
		res, err := http.Post(hs.URL, "application/json", strings.NewReader(`{"messages":[]}`))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		hs.Close()
		if n := strings.Count(string(body), "data: "); n != 8 {
			t.Errorf("handler read the body %v: %d of 8 events in 800ms with a 200ms body timeout", read, n)
		}
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

func TestCORSPreflights(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t)
	preflight := func(s *testServer, origin string) (*http.Response, string) {
		req, _ := http.NewRequest("OPTIONS", s.URL+"/sessions", nil)
		req.Header.Set("Origin", origin)
		req.Header.Set("Access-Control-Request-Method", "POST")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res, string(b)
	}
	off := newTestServer(t, st) // no origins: no cross-origin access
	res, body := preflight(off, "https://app.example")
	if res.StatusCode != http.StatusForbidden || !strings.Contains(body, ProblemTypeBase+"cors-refused") ||
		res.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("CORS off: %d %v %s", res.StatusCode, res.Header, body)
	}
	some := newTestServer(t, st, func(c *Config) { c.CORSOrigins = []string{"https://app.example/"} })
	if res, _ := preflight(some, "https://app.example"); res.StatusCode != http.StatusNoContent ||
		res.Header.Get("Access-Control-Allow-Origin") != "https://app.example" {
		t.Errorf("allowed origin: %d %v", res.StatusCode, res.Header)
	}
	if res, body := preflight(some, "https://evil.example"); res.StatusCode != http.StatusForbidden ||
		res.Header.Get("Access-Control-Allow-Origin") != "" || res.Header.Get("X-Request-Id") == "" {
		t.Errorf("disallowed origin: %d %v %s", res.StatusCode, res.Header, body)
	}
	// A plain OPTIONS, no preflight, is still the route's business.
	req, _ := http.NewRequest("OPTIONS", off.URL+"/sessions", nil)
	if res, err := http.DefaultClient.Do(req); err != nil || res.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("plain OPTIONS: %v %v", res, err)
	} else {
		res.Body.Close()
	}
}
