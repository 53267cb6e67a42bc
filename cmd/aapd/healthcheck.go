package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"
)

// healthcheck probes a server's URL: container images without a shell or
// curl use it as their health check.
func healthcheck(ctx context.Context, args []string, stderr io.Writer) error {
	f := newFlagSet("healthcheck", stderr)
	url := f.String("url", healthURL(os.Getenv("AAPD_ADDR")), "URL that must answer 200 (default: /readyz on the port of $AAPD_ADDR)")
	if err := f.parse(args); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, *url, nil)
	if err != nil {
		return &usageError{fmt.Sprintf("healthcheck: %v", err)}
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("healthcheck: %s answered %s", *url, res.Status)
	}
	return nil
}

// healthURL is the readiness URL of a server listening on addr (the
// --addr of aapd serve, as in $AAPD_ADDR), probed on the loopback: a
// container's health check then follows the port it is configured with.
func healthURL(addr string) string {
	port := "8080"
	if _, p, err := net.SplitHostPort(addr); err == nil && p != "" && p != "0" {
		port = p
	}
	return "http://" + net.JoinHostPort("127.0.0.1", port) + "/readyz"
}
