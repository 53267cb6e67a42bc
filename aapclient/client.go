package aapclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Client calls one AAP server. It is safe for concurrent use; its zero value
// is not usable: make one with New.
type Client struct {
	base      string // without a trailing slash
	apiKey    string
	hc        *http.Client
	retry     RetryPolicy
	userAgent string

	// now and sleep are the clock, replaced by tests of retries.
	now   func() time.Time
	sleep func(ctx context.Context, d time.Duration) error
}

// Option configures a Client.
type Option func(*Client)

// WithAPIKey sends key as a Bearer credential on every request.
func WithAPIKey(key string) Option { return func(c *Client) { c.apiKey = key } }

// WithHTTPClient sends requests through hc instead of http.DefaultClient.
// Its Timeout, if any, bounds whole streams too: prefer contexts.
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.hc = hc } }

// WithRetryPolicy replaces DefaultRetryPolicy; zero fields take its values.
func WithRetryPolicy(p RetryPolicy) Option { return func(c *Client) { c.retry = p.withDefaults() } }

// WithUserAgent sets the User-Agent header.
func WithUserAgent(ua string) Option { return func(c *Client) { c.userAgent = ua } }

// New returns a client of the server at baseURL, the URL the endpoints are
// relative to (for example "https://api.example.com/v1").
func New(baseURL string, opts ...Option) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil {
		return nil, fmt.Errorf("aapclient: base URL: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("aapclient: base URL %q: want http(s)://host[/path]", baseURL)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("aapclient: base URL %q: no query or fragment allowed", baseURL)
	}
	c := &Client{
		base: strings.TrimSuffix(u.String(), "/"), hc: http.DefaultClient,
		retry: DefaultRetryPolicy, userAgent: "aapclient-go",
		now: time.Now, sleep: sleepContext,
	}
	for _, o := range opts {
		o(c)
	}
	return c, nil
}

// request is one logical call, sent once or, when refused, several times.
type request struct {
	method string
	path   string // escaped, from the base URL
	query  url.Values
	body   []byte // JSON, nil for none
	// stream, when set, is the body instead, sent as it is read with
	// contentType (an import): such a request is sent once.
	stream      io.Reader
	contentType string
	header      http.Header
	// resend says whether the request may be sent again after a transport
	// failure, when the server may have acted on it: true for reads and for
	// POSTs with an Idempotency-Key.
	resend bool
	accept string
}

// errNoContent is what do returns for a 204 when the caller wants a body.
var errNoContent = errors.New("no content")

// do sends r, retrying as the policy allows, and returns a successful
// response. With keep, the body is left open for the caller to read and
// close; without, it is read whole (a read failure counts as a transport
// failure) and returned, and the response's body is closed.
func (c *Client) do(ctx context.Context, r request, keep bool) (*http.Response, []byte, error) {
	if r.stream != nil {
		return c.once(ctx, r, keep) // the body cannot be read twice
	}
	for attempt := 1; ; attempt++ {
		res, body, err := c.once(ctx, r, keep)
		if err == nil {
			return res, body, nil
		}
		if ctx.Err() != nil {
			return nil, nil, fmt.Errorf("aap: %s %s: %w", r.method, r.path, context.Cause(ctx))
		}
		wait, retry := c.retry.next(attempt, err, r.resend)
		if !retry {
			return nil, nil, err
		}
		if serr := c.sleep(ctx, wait); serr != nil {
			return nil, nil, fmt.Errorf("aap: %s %s: %w (while waiting to retry after: %v)", r.method, r.path, serr, err)
		}
	}
}

// once sends r one time. Errors are *Error for a server's refusal, or a
// wrapped transport error.
func (c *Client) once(ctx context.Context, r request, keep bool) (*http.Response, []byte, error) {
	u := c.base + r.path
	if len(r.query) > 0 {
		u += "?" + r.query.Encode()
	}
	var body io.Reader
	switch {
	case r.stream != nil:
		body = r.stream
	case r.body != nil:
		body = bytes.NewReader(r.body)
	}
	req, err := http.NewRequestWithContext(ctx, r.method, u, body)
	if err != nil {
		return nil, nil, fmt.Errorf("aap: %s %s: %w", r.method, r.path, err)
	}
	for k, v := range r.header {
		req.Header[k] = v
	}
	switch {
	case r.stream != nil:
		req.Header.Set("Content-Type", r.contentType)
	case r.body != nil:
		req.Header.Set("Content-Type", "application/json")
	}
	accept := r.accept
	if accept == "" {
		accept = "application/json"
	}
	req.Header.Set("Accept", accept)
	if c.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.apiKey)
	}
	if c.userAgent != "" {
		req.Header.Set("User-Agent", c.userAgent)
	}
	res, err := c.hc.Do(req)
	if err != nil {
		return nil, nil, &transportError{method: r.method, path: r.path, err: err}
	}
	if res.StatusCode < 200 || res.StatusCode > 299 {
		defer res.Body.Close()
		return nil, nil, readError(res, r.method, r.path, c.now())
	}
	if keep {
		return res, nil, nil
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return nil, nil, &transportError{method: r.method, path: r.path, err: fmt.Errorf("read response: %w", err)}
	}
	return res, b, nil
}

// getJSON sends a GET and decodes its JSON answer into out.
func (c *Client) getJSON(ctx context.Context, path string, query url.Values, out any) error {
	_, err := c.callJSON(ctx, request{method: http.MethodGet, path: path, query: query, resend: true}, out)
	return err
}

// callJSON sends r and decodes its JSON answer, if any, into out.
func (c *Client) callJSON(ctx context.Context, r request, out any) (*http.Response, error) {
	res, body, err := c.do(ctx, r, false)
	if err != nil {
		return nil, err
	}
	if out == nil {
		return res, nil
	}
	if res.StatusCode == http.StatusNoContent {
		return res, fmt.Errorf("aap: %s %s: %w", r.method, r.path, errNoContent)
	}
	if err := json.Unmarshal(body, out); err != nil {
		return res, fmt.Errorf("aap: %s %s: decode response: %w", r.method, r.path, err)
	}
	return res, nil
}

// marshal encodes a request body once, so every attempt sends the same bytes.
func marshal(method, path string, v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("aap: %s %s: encode request: %w", method, path, err)
	}
	return b, nil
}

// transportError is a request that got no HTTP answer (or lost it midway).
type transportError struct {
	method, path string
	err          error
}

func (e *transportError) Error() string {
	return fmt.Sprintf("aap: %s %s: %v", e.method, e.path, e.err)
}

func (e *transportError) Unwrap() error { return e.err }

// sessionPath is the escaped path of a session, plus any further segments.
func sessionPath(id string, rest ...string) string {
	p := "/sessions/" + url.PathEscape(id)
	for _, s := range rest {
		p += "/" + url.PathEscape(s)
	}
	return p
}
