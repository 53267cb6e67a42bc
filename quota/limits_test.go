package quota_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/aapd/aapd/quota"
	"github.com/aapd/aapd/store"
	"github.com/aapd/aapd/store/storetest"
)

func TestMain(m *testing.M) { os.Exit(storetest.Main(m)) }

// A tenant's own limits win over the defaults, field by field; a change is
// read again once notified; every limit is shared among the live replicas.
func TestLimits(t *testing.T) {
	st := storetest.OpenURL(t, storetest.NewDatabase(t))
	ctx := context.Background()
	tn := storetest.NewTenant(t, st)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	l := quota.New(quota.Config{Source: st, Defaults: store.TenantLimits{RequestsPerSecond: 10, MaxRunningTurns: 3},
		Now: func() time.Time { return now }})

	if got, want := l.For(ctx, tn.ID), (quota.Effective{RequestsPerSecond: 10, Burst: 10, MaxRunningTurns: 3}); got != want {
		t.Fatalf("defaults: %+v, want %+v", got, want)
	}
	if _, err := st.TenantSetLimits(ctx, tn.ID, store.TenantLimits{Burst: 4, MaxRunningTurns: 7}); err != nil {
		t.Fatal(err)
	}
	if got := l.For(ctx, tn.ID); got.Burst != 10 {
		t.Fatalf("a change applied before it was notified or its TTL passed: %+v", got)
	}
	l.Notify(store.Notification{Channel: store.LimitsChangedChannel, Payload: tn.ID})
	if got, want := l.For(ctx, tn.ID), (quota.Effective{RequestsPerSecond: 10, Burst: 4, MaxRunningTurns: 7}); got != want {
		t.Fatalf("after the notification: %+v, want %+v", got, want)
	}

	// Three replicas: each holds a third, rounded up.
	var instances []*store.Instance
	for range 3 {
		in, err := st.StartInstance(ctx, store.InstanceParams{})
		if err != nil {
			t.Fatal(err)
		}
		instances = append(instances, in)
	}
	defer func() {
		for _, in := range instances {
			in.Close()
		}
	}()
	if got := l.For(ctx, tn.ID); got.MaxRunningTurns != 7 {
		t.Fatalf("the replicas were counted again within their TTL: %+v", got)
	}
	now = now.Add(time.Minute)
	got := l.For(ctx, tn.ID)
	if want := (quota.Effective{RequestsPerSecond: 10.0 / 3, Burst: 2, MaxRunningTurns: 3}); got != want {
		t.Fatalf("three replicas: %+v, want %+v", got, want)
	}
	if l.MaxRunningTurns(ctx, tn.ID) != 3 {
		t.Fatal("MaxRunningTurns differs from For")
	}
}

// Without limits anywhere, nothing is limited and the replicas are never
// counted.
func TestNoLimits(t *testing.T) {
	st := storetest.Open(t)
	tn := storetest.NewTenant(t, st)
	l := quota.New(quota.Config{Source: st})
	if got := l.For(context.Background(), tn.ID); got != (quota.Effective{}) {
		t.Fatalf("no limits: %+v", got)
	}
	// A tenant that does not exist (deleted since it authenticated) has the
	// defaults.
	if got := l.For(context.Background(), "00000000-0000-0000-0000-000000000000"); got != (quota.Effective{}) {
		t.Fatalf("unknown tenant: %+v", got)
	}
}
