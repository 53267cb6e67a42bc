package logctx

import (
	"context"
	"log/slog"
)

// Auditor returns a logger over l's handler that logs every record whatever
// its level: an operator who quiets the logs (--log-level warn) must not
// lose the audit trail with them (lines with msg "audit": the admin API's
// changes, the webhook deliverer's disabling of an endpoint).
func Auditor(l *slog.Logger) *slog.Logger { return slog.New(alwaysOn{l.Handler()}) }

// alwaysOn passes every record to its handler.
type alwaysOn struct{ slog.Handler }

func (alwaysOn) Enabled(context.Context, slog.Level) bool { return true }

func (h alwaysOn) WithAttrs(attrs []slog.Attr) slog.Handler {
	return alwaysOn{h.Handler.WithAttrs(attrs)}
}

func (h alwaysOn) WithGroup(name string) slog.Handler { return alwaysOn{h.Handler.WithGroup(name)} }
