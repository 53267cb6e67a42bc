package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
)

// Raw requests: the operations routes are no AAP calls, and X-Request-Id is
// the wire.
func TestOperationalEndpoints(t *testing.T) {
	s := startServer(t)
	anon := &client{t: t, base: s.base}
	anon.do("GET", "/healthz", nil).expect(t, http.StatusOK)
	anon.do("GET", "/readyz", nil).expect(t, http.StatusOK)
	c := s.newTenant(t)
	c.say(c.echoSession(nil), "hi")
	m := anon.do("GET", "/metrics", nil).expect(t, http.StatusOK)
	for _, want := range []string{
		`aapd_http_requests_total{method="POST",route="/sessions/{id}/turns",status="2xx"} 1`,
		"aapd_turns_running 0",
	} {
		if !strings.Contains(string(m.body), want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	r := anon.do("GET", "/meta", nil, "X-Request-Id", "my-request-1")
	if r.Header.Get("X-Request-Id") != "my-request-1" {
		t.Errorf("request id not kept: %q", r.Header.Get("X-Request-Id"))
	}
}

func TestHealthcheckFollowsTheConfiguredPort(t *testing.T) {
	for addr, want := range map[string]string{
		"":               "http://127.0.0.1:8080/readyz",
		":9000":          "http://127.0.0.1:9000/readyz",
		"0.0.0.0:7000":   "http://127.0.0.1:7000/readyz",
		"[::]:7001":      "http://127.0.0.1:7001/readyz",
		"not an address": "http://127.0.0.1:8080/readyz",
	} {
		if got := healthURL(addr); got != want {
			t.Errorf("healthURL(%q) = %q, want %q", addr, got, want)
		}
	}
	s := startServer(t)
	_, port, _ := net.SplitHostPort(s.Addr())
	t.Setenv("AAPD_ADDR", ":"+port)
	if err := run(context.Background(), []string{"healthcheck"}, io.Discard, io.Discard); err != nil {
		t.Errorf("healthcheck on $AAPD_ADDR's port: %v", err)
	}
}

func TestHealthcheckCommand(t *testing.T) {
	s := startServer(t)
	if err := run(context.Background(), []string{"healthcheck", "--url", s.base + "/readyz"}, io.Discard, io.Discard); err != nil {
		t.Errorf("healthy server: %v", err)
	}
	err := run(context.Background(), []string{"healthcheck", "--url", s.base + "/nope"}, io.Discard, io.Discard)
	if err == nil || exitCode(err) != 1 {
		t.Errorf("404 URL: err %v", err)
	}
}

func TestVersionCommand(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}} {
		var out strings.Builder
		if err := run(context.Background(), args, &out, io.Discard); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		if got := out.String(); !strings.HasPrefix(got, "aapd ") || !strings.Contains(got, runtime.Version()) || !strings.Contains(got, "revision ") {
			t.Errorf("%v printed %q", args, got)
		}
	}
	if err := run(context.Background(), []string{"version", "extra"}, io.Discard, io.Discard); exitCode(err) != 2 {
		t.Errorf("version with an argument: %v", err)
	}
}
