// Package openai is an agents.Model for OpenAI's chat completions API and
// the many servers that speak it: vLLM, Ollama, llama.cpp's server, LiteLLM,
// OpenRouter and others. One implementation covers them all because they
// share the wire format; where they differ (how reasoning is streamed, how
// tool call chunks are numbered) this package accepts every variant it knows.
//
// It always streams, so that text and reasoning reach AAP clients as the
// provider produces them, and it is built to fail cleanly inside a
// long-running server: it retries transient failures only while nothing has
// been shown to the client, bounds every wait on the provider, and keeps API
// keys out of errors.
package openai

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/agents"
)

// DefaultBaseURL is OpenAI's own API, used when Config.BaseURL is empty.
const DefaultBaseURL = "https://api.openai.com/v1"

// DefaultTimeout is Config.Timeout when it is zero. It is generous because
// a local model on modest hardware can take minutes to read a long prompt
// before it sends its first token.
const DefaultTimeout = 2 * time.Minute

// Config configures a Model. Only BaseURL (for anything but OpenAI) and a
// model id (DefaultModel or the agent's model option) are usually needed.
type Config struct {
	// BaseURL is the API root that /chat/completions is appended to, e.g.
	// https://api.openai.com/v1 (the default) or http://localhost:11434/v1.
	BaseURL string
	// APIKey is sent as a bearer token. It may be empty for local servers,
	// in which case no Authorization header is sent. The OPENAI_API_KEY
	// environment variable is deliberately not read: a key meant for OpenAI
	// must never be sent to another BaseURL by accident.
	APIKey string
	// APIKeyOption names a session option (declare it with type "secret")
	// whose non-empty value replaces APIKey for that session's calls, so
	// users can bring their own key.
	APIKeyOption string
	// DefaultModel is the model id used when the request names none (the
	// agent has no model option, or the session left it empty).
	DefaultModel string
	// Temperature is sent when set; nil leaves it to the provider.
	Temperature *float64
	// MaxTokens bounds the output tokens of one call; 0 leaves it to the
	// provider. It is sent as max_completion_tokens to api.openai.com (whose
	// reasoning models reject max_tokens) and as max_tokens elsewhere (which
	// every compatible server understands).
	MaxTokens int64
	// Headers are extra request headers, e.g. OpenRouter's HTTP-Referer or
	// a LiteLLM tag.
	Headers map[string]string
	// Timeout bounds how long the provider may stay silent: before the
	// response starts and between two pieces of the stream. It is not a
	// deadline on the whole answer, which may stream for as long as the
	// provider keeps sending. Zero means DefaultTimeout; it cannot be
	// disabled, so a stalled provider never hangs a turn.
	Timeout time.Duration
	// MaxRetries is how many times a call is retried, with exponential
	// backoff (or the provider's Retry-After), after a 429, a 5xx or a
	// connection failure. Retries only happen while nothing has been
	// streamed to the client, so output is never duplicated. 0 disables
	// retries; 2 or 3 suit most deployments.
	MaxRetries int
	// HTTPClient sends the requests; nil uses agents.ProviderHTTPClient,
	// which keeps enough idle connections for many turns at once. Its
	// Timeout, if set, is a total deadline that also cuts long answers.
	HTTPClient *http.Client
}

// Model generates assistant messages with a chat completions API. It is
// safe for concurrent use: every call carries its own state.
type Model struct {
	service   sdk.ChatCompletionService
	cfg       Config
	maxTokens func(*sdk.ChatCompletionNewParams, int64)
	// sleep waits between retries; tests replace it to observe delays.
	sleep func(ctx context.Context, d time.Duration) error
}

var _ agents.Model = (*Model)(nil)

// New checks cfg and returns a Model. It does not contact the provider.
func New(cfg Config) (*Model, error) {
	if cfg.BaseURL == "" {
		cfg.BaseURL = DefaultBaseURL
	}
	base, err := url.Parse(cfg.BaseURL)
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return nil, fmt.Errorf("openai: BaseURL %q is not an http(s) URL", cfg.BaseURL)
	}
	if cfg.Timeout < 0 {
		return nil, errors.New("openai: Timeout cannot be negative")
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.MaxRetries < 0 {
		return nil, errors.New("openai: MaxRetries cannot be negative")
	}
	if cfg.MaxTokens < 0 {
		return nil, errors.New("openai: MaxTokens cannot be negative")
	}
	client := cfg.HTTPClient
	if client == nil {
		client = agents.ProviderHTTPClient()
	}
	opts := []option.RequestOption{
		option.WithBaseURL(cfg.BaseURL),
		option.WithHTTPClient(client),
		// Retries are ours: the SDK cannot know whether output was streamed.
		option.WithMaxRetries(0),
	}
	if cfg.APIKey != "" {
		opts = append(opts, option.WithAPIKey(cfg.APIKey))
	}
	for k, v := range cfg.Headers {
		opts = append(opts, option.WithHeader(k, v))
	}
	m := &Model{
		// NewChatCompletionService, unlike NewClient, reads no environment.
		service:   sdk.NewChatCompletionService(opts...),
		cfg:       cfg,
		maxTokens: setMaxTokens,
		sleep:     sleep,
	}
	if base.Hostname() == "api.openai.com" {
		m.maxTokens = setMaxCompletionTokens
	}
	return m, nil
}

// Generate streams one assistant message. Text and reasoning go to out as
// they arrive; the returned response holds the whole message. On failure
// it returns what was produced so far with the error, and on cancellation
// what was produced so far with ctx's error.
func (m *Model) Generate(ctx context.Context, req agents.ModelRequest, out func(agents.ModelDelta)) (agents.ModelResponse, error) {
	params, err := m.params(req)
	if err != nil {
		return agents.ModelResponse{StopReason: aap.StopError}, err
	}
	key := m.cfg.APIKey
	if m.cfg.APIKeyOption != "" && req.Options[m.cfg.APIKeyOption] != "" {
		key = req.Options[m.cfg.APIKeyOption]
	}
	for attempt := 0; ; attempt++ {
		acc := newAccumulator(out)
		err := m.attempt(ctx, params, key, req.Whole, acc)
		if err == nil {
			return acc.response(), nil
		}
		if ctx.Err() != nil {
			return acc.failed(), ctx.Err()
		}
		if acc.streamed || attempt >= m.cfg.MaxRetries || !retryable(err) {
			return acc.failed(), m.describe(err, attempt, key)
		}
		delay, ok := retryDelay(err, attempt)
		if !ok {
			return acc.failed(), m.describe(err, attempt, key)
		}
		if err := m.sleep(ctx, delay); err != nil {
			return acc.failed(), ctx.Err()
		}
	}
}

// attempt makes one call, feeding what it returns to acc: a streaming
// call, or, when the caller wants only the whole message (whole), a plain
// one, which costs the provider and aapd less.
func (m *Model) attempt(ctx context.Context, params sdk.ChatCompletionNewParams, key string, whole bool, acc *accumulator) error {
	actx, idle := watch(ctx, m.cfg.Timeout)
	defer idle.stop()
	opts := []option.RequestOption{option.WithMiddleware(captureStatus, idle.middleware)}
	if key != "" {
		opts = append(opts, option.WithAPIKey(key))
	}
	if whole {
		params.StreamOptions = sdk.ChatCompletionStreamOptionsParam{}
		c, err := m.service.New(actx, params, opts...)
		if err != nil {
			return idle.explain(describeProvider(err))
		}
		acc.addCompletion(c)
		return nil
	}
	stream := m.service.NewStreaming(actx, params, opts...)
	defer stream.Close()
	for stream.Next() {
		acc.add(stream.Current())
	}
	if err := stream.Err(); err != nil {
		return idle.explain(describeProvider(err))
	}
	if !acc.finished() {
		// The body ended cleanly but the answer did not: a proxy cut the
		// connection, or the server died between two chunks.
		return errIncomplete
	}
	return nil
}

// describe turns a final failure into the error Generate returns: wrapped
// with what was tried, and with the API key scrubbed from its text.
func (m *Model) describe(err error, attempt int, key string) error {
	switch attempt {
	case 0:
		err = fmt.Errorf("openai: %w", err)
	case 1:
		err = fmt.Errorf("openai: after 1 retry: %w", err)
	default:
		err = fmt.Errorf("openai: after %d retries: %w", attempt, err)
	}
	return scrub(err, key, m.cfg.APIKey)
}

func setMaxTokens(p *sdk.ChatCompletionNewParams, n int64) { p.MaxTokens = sdk.Int(n) }

func setMaxCompletionTokens(p *sdk.ChatCompletionNewParams, n int64) {
	p.MaxCompletionTokens = sdk.Int(n)
}

// sleep waits d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
