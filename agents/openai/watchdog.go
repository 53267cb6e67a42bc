package openai

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/openai/openai-go/v3/option"
)

// IdleTimeoutError reports a provider that sent nothing for longer than
// Config.Timeout, before or during its answer.
type IdleTimeoutError struct {
	After time.Duration
}

func (e *IdleTimeoutError) Error() string {
	return fmt.Sprintf("the provider sent nothing for %s", e.After)
}

// Timeout marks the error as a timeout for code that checks net.Error-like
// interfaces.
func (e *IdleTimeoutError) Timeout() bool { return true }

// watchdog cancels one attempt's context when the provider stays silent
// for too long. Every byte of the response, SSE comments and keep-alives
// included, counts as a sign of life, so a slow but alive stream is never
// cut however long it runs.
type watchdog struct {
	timeout time.Duration
	ctx     context.Context
	cancel  context.CancelCauseFunc
	timer   *time.Timer
	stopped atomic.Bool
	// responded is set once the provider's response started.
	responded atomic.Bool
}

// watch returns a context derived from parent that is cancelled with an
// *IdleTimeoutError after timeout without a kick. The caller must stop the
// watchdog when the attempt ends.
func watch(parent context.Context, timeout time.Duration) (context.Context, *watchdog) {
	ctx, cancel := context.WithCancelCause(parent)
	w := &watchdog{timeout: timeout, ctx: ctx, cancel: cancel}
	w.timer = time.AfterFunc(timeout, func() { cancel(&IdleTimeoutError{After: timeout}) })
	return ctx, w
}

// kick restarts the silence count.
func (w *watchdog) kick() {
	if !w.stopped.Load() {
		w.timer.Reset(w.timeout)
	}
}

// stop releases the timer and the context.
func (w *watchdog) stop() {
	w.stopped.Store(true)
	w.timer.Stop()
	w.cancel(context.Canceled)
}

// explain replaces the bare "context canceled" of a request the watchdog
// cut with the reason it was cut, and says when a transport error broke a
// stream that had started rather than the request.
func (w *watchdog) explain(err error) error {
	var (
		idle   *IdleTimeoutError
		status *StatusError
		stream *StreamError
	)
	switch {
	case errors.As(context.Cause(w.ctx), &idle):
		return idle
	case errors.As(err, &status), errors.As(err, &stream), !w.responded.Load():
		return err
	}
	return fmt.Errorf("the stream broke: %w", err)
}

// middleware kicks the watchdog when the response starts and on every
// read of its body.
func (w *watchdog) middleware(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
	res, err := next(req)
	if res != nil && res.Body != nil {
		w.responded.Store(true)
		w.kick()
		res.Body = &kickingBody{ReadCloser: res.Body, w: w}
	}
	return res, err
}

type kickingBody struct {
	io.ReadCloser
	w *watchdog
}

func (b *kickingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.w.kick()
	}
	return n, err
}
