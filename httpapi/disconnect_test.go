package httpapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aapd/aapd/store"
	"github.com/aapd/aapd/store/storetest"
)

// A client that goes away while its request waits on the database — in
// the handler or in authentication — is not a server error: no ERROR line,
// an INFO access line with status 499, and a disconnect counted.
func TestClientDisconnectIsA499NotAnError(t *testing.T) {
	dbURL := storetest.NewDatabase(t) // its tables get locked
	st := storetest.OpenURL(t, dbURL)
	tn := storetest.NewTenant(t, st)
	sess, _, err := st.SessionCreate(context.Background(), store.SessionCreateParams{TenantID: tn.ID, AgentName: "echo"})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, table, path, route string
	}{
		{"handler waits on the database", "sessions", "/sessions/" + sess.ID, "/sessions/{id}"},
		{"authentication waits on the database", "api_keys", "/sessions", "/sessions"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newTestServer(t, st)
			release := storetest.LockTable(t, dbURL, tc.table)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() {
				req, _ := http.NewRequestWithContext(ctx, "GET", s.URL+tc.path, nil)
				req.Header.Set("Authorization", "Bearer "+tn.Key)
				res, err := http.DefaultClient.Do(req)
				if err == nil {
					res.Body.Close()
				}
				done <- err
			}()
			waitFor(t, "the request to wait on the lock", func() bool {
				var waiting int
				storetest.Scan(t, dbURL, `SELECT count(*) FROM pg_stat_activity
					WHERE datname = current_database() AND wait_event_type = 'Lock'`, nil, &waiting)
				return waiting > 0
			})
			cancel() // the client goes away
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Fatalf("client: %v, want context.Canceled", err)
			}
			var access map[string]any
			waitFor(t, "the access log line", func() bool {
				for _, l := range s.logs.lines(t) {
					if l["msg"] == "request" && l["path"] == tc.path {
						access = l
						return true
					}
				}
				return false
			})
			release()
			if access["level"] != "INFO" || access["status"] != float64(StatusClientClosedRequest) || access["route"] != tc.route {
				t.Errorf("access line = %v, want INFO, status 499, route %s", access, tc.route)
			}
			for _, l := range s.logs.lines(t) {
				if l["level"] == "ERROR" || l["level"] == "WARN" {
					t.Errorf("log line %v", l)
				}
			}
			metrics := s.scrape(t)
			for _, want := range []string{
				fmt.Sprintf(`aapd_http_client_disconnects_total{route=%q} 1`, tc.route),
				fmt.Sprintf(`aapd_http_requests_total{method="GET",route=%q,status="4xx"} 1`, tc.route),
			} {
				if !strings.Contains(metrics, want+"\n") {
					t.Errorf("no %s in /metrics", want)
				}
			}
			// Every route's 5xx series is exported, at zero until one is answered.
			if regexp.MustCompile(`status="5xx"} [1-9]`).MatchString(metrics) {
				t.Errorf("a 500 counted in /metrics")
			}
		})
	}
}

// A stream the client leaves after its headers went out keeps its status
// in the access log, and still counts as a disconnect.
func TestDisconnectedStreamKeepsItsStatus(t *testing.T) {
	s := newTestServer(t, storetest.Open(t))
	h := s.observe(s.handle(func(w http.ResponseWriter, r *http.Request) error {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "event: turn_start\ndata: {}\n\n")
		<-r.Context().Done() // the client goes away mid-stream
		return fmt.Errorf("read events: %w", r.Context().Err())
	}))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("POST", "/sessions/x/turns", nil).WithContext(ctx))
	var access map[string]any
	for _, l := range s.logs.lines(t) {
		if l["level"] != "INFO" {
			t.Errorf("log line %v", l)
		}
		if l["msg"] == "request" {
			access = l
		}
	}
	if access["status"] != float64(http.StatusOK) {
		t.Errorf("access line = %v, want status 200", access)
	}
	if want := `aapd_http_client_disconnects_total{route="unmatched"} 1`; !strings.Contains(s.scrape(t), want+"\n") {
		t.Errorf("no %s in /metrics", want)
	}
}

// waitFor polls cond until it holds, failing the test after 10 seconds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// scrape returns the server's /metrics in the text format.
func (s *testServer) scrape(t *testing.T) string {
	t.Helper()
	res, err := http.Get(s.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
