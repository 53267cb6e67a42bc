package store_test

import (
	"context"
	"errors"
	"testing"

	"github.com/aapd/aapd/store"
	"github.com/aapd/aapd/store/storetest"
)

// Every aapd process must connect to the coordinator: advisory locks and
// LISTEN/NOTIFY live on the node a connection reaches. Pointed at a worker
// node, aapd refuses to start and to migrate (docs/citus.md).
func TestCitusWorkerNodesAreRefused(t *testing.T) {
	worker := storetest.CitusWorkerURL(t)
	ctx := context.Background()
	if st, err := store.Open(ctx, store.Config{DatabaseURL: worker}); !errors.Is(err, store.ErrCitusWorker) {
		if err == nil {
			st.Close()
		}
		t.Errorf("open on a worker: %v; want ErrCitusWorker", err)
	}
	if _, err := store.Migrate(ctx, worker); !errors.Is(err, store.ErrCitusWorker) {
		t.Errorf("migrate on a worker: %v; want ErrCitusWorker", err)
	}
	// The coordinator is accepted.
	st := storetest.Open(t)
	if err := st.Ping(ctx); err != nil {
		t.Fatal(err)
	}
}
