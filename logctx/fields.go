// Package logctx ties log lines to the request or turn they were written
// for. A request (or a turn's worker) carries a Fields holder in its
// context; Handler, a slog.Handler wrapper, adds the holder's request_id,
// tenant, session and turn to every record logged with that context.
//
// The holder is mutable because what is known grows as a request is
// served: the request id first (httpapi's observe), the tenant after
// authentication, the session and turn in the handlers. The access log
// line, written by observe after the handler returned, then carries all of
// them.
package logctx

import (
	"context"
	"log/slog"
	"sync"
)

// Attribute keys Handler writes.
const (
	KeyRequestID = "request_id"
	KeyTenant    = "tenant"
	KeySession   = "session"
	KeyTurn      = "turn"
)

// Fields are the identifiers of a request or turn known so far. Its
// methods are safe for concurrent use (a stream's goroutines log too) and
// on a nil *Fields, so callers need not check that a context has one.
type Fields struct {
	mu        sync.Mutex
	requestID string
	tenant    string
	session   string
	turn      string
}

// New returns a holder with the request id (which may be empty).
func New(requestID string) *Fields { return &Fields{requestID: requestID} }

type fieldsKey struct{}

// NewContext returns ctx carrying f.
func NewContext(ctx context.Context, f *Fields) context.Context {
	return context.WithValue(ctx, fieldsKey{}, f)
}

// FromContext returns the holder ctx carries, or nil.
func FromContext(ctx context.Context) *Fields {
	if ctx == nil {
		return nil
	}
	f, _ := ctx.Value(fieldsKey{}).(*Fields)
	return f
}

// SetTenant records the tenant once it is known.
func (f *Fields) SetTenant(id string) { f.set(func() { f.tenant = id }) }

// SetSession records the session once it is known.
func (f *Fields) SetSession(id string) { f.set(func() { f.session = id }) }

// SetTurn records the turn once it is known.
func (f *Fields) SetTurn(id string) { f.set(func() { f.turn = id }) }

func (f *Fields) set(assign func()) {
	if f == nil {
		return
	}
	f.mu.Lock()
	assign()
	f.mu.Unlock()
}

// RequestID is the request id, or "".
func (f *Fields) RequestID() string {
	if f == nil {
		return ""
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.requestID
}

// attrs are the non-empty fields as log attributes, in a fixed order.
func (f *Fields) attrs() []slog.Attr {
	if f == nil {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]slog.Attr, 0, 4)
	for _, kv := range [...]struct{ k, v string }{
		{KeyRequestID, f.requestID}, {KeyTenant, f.tenant}, {KeySession, f.session}, {KeyTurn, f.turn},
	} {
		if kv.v != "" {
			out = append(out, slog.String(kv.k, kv.v))
		}
	}
	return out
}
