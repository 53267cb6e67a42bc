package agents

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
)

func TestAdmission(t *testing.T) {
	type step struct {
		tenant     string
		maxRunning int
		want       error // nil: admitted
	}
	tests := []struct {
		name    string
		workers int
		steps   []step
	}{
		{"a lone tenant that fills the pool is over its fair share", 2, []step{
			{"a", 0, nil}, {"a", 0, nil}, {"a", 0, ErrOverFairShare},
			{"b", 0, nil},
		}},
		{"a tenant below its fair share overcommits a full pool", 4, []step{
			{"a", 0, nil}, {"a", 0, nil}, {"a", 0, nil}, {"a", 0, nil},
			// b's share of 4 workers between 2 tenants is 2.
			{"b", 0, nil}, {"b", 0, nil}, {"b", 0, ErrOverFairShare},
			{"a", 0, ErrOverFairShare},
			// c's share among 3 is ceil(4/3) = 2.
			{"c", 0, nil}, {"c", 0, nil},
			// 8 = 2×workers: the hard cap, even for a newcomer below its
			// share, while the others are over theirs.
			{"d", 0, ErrOverloaded},
			{"a", 0, ErrOverFairShare},
		}},
		{"maxRunningTurns holds whether or not the pool is busy", 8, []step{
			{"a", 2, nil}, {"a", 2, nil}, {"a", 2, ErrTooManyTurns}, {"b", 1, nil}, {"b", 1, ErrTooManyTurns},
			{"a", 3, nil},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := newAdmission(tt.workers)
			for i, s := range tt.steps {
				_, err := a.admit(s.tenant, s.maxRunning)
				if !errors.Is(err, s.want) || (s.want == nil) != (err == nil) {
					t.Fatalf("step %d (%s): %v, want %v", i, s.tenant, err, s.want)
				}
			}
		})
	}
}

// Released turns free their tenant's count and the pool; a release is
// counted once however often it is called.
func TestAdmissionRelease(t *testing.T) {
	a := newAdmission(1)
	release, err := a.admit("a", 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.admit("a", 0); !errors.Is(err, ErrOverFairShare) {
		t.Fatalf("a pool full of the tenant's turns: %v", err)
	}
	release()
	release()
	if total, mine := a.running("a"); total != 0 || mine != 0 {
		t.Fatalf("after release: %d running, %d of a", total, mine)
	}
	if _, err := a.admit("b", 0); err != nil {
		t.Fatalf("after release: %v", err)
	}
}

// Whatever the order of arrivals and departures, no more than 2×workers
// turns run; with the pool full every tenant below its fair share is
// admitted, one at or over it is told so (a lone tenant too), and only one
// below it at the hard cap meets an overloaded server.
func TestAdmissionBound(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 1))
		workers := 1 + rng.IntN(16)
		a := newAdmission(workers)
		var held []func()
		for range 2000 {
			if len(held) > 0 && rng.IntN(3) == 0 {
				i := rng.IntN(len(held))
				held[i]()
				held = append(held[:i], held[i+1:]...)
				continue
			}
			tenant := fmt.Sprint("t", rng.IntN(6))
			total, mine := a.running(tenant)
			tenants := len(a.byTenant)
			if mine == 0 {
				tenants++
			}
			release, err := a.admit(tenant, 0)
			switch {
			case err == nil:
				held = append(held, release)
			case total < workers:
				t.Fatalf("seed %d: refused with %d of %d workers busy: %v", seed, total, workers, err)
			case mine < a.fairShare(tenants) && total < 2*workers:
				t.Fatalf("seed %d: tenant with %d running, below its share %d, refused: %v", seed, mine, a.fairShare(tenants), err)
			case mine >= a.fairShare(tenants) && !errors.Is(err, ErrOverFairShare):
				t.Fatalf("seed %d: tenant with %d running, at or over its share %d: %v, want ErrOverFairShare", seed, mine, a.fairShare(tenants), err)
			case mine < a.fairShare(tenants) && !errors.Is(err, ErrOverloaded):
				t.Fatalf("seed %d: tenant below its share at the hard cap: %v, want ErrOverloaded", seed, err)
			}
			if total, _ := a.running(tenant); total > 2*workers {
				t.Fatalf("seed %d: %d running with %d workers", seed, total, workers)
			}
		}
	}
}
