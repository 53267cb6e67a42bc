package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/aapclient"
)

// The suite's everyday calls (creating sessions, sending turns, reading
// histories) go through aapclient, the public Go client, so every run of
// the suite exercises it against the real server; its traffic is checked
// against the OpenAPI document like the rest (checkedTransport).

// api returns an aapclient client acting as c. It does not retry: a test
// asserts what the server answered to the one request.
func (c *client) api() *aapclient.Client {
	c.t.Helper()
	api, err := aapclient.New(c.base, aapclient.WithAPIKey(c.key),
		aapclient.WithHTTPClient(&http.Client{Transport: checkedTransport{t: c.t}}),
		aapclient.WithRetryPolicy(aapclient.RetryPolicy{MaxAttempts: 1}))
	if err != nil {
		c.t.Fatal(err)
	}
	return api
}

// checkedTransport checks every exchange of a whole (non-streamed) body
// against the OpenAPI document.
type checkedTransport struct{ t testing.TB }

func (ct checkedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	var sent []byte
	if req.Body != nil {
		b, err := io.ReadAll(req.Body)
		if err != nil {
			return nil, err
		}
		sent = b
		req.Body = io.NopCloser(bytes.NewReader(b))
	}
	res, err := http.DefaultTransport.RoundTrip(req)
	if err != nil || isStream(res) {
		return res, err
	}
	body, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil {
		return nil, err
	}
	checkOpenAPI(ct.t, req, sent, res, body)
	res.Body = io.NopCloser(bytes.NewReader(body))
	return res, nil
}

// turnVia sends a stream "none" turn through aapclient; body is the
// request as JSON would write it.
func (c *client) turnVia(sid string, body any) aap.TurnResponse {
	c.t.Helper()
	var req aap.TurnRequest
	b, err := json.Marshal(body)
	if err == nil {
		err = json.Unmarshal(b, &req)
	}
	if err != nil {
		c.t.Fatalf("turn request %s: %v", b, err)
	}
	res, err := c.api().SendTurn(context.Background(), sid, req)
	if err != nil {
		c.t.Fatalf("POST /sessions/%s/turns: %v", sid, err)
	}
	return res.TurnResponse
}

// createSessionVia creates a session through aapclient; body is the
// request as JSON would write it.
func (c *client) createSessionVia(body any) aap.CreateSessionResponse {
	c.t.Helper()
	var req aap.CreateSessionRequest
	b, err := json.Marshal(body)
	if err == nil {
		err = json.Unmarshal(b, &req)
	}
	if err != nil {
		c.t.Fatalf("create session request %s: %v", b, err)
	}
	out, err := c.api().CreateSession(context.Background(), req)
	if err != nil {
		c.t.Fatalf("POST /sessions: %v", err)
	}
	return out
}
