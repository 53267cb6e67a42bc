package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aapd/aapd/httpapi"
	"github.com/aapd/aapd/httpapi/openapitest"
)

// The end-to-end suite's traffic, held to the OpenAPI document
// (httpapi/openapi.yaml): client.do and client.openStream pass every
// exchange here, so a handler that answers with a status, a header or a
// shape the document does not describe fails the test that saw it. Paths
// under openapitest.NotYetDocumented are skipped.

// openAPIDoc returns the document, failing the test if it does not load.
func openAPIDoc(t testing.TB) *openapitest.Document {
	t.Helper()
	d, err := openapitest.Load()
	if err != nil {
		t.Fatalf("OpenAPI document: %v", err)
	}
	return d
}

// checkOpenAPI validates one finished exchange. The response is always
// checked; the request only when the server accepted it (2xx), because the
// suite sends malformed requests on purpose (badinput_test.go) and the
// server's answer to those is what is under test.
func checkOpenAPI(t testing.TB, req *http.Request, reqBody []byte, res *http.Response, resBody []byte) {
	t.Helper()
	d := docFor(t, req)
	what := req.Method + " " + req.URL.RequestURI()
	for _, msg := range d.CheckResponse(req, res, resBody) {
		t.Errorf("OpenAPI: response to %s (%d): %s\nbody: %.500s", what, res.StatusCode, msg, resBody)
	}
	if res.StatusCode/100 == 2 {
		for _, msg := range d.CheckRequest(req, reqBody) {
			t.Errorf("OpenAPI: request %s: %s\nbody: %.500s", what, msg, reqBody)
		}
	}
	if openapitest.IsSandboxAgent(req.URL.Path) && res.StatusCode == http.StatusOK && !isStream(res) {
		checkUniversalEvents(t, d, what, resBody)
	}
	if resBody != nil && isStream(res) && !openapitest.Undocumented(req.URL.Path) {
		// A stream read whole (client.do on a turn's events).
		sc := newSSEChecker(t, req, io.NopCloser(bytes.NewReader(resBody)))
		_, _ = io.Copy(io.Discard, sc)
	}
}

// docFor is the document a request is held to: the sandbox-agent door's
// own for its routes (openapitest.SandboxAgent), aapd's for the rest.
func docFor(t testing.TB, req *http.Request) *openapitest.Document {
	t.Helper()
	if !openapitest.IsSandboxAgent(req.URL.Path) {
		return openAPIDoc(t)
	}
	d, err := openapitest.SandboxAgent()
	if err != nil {
		t.Fatalf("sandbox-agent OpenAPI document: %v", err)
	}
	return d
}

// checkUniversalEvents checks each event of a sandbox-agent events page
// against the schema its type names.
func checkUniversalEvents(t testing.TB, d *openapitest.Document, what string, body []byte) {
	t.Helper()
	var page struct {
		Events []json.RawMessage `json:"events"`
	}
	if json.Unmarshal(body, &page) != nil {
		return // not a page of events
	}
	for _, e := range page.Events {
		for _, msg := range d.CheckUniversalEvent(e) {
			t.Errorf("OpenAPI: event of %s: %s\nevent: %.500s", what, msg, e)
		}
	}
}

func isStream(res *http.Response) bool {
	return strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream")
}

// checkOpenAPIStream validates the response of a request that may stream:
// its status and headers at once, then, as the test reads the body, each
// event's data against the document's TurnEvent. A response that is not a
// stream is read whole and checked like any other (its body stays
// readable).
func checkOpenAPIStream(t testing.TB, req *http.Request, reqBody []byte, res *http.Response) {
	t.Helper()
	if !isStream(res) {
		b, err := io.ReadAll(res.Body)
		res.Body.Close()
		res.Body = io.NopCloser(bytes.NewReader(b))
		if err == nil {
			checkOpenAPI(t, req, reqBody, res, b)
		}
		return
	}
	checkOpenAPI(t, req, reqBody, res, nil)
	if openapitest.Undocumented(req.URL.Path) {
		return
	}
	res.Body = newSSEChecker(t, req, res.Body)
}

func newSSEChecker(t testing.TB, req *http.Request, body io.ReadCloser) *sseChecker {
	ended := new(atomic.Bool)
	t.Cleanup(func() { ended.Store(true) })
	return &sseChecker{ReadCloser: body, t: t, doc: docFor(t, req), what: req.Method + " " + req.URL.Path, ended: ended}
}

// sseChecker passes a stream through to the test, checking each complete
// event as it goes by. An event cut short by a dropped connection is not
// checked; nothing is reported once the test has ended (a stream read by
// a goroutine that outlives it).
type sseChecker struct {
	io.ReadCloser
	t     testing.TB
	doc   *openapitest.Document
	what  string
	ended *atomic.Bool

	partial []byte // the start of a line not yet ended
	id      string
	event   string
	data    string
}

func (s *sseChecker) Read(p []byte) (int, error) {
	n, err := s.ReadCloser.Read(p)
	s.partial = append(s.partial, p[:n]...)
	for {
		i := bytes.IndexByte(s.partial, '\n')
		if i < 0 {
			break
		}
		s.line(strings.TrimSuffix(string(s.partial[:i]), "\r"))
		s.partial = s.partial[i+1:]
	}
	return n, err
}

// line takes one line of the stream (httpapi/sse.go writes one field per
// line, one data line per event).
func (s *sseChecker) line(l string) {
	switch {
	case l == "":
		if s.event != "" || s.data != "" {
			if !s.ended.Load() {
				check := s.doc.CheckEvent
				if strings.HasPrefix(s.what, "POST /ag-ui/") {
					// AG-UI events are data lines alone (httpapi/agui).
					check = func(_, _, data string) []string { return s.doc.CheckSchema("AGUIEvent", []byte(data)) }
				}
				if strings.Contains(s.what, " /openai/") {
					// OpenAI's events: named data lines (httpapi/openai).
					check = func(_, _, data string) []string { return s.doc.CheckSchema("OpenAIStreamEvent", []byte(data)) }
				}
				if openapitest.IsSandboxAgent(strings.TrimPrefix(strings.TrimPrefix(s.what, "GET "), "POST ")) {
					// UniversalEvents: data lines, each with its sequence as id.
					check = func(_, _, data string) []string { return s.doc.CheckUniversalEvent([]byte(data)) }
				}
				for _, msg := range check(s.id, s.event, s.data) {
					s.t.Errorf("OpenAPI: stream of %s: %s", s.what, msg)
				}
			}
		}
		s.id, s.event, s.data = "", "", ""
	case strings.HasPrefix(l, ":"):
	case strings.HasPrefix(l, "id: "):
		s.id = strings.TrimPrefix(l, "id: ")
	case strings.HasPrefix(l, "event: "):
		s.event = strings.TrimPrefix(l, "event: ")
	case strings.HasPrefix(l, "data: "):
		s.data = strings.TrimPrefix(l, "data: ")
	default:
		if !s.ended.Load() {
			s.t.Errorf("OpenAPI: stream of %s: a line that is no SSE field: %q", s.what, l)
		}
	}
}

// TestOpenAPIDocumentServed fetches /openapi.json through the checked
// client: public, the document itself.
func TestOpenAPIDocumentServed(t *testing.T) {
	t.Parallel()
	s := startParallelServer(t)
	anon := &client{t: t, base: s.base}
	r := anon.do("GET", "/openapi.json", nil).expect(t, http.StatusOK)
	want, err := httpapi.OpenAPIJSON()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(r.body, want) {
		t.Error("GET /openapi.json is not the embedded document")
	}
	// Operations routes the other tests may not reach, checked here.
	anon.do("GET", "/healthz", nil).expect(t, http.StatusOK)
	anon.do("GET", "/readyz", nil).expect(t, http.StatusOK)
	anon.do("GET", "/metrics", nil).expect(t, http.StatusOK)
	anon.do("GET", "/meta", nil).expect(t, http.StatusOK)
	anon.do("GET", "/sessions", nil).expect(t, http.StatusUnauthorized)
	anon.do("GET", "/no/such/route", nil).expect(t, http.StatusNotFound)
	anon.do("PUT", "/sessions", "{}").expect(t, http.StatusMethodNotAllowed)
}
