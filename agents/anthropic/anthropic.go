// Package anthropic is an agents.Model backed by Anthropic's Messages API,
// through the official Go SDK.
//
// Every call streams: text and thinking reach the agent loop as they arrive,
// and the assembled assistant message (thinking, text and tool_use blocks in
// the order the model produced them) is returned when the stream ends.
// Anthropic requires the thinking blocks it produced to be sent back verbatim,
// signatures included, and AAP has no place for signatures or for redacted
// thinking; both travel in agents.Message.Extra (see extra.go for the format).
package anthropic

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"

	"github.com/aapd/aapd/agents"
)

// Defaults applied by New to zero Config fields.
const (
	DefaultBaseURL = "https://api.anthropic.com"
	// DefaultMaxTokens is the output bound when thinking is off. The API
	// requires one; with a thinking budget the default is the budget plus
	// this, so that thinking cannot crowd out the answer.
	DefaultMaxTokens = 4096
	// DefaultTimeout bounds the wait for a response to start and every gap
	// in its stream. The API sends ping events while a response is slow, so
	// a healthy stream is never quiet this long.
	DefaultTimeout = 2 * time.Minute
	// DefaultMaxRetries is how often a failed request is retried.
	DefaultMaxRetries = 2
)

// minThinkingBudget is the smallest budget_tokens the API accepts.
const minThinkingBudget = 1024

// Config configures a Model. Only APIKey or APIKeyOption is required.
type Config struct {
	// BaseURL is the API's address (DefaultBaseURL if empty), for proxies
	// and gateways that speak the Messages API.
	BaseURL string
	// APIKey authenticates every call unless the session brings its own.
	APIKey string
	// APIKeyOption names a session option (declare it with type secret)
	// whose non-empty value is used instead of APIKey, so that users can
	// bring their own key. It is read from ModelRequest.Options.
	APIKeyOption string
	// DefaultModel is the model id used when ModelRequest.Model is empty,
	// for example "claude-sonnet-4-5".
	DefaultModel string
	// MaxTokens bounds each response's output (thinking included). Zero
	// means DefaultMaxTokens, plus ThinkingBudget when that is set.
	MaxTokens int64
	// Temperature is sent when set. The API does not accept it together
	// with thinking unless it is 1.
	Temperature *float64
	// ThinkingBudget, when > 0, enables extended thinking with this many
	// tokens of budget (at least 1024, less than MaxTokens).
	ThinkingBudget int64
	// AdaptiveThinking enables thinking with the model choosing its own
	// budget ("adaptive"), which newer models prefer to a fixed budget.
	// It excludes ThinkingBudget.
	AdaptiveThinking bool
	// Timeout bounds the wait for a response to start and each idle gap
	// between received bytes of its stream; it is not a deadline on the
	// whole response, which may legitimately take minutes. Zero means
	// DefaultTimeout.
	Timeout time.Duration
	// MaxRetries is how many times a request is retried, with exponential
	// backoff (or the server's retry-after), after a 429, 5xx, 529
	// overloaded or connection error — only while nothing of the response
	// has been received, so output is never duplicated. Zero means
	// DefaultMaxRetries; negative disables retries.
	MaxRetries int
	// HTTPClient sends the requests; nil uses agents.ProviderHTTPClient,
	// which keeps enough idle connections for many turns at once.
	HTTPClient *http.Client
}

// Model generates assistant messages with the Anthropic Messages API. It is
// safe for concurrent use.
type Model struct {
	cfg        Config
	client     anthropic.Client
	maxRetries int
	// backoff is the first retry's delay before jitter; it doubles per
	// retry up to maxBackoff. A field so tests can shorten it.
	backoff time.Duration
}

// Backoff bounds.
const (
	defaultBackoff = 500 * time.Millisecond
	maxBackoff     = 8 * time.Second
	// maxRetryAfter is the longest server-requested wait honoured; a
	// server asking for more gets its error reported instead of a turn
	// that hangs for minutes.
	maxRetryAfter = time.Minute
)

// New checks cfg, applies defaults and returns a Model. It makes no request.
func New(cfg Config) (*Model, error) {
	if cfg.APIKey == "" && cfg.APIKeyOption == "" {
		return nil, errors.New("anthropic: an APIKey or an APIKeyOption is required")
	}
	if cfg.BaseURL == "" {
		cfg.BaseURL = DefaultBaseURL
	}
	u, err := url.Parse(cfg.BaseURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, fmt.Errorf("anthropic: BaseURL %q is not an http(s) URL", cfg.BaseURL)
	}
	if cfg.MaxTokens < 0 || cfg.ThinkingBudget < 0 {
		return nil, errors.New("anthropic: MaxTokens and ThinkingBudget must not be negative")
	}
	if cfg.ThinkingBudget > 0 && cfg.AdaptiveThinking {
		return nil, errors.New("anthropic: ThinkingBudget and AdaptiveThinking exclude each other")
	}
	if cfg.ThinkingBudget > 0 && cfg.ThinkingBudget < minThinkingBudget {
		return nil, fmt.Errorf("anthropic: ThinkingBudget must be at least %d tokens", minThinkingBudget)
	}
	if cfg.MaxTokens == 0 {
		cfg.MaxTokens = DefaultMaxTokens + cfg.ThinkingBudget
	}
	if cfg.ThinkingBudget >= cfg.MaxTokens {
		return nil, fmt.Errorf("anthropic: ThinkingBudget (%d) must be less than MaxTokens (%d)", cfg.ThinkingBudget, cfg.MaxTokens)
	}
	thinking := cfg.ThinkingBudget > 0 || cfg.AdaptiveThinking
	if thinking && cfg.Temperature != nil && *cfg.Temperature != 1 {
		return nil, errors.New("anthropic: Temperature cannot be set with thinking enabled (the API only accepts 1)")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	m := &Model{cfg: cfg, maxRetries: cfg.MaxRetries, backoff: defaultBackoff}
	switch {
	case m.maxRetries == 0:
		m.maxRetries = DefaultMaxRetries
	case m.maxRetries < 0:
		m.maxRetries = 0
	}
	opts := []option.RequestOption{
		// A server must not pick up keys, profiles or base URLs from its
		// environment behind its configuration's back.
		option.WithoutEnvironmentDefaults(),
		option.WithBaseURL(cfg.BaseURL),
		// Retries are ours: the SDK would also retry a stream that failed
		// after it started, and cannot tell whether output was delivered.
		option.WithMaxRetries(0),
	}
	client := cfg.HTTPClient
	if client == nil {
		client = agents.ProviderHTTPClient()
	}
	opts = append(opts, option.WithHTTPClient(client))
	m.client = anthropic.NewClient(opts...)
	return m, nil
}

// Generate streams one assistant message for req. Deltas of text and
// thinking go to out as they arrive, on the calling goroutine.
//
// On failure the returned response holds what was produced before it (its
// text and thinking; tool calls are only returned complete) together with
// an error; a cancelled ctx returns promptly with ctx's error.
func (m *Model) Generate(ctx context.Context, req agents.ModelRequest, out func(agents.ModelDelta)) (agents.ModelResponse, error) {
	if out == nil {
		out = func(agents.ModelDelta) {}
	}
	params, err := m.params(req)
	if err != nil {
		return emptyResponse(), err
	}
	key := m.apiKey(req.Options)
	if key == "" {
		return emptyResponse(), fmt.Errorf("anthropic: no API key: the session option %q is empty and no default key is configured", m.cfg.APIKeyOption)
	}
	for attempt := 0; ; attempt++ {
		a, err := m.attempt(ctx, params, key, out)
		if err == nil {
			return a.response()
		}
		partial := a.partial()
		if ctxErr := ctx.Err(); ctxErr != nil {
			return partial, ctxErr
		}
		if a.begun() || attempt >= m.maxRetries || !retryable(err) {
			if attempt > 0 {
				return partial, fmt.Errorf("anthropic: %d attempts failed, the last: %w", attempt+1, err)
			}
			return partial, fmt.Errorf("anthropic: %w", err)
		}
		delay, ok := m.retryDelay(err, attempt)
		if !ok {
			return partial, fmt.Errorf("anthropic: not retried, the server asked to wait longer than %s: %w", maxRetryAfter, err)
		}
		if err := sleep(ctx, delay); err != nil {
			return partial, err
		}
	}
}

// apiKey returns the session's own key if it has one, else the default.
func (m *Model) apiKey(opts map[string]string) string {
	if m.cfg.APIKeyOption != "" {
		if k := opts[m.cfg.APIKeyOption]; k != "" {
			return k
		}
	}
	return m.cfg.APIKey
}
