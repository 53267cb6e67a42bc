package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/aapd/aapd/store"
	"github.com/aapd/aapd/store/storetest"
)

// Every started instance is counted while it lives, and no longer once it
// has closed.
func TestInstanceCountLive(t *testing.T) {
	st := storetest.OpenURL(t, storetest.NewDatabase(t))
	ctx := context.Background()
	count := func() int {
		t.Helper()
		n, err := st.InstanceCountLive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := count(); n != 0 {
		t.Fatalf("before any instance: %d live", n)
	}
	a, err := st.StartInstance(ctx, store.InstanceParams{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := st.StartInstance(ctx, store.InstanceParams{})
	if err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 2 {
		t.Errorf("two instances: %d live", n)
	}
	b.Close()
	// The server lets go of a closed connection's lock a moment after the
	// client has hung up.
	deadline := time.Now().Add(5 * time.Second)
	n := count()
	for n != 1 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		n = count()
	}
	if n != 1 {
		t.Errorf("after one closed: %d live", n)
	}
	a.Close()
}
