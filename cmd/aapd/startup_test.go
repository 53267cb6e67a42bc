package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/aapd/aapd/store/storetest"
)

// TestServersStartingTogetherOnAFreshDatabase starts several replicas at
// once on a migrated database that has no encryption key yet (no
// AAPD_ENCRYPTION_KEY: the key is generated and kept in the database). Every
// replica must start, and all must share one key: a secret sealed through one
// replica is readable through another.
func TestServersStartingTogetherOnAFreshDatabase(t *testing.T) {
	t.Parallel()
	// The race is between a few statements; several rounds on fresh
	// databases make it show reliably when it is there.
	for round := range 5 {
		if !t.Run(fmt.Sprintf("round %d", round+1), startReplicasTogether) {
			return
		}
	}
}

func startReplicasTogether(t *testing.T) {
	dbURL := storetest.NewDatabase(t)
	const replicas = 8
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		started []*Main
		errs    []error
		gate    = make(chan struct{})
	)
	for range replicas {
		wg.Go(func() {
			cfg := Config{Addr: "127.0.0.1:0", DatabaseURL: dbURL, NoMigrate: true, Workers: 4,
				Lease: 30 * time.Second, DrainTimeout: 5 * time.Second, MaxBodyBytes: 1 << 20}
			<-gate
			m, err := Start(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), io.Discard)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			started = append(started, m)
		})
	}
	close(gate)
	wg.Wait()
	t.Cleanup(func() {
		for _, m := range started {
			if err := m.Shutdown(); err != nil {
				t.Errorf("shutdown: %v", err)
			}
		}
	})
	for _, err := range errs {
		t.Errorf("a replica failed to start: %v", err)
	}
	if len(started) < 2 {
		t.Fatalf("only %d of %d replicas started", len(started), replicas)
	}

	// A secret option set through one replica is usable through every other.
	first := &testServer{Main: started[0], base: "http://" + started[0].Addr()}
	c := first.newTenant(t)
	sid := c.createSession(map[string]any{"agent": map[string]any{"name": "echo", "options": map[string]string{"token": "s3cret"}}})
	for i, m := range started[1:] {
		other := &client{t: t, base: "http://" + m.Addr(), key: c.key}
		if _, err := other.api().GetSession(t.Context(), sid); err != nil {
			t.Errorf("replica %d cannot read the session: %v", i+1, err)
		}
	}
}
