package logctx

import (
	"context"
	"log/slog"
)

// Handler adds the Fields of a record's context to the record, so that
// every line logged with a context (slog's InfoContext and the like) while
// serving a request or running a turn can be tied back to it.
//
// The fields are added at the top level of the record: a logger made with
// WithGroup would put them inside its group, so aapd does not group.
type Handler struct {
	inner slog.Handler
}

// NewHandler wraps h. Wrapping a Handler again returns it unchanged, so
// every package that takes a logger may wrap it without adding the
// fields twice.
func NewHandler(h slog.Handler) slog.Handler {
	if lh, ok := h.(*Handler); ok {
		return lh
	}
	return &Handler{inner: h}
}

// Wrap returns a logger whose handler is wrapped by NewHandler.
func Wrap(l *slog.Logger) *slog.Logger {
	if _, ok := l.Handler().(*Handler); ok {
		return l
	}
	return slog.New(NewHandler(l.Handler()))
}

// Enabled reports whether the wrapped handler takes records of the level.
func (h *Handler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.inner.Enabled(ctx, level)
}

// Handle adds the context's fields and passes the record on.
func (h *Handler) Handle(ctx context.Context, r slog.Record) error {
	if attrs := FromContext(ctx).attrs(); len(attrs) > 0 {
		r = r.Clone()
		r.AddAttrs(attrs...)
	}
	return h.inner.Handle(ctx, r)
}

// WithAttrs returns a Handler over the wrapped handler with the attributes.
func (h *Handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &Handler{inner: h.inner.WithAttrs(attrs)}
}

// WithGroup returns a Handler over the wrapped handler with the group.
func (h *Handler) WithGroup(name string) slog.Handler {
	return &Handler{inner: h.inner.WithGroup(name)}
}
