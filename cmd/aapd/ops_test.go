package main

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
)

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
