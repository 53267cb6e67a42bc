package httpapi

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync/atomic"
	"time"
)

// bodyTimeoutError is what reading a request body returns once the body
// timeout has passed: a 408 (toProblem).
type bodyTimeoutError struct {
	limit time.Duration
	err   error
}

func (e *bodyTimeoutError) Error() string {
	return fmt.Sprintf("the request body did not arrive within %s: %v", e.limit, e.err)
}

func (e *bodyTimeoutError) Unwrap() error { return e.err }

// limitBodyTime bounds the time a request's body may take to arrive
// (Config.BodyTimeout), counted from the moment the handler chain starts:
// a client that sends its body slowly, or announces a Content-Length it
// never sends, gets a 408 instead of holding a connection and a goroutine
// forever.
//
// Only reading the body is bounded, never the response: the deadline is
// the connection's read deadline, cleared as soon as the body has been
// read to its end, so a stream that follows (SSE, for many minutes) is not
// cut. net/http's server-wide ReadTimeout and WriteTimeout cannot tell the
// two apart, which is why aapd leaves them unset.
//
// A body its handler never reads (a 401, a 404, a route that takes none)
// is read and dropped by net/http as the response starts, so that the
// connection can serve the next request; the deadline bounds that too,
// and a body that stalls there closes the connection.
func (s *Server) limitBodyTime(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody {
			next.ServeHTTP(w, r)
			return
		}
		rc := http.NewResponseController(w)
		if err := rc.SetReadDeadline(time.Now().Add(s.cfg.BodyTimeout)); err != nil {
			next.ServeHTTP(w, r) // no connection to bound, as under httptest.NewRecorder
			return
		}
		r = r.WithContext(r.Context())
		r.Body = &timedBody{body: r.Body, rc: rc, limit: s.cfg.BodyTimeout}
		next.ServeHTTP(w, r)
	})
}

// bodyTimedOut reports whether the request's body timed out. net/http
// cancels the request's context when a read fails, but the client is
// still there, waiting for its 408: observe and fail must not take it for
// a client that went away.
func bodyTimedOut(r *http.Request) bool {
	b, ok := r.Body.(*timedBody)
	return ok && b.expired.Load()
}

// timedBody is a request body read under the body deadline.
type timedBody struct {
	body    io.ReadCloser
	rc      *http.ResponseController
	limit   time.Duration
	done    atomic.Bool // the body has ended and the deadline is cleared
	expired atomic.Bool // the deadline passed while reading
}

func (b *timedBody) Read(p []byte) (int, error) {
	n, err := b.body.Read(p)
	switch {
	case err == nil:
	case errors.Is(err, os.ErrDeadlineExceeded):
		b.expired.Store(true)
		return n, &bodyTimeoutError{limit: b.limit, err: err}
	default: // io.EOF, or a failure that ends the body all the same
		b.finish()
	}
	return n, err
}

func (b *timedBody) Close() error { return b.body.Close() }

// finish clears the read deadline once the body is over: from then on the
// connection is read only to notice a client that goes away, which a
// deadline meant for the body must not cut short. (net/http clears it too
// when it starts that read; this does not depend on it.)
func (b *timedBody) finish() {
	if b.done.CompareAndSwap(false, true) {
		_ = b.rc.SetReadDeadline(time.Time{})
	}
}

// streamBody is Edge.StreamBody: the body, limited to max bytes, whose
// deadline moves on as it arrives (at most once a second, a deadline being
// a timer to reset).
func streamBody(w http.ResponseWriter, r *http.Request, max int64) io.Reader {
	body := http.MaxBytesReader(w, r.Body, max)
	if tb, ok := r.Body.(*timedBody); ok {
		return &arrivingBody{r: body, tb: tb}
	}
	return body
}

// arrivingBody is a timed body whose deadline is the body timeout after
// its last read: a large body may take as long as it keeps arriving.
type arrivingBody struct {
	r    io.Reader
	tb   *timedBody
	last time.Time
}

func (b *arrivingBody) Read(p []byte) (int, error) {
	if now := time.Now(); now.Sub(b.last) >= time.Second && !b.tb.done.Load() {
		_ = b.tb.rc.SetReadDeadline(now.Add(b.tb.limit))
		b.last = now
	}
	return b.r.Read(p)
}
