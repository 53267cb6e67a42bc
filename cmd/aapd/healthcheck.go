package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"
)

// healthcheck probes a server's URL: container images without a shell or
// curl use it as their health check.
func healthcheck(ctx context.Context, args []string, stderr io.Writer) error {
	f := newFlagSet("healthcheck", stderr)
	url := f.String("url", "http://127.0.0.1:8080/readyz", "URL that must answer 200")
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
