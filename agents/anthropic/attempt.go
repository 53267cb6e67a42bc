package anthropic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"

	"github.com/aapd/aapd/agents"
)

// attempt sends the request once and reads its stream into an assembly.
// The attempt's context is cancelled when no byte arrives for Timeout,
// which unblocks any read; the cause tells that apart from ctx ending.
func (m *Model) attempt(ctx context.Context, params anthropic.MessageNewParams, key string, out func(agents.ModelDelta)) (*assembly, error) {
	a := newAssembly()
	actx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	idle := time.AfterFunc(m.cfg.Timeout, func() { cancel(errIdleTimeout) })
	defer idle.Stop()
	touch := func() { idle.Reset(m.cfg.Timeout) }

	stream := m.client.Messages.NewStreaming(actx, params,
		option.WithAPIKey(key),
		option.WithMiddleware(watchBody(touch)),
	)
	defer stream.Close()
	for stream.Next() {
		if err := a.apply(stream.Current(), out); err != nil {
			return a, err
		}
		if a.stopped {
			return a, nil
		}
	}
	err := stream.Err()
	var apiErr *anthropic.Error
	if errors.As(err, &apiErr) && apiErr.StatusCode < 300 {
		err = &eventError{apiErr}
	}
	if context.Cause(actx) == errIdleTimeout && ctx.Err() == nil {
		return a, fmt.Errorf("%w (nothing received for %s)", errIdleTimeout, m.cfg.Timeout)
	}
	if ctx.Err() != nil {
		return a, ctx.Err()
	}
	if err == nil {
		return a, errStreamCut
	}
	if a.begun() {
		return a, fmt.Errorf("stream failed: %w", err)
	}
	return a, err
}

// sleep waits d or until ctx ends.
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

// watchBody calls touch when the response arrives and whenever bytes of its
// body do, pings included, which the SDK's stream does not surface.
func watchBody(touch func()) option.Middleware {
	return func(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
		res, err := next(req)
		if res != nil && res.Body != nil {
			touch()
			res.Body = &activityBody{ReadCloser: res.Body, touch: touch}
		}
		return res, err
	}
}

// activityBody is a response body that reports each read that got bytes.
type activityBody struct {
	io.ReadCloser
	touch func()
}

func (b *activityBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.touch()
	}
	return n, err
}

// eventError is an error event in a stream that had started with 200 OK;
// the SDK's message for it would show that status.
type eventError struct{ err *anthropic.Error }

func (e *eventError) Error() string {
	var body struct {
		Error struct{ Message string } `json:"error"`
	}
	_ = json.Unmarshal([]byte(e.err.RawJSON()), &body)
	msg := fmt.Sprintf("error event in the stream: %s: %s", e.err.Type(), body.Error.Message)
	if e.err.RequestID != "" {
		msg += " (request-id " + e.err.RequestID + ")"
	}
	return msg
}

func (e *eventError) Unwrap() error { return e.err }
