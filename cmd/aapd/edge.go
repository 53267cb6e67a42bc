package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/netip"
	"time"

	"github.com/aapd/aapd/httpapi"
)

// Defaults of Edge.
const (
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultIdleTimeout       = 120 * time.Second
	DefaultMaxHeaderBytes    = 64 << 10
)

// Edge is what bounds a client's hold on the server before any handler
// runs, and where /metrics is served. Zero values take the defaults.
//
// There is deliberately no overall read or write timeout: a stream lasts as
// long as its turn. Only the request's headers (ReadHeaderTimeout) and its
// body (BodyTimeout, httpapi.Config) are bounded, and the quiet between
// requests on a kept-alive connection (IdleTimeout).
type Edge struct {
	// MetricsAddr, when set, is a listener of its own for /metrics, which
	// is then not on the main listener.
	MetricsAddr       string
	ReadHeaderTimeout time.Duration
	BodyTimeout       time.Duration
	IdleTimeout       time.Duration
	MaxHeaderBytes    int
}

// Clients is how the server tells its clients apart by address, and
// throttles those that keep failing to authenticate (docs/operations.md).
type Clients struct {
	// TrustedProxies are the proxies whose X-Forwarded-For is believed
	// (--trusted-proxies); none: the peer of a connection is its client.
	TrustedProxies []netip.Prefix
	// AuthThrottle bounds failed authentications per client address
	// (--auth-failure-burst, --auth-failure-rate); zero is off.
	AuthThrottle httpapi.AuthThrottle
}

// edgeFlags defines the flags of Edge.
func edgeFlags(f *flagSet, e *Edge) {
	f.StringVar(&e.MetricsAddr, "metrics-addr", "", "serve /metrics on this address only (e.g. 127.0.0.1:9090), not on --addr")
	f.fromEnv("metrics-addr", "AAPD_METRICS_ADDR")
	f.DurationVar(&e.ReadHeaderTimeout, "read-header-timeout", DefaultReadHeaderTimeout, "how long a client may take to send a request's headers")
	f.fromEnv("read-header-timeout", "AAPD_READ_HEADER_TIMEOUT")
	f.DurationVar(&e.BodyTimeout, "body-timeout", httpapi.DefaultBodyTimeout, "how long a client may take to send a request's body (408 beyond); responses and streams are not bounded")
	f.fromEnv("body-timeout", "AAPD_BODY_TIMEOUT")
	f.DurationVar(&e.IdleTimeout, "idle-timeout", DefaultIdleTimeout, "how long a kept-alive connection may wait for its next request")
	f.fromEnv("idle-timeout", "AAPD_IDLE_TIMEOUT")
	f.IntVar(&e.MaxHeaderBytes, "max-header-bytes", DefaultMaxHeaderBytes, "largest request line and headers accepted (431 beyond)")
	f.fromEnv("max-header-bytes", "AAPD_MAX_HEADER_BYTES")
}

// clientsFlags defines the flags of Clients.
func clientsFlags(f *flagSet, e *Clients) {
	f.Func("trusted-proxies", "comma-separated addresses and CIDR prefixes of the proxies whose X-Forwarded-For names the client (empty: none, the connection's peer is the client)", func(s string) error {
		p, err := httpapi.ParseTrustedProxies(s)
		e.TrustedProxies = p
		return err
	})
	f.fromEnv("trusted-proxies", "AAPD_TRUSTED_PROXIES")
	f.IntVar(&e.AuthThrottle.Burst, "auth-failure-burst", httpapi.DefaultAuthFailureBurst, "failed authentications a client address may make in a row before it is refused with 429 (0: no throttle)")
	f.fromEnv("auth-failure-burst", "AAPD_AUTH_FAILURE_BURST")
	f.Float64Var(&e.AuthThrottle.Rate, "auth-failure-rate", httpapi.DefaultAuthFailureRate, "failed authentications per second a client address is forgiven, after its burst")
	f.fromEnv("auth-failure-rate", "AAPD_AUTH_FAILURE_RATE")
}

// check refuses values that would leave the edge open or unusable.
func (e Edge) check() error {
	if e.ReadHeaderTimeout < 100*time.Millisecond || e.BodyTimeout < 100*time.Millisecond || e.IdleTimeout < 100*time.Millisecond {
		return &usageError{"--read-header-timeout, --body-timeout and --idle-timeout must each be at least 100ms"}
	}
	if e.MaxHeaderBytes < 4<<10 {
		return &usageError{"--max-header-bytes must be at least 4096"}
	}

	return nil
}

// check refuses a throttle that cannot work.
func (e Clients) check() error {
	if e.AuthThrottle.Burst < 0 || (e.AuthThrottle.Burst > 0 && !(e.AuthThrottle.Rate > 0 && !math.IsInf(e.AuthThrottle.Rate, 0))) {
		return &usageError{"--auth-failure-burst must not be negative (0: no throttle), and --auth-failure-rate must be a finite number above 0"}
	}
	return nil
}

// server is an http.Server for h with the edge's bounds.
func (e Edge) server(h http.Handler, log *slog.Logger) *http.Server {
	or := func(d, def time.Duration) time.Duration {
		if d <= 0 {
			return def
		}
		return d
	}
	maxHeader := e.MaxHeaderBytes
	if maxHeader <= 0 {
		maxHeader = DefaultMaxHeaderBytes
	}
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: or(e.ReadHeaderTimeout, DefaultReadHeaderTimeout),
		IdleTimeout:       or(e.IdleTimeout, DefaultIdleTimeout),
		MaxHeaderBytes:    maxHeader,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
}

// metricsListener serves /metrics on --metrics-addr. Main owns it: it
// starts with the main listener and stops after it, so the drain can be
// watched to its end.
type metricsListener struct {
	ln     net.Listener
	http   *http.Server
	served chan error // Serve's result
}

// listenMetrics opens the metrics listener, if there is one to open, so
// that a busy address fails the start before anything is served.
func (m *Main) listenMetrics() error {
	if m.cfg.MetricsAddr == "" {
		return nil
	}
	ln, err := net.Listen("tcp", m.cfg.MetricsAddr)
	if err != nil {
		return fmt.Errorf("listen on %s (--metrics-addr): %w", m.cfg.MetricsAddr, err)
	}
	m.metrics = &metricsListener{ln: ln, served: make(chan error, 1)}
	return nil
}

// serveMetrics serves /metrics on the listener listenMetrics opened.
func (m *Main) serveMetrics() {
	if m.metrics == nil {
		return
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", m.API.MetricsHandler())
	m.metrics.http = m.cfg.Edge.server(mux, m.log)
	go func() { m.metrics.served <- m.metrics.http.Serve(m.metrics.ln) }()
	m.log.Info("metrics serving", "addr", m.metrics.ln.Addr().String())
}

// MetricsAddr is the address /metrics listens on of its own, or "".
func (m *Main) MetricsAddr() string {
	if m.metrics == nil {
		return ""
	}
	return m.metrics.ln.Addr().String()
}

// stopMetrics stops the metrics listener and waits for it to be done.
func (m *Main) stopMetrics() {
	if m.metrics == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := m.metrics.http.Shutdown(ctx); err != nil {
		m.log.Warn("metrics listener shutdown", "err", err)
		_ = m.metrics.http.Close()
	}
	if err := <-m.metrics.served; err != nil && !errors.Is(err, http.ErrServerClosed) {
		m.log.Warn("metrics listener", "err", err)
	}
}
