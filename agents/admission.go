package agents

import (
	"errors"
	"fmt"
	"sync"
)

// Why a turn is refused before it starts, besides shutdown.
var (
	// ErrTooManyTurns: the tenant already runs its maxRunningTurns here.
	ErrTooManyTurns = errors.New("the tenant runs as many turns as its limit allows")
	// ErrOverFairShare: every worker is busy and the tenant already holds
	// at least its fair share of them, while other tenants wait.
	ErrOverFairShare = errors.New("every turn worker is busy and the tenant holds at least its fair share of them")
)

// TurnLimitError is ErrTooManyTurns with the limit in force here.
type TurnLimitError struct {
	// Limit is the turns the tenant may run at once in this process.
	Limit int
}

func (e *TurnLimitError) Error() string {
	return fmt.Sprintf("the tenant runs %d turns here, as many as its limit allows", e.Limit)
}

// Is makes a *TurnLimitError match ErrTooManyTurns.
func (e *TurnLimitError) Is(target error) bool { return target == ErrTooManyTurns }

// admission decides whether a turn may start in this process, and counts
// the turns it let start, in all and by tenant.
//
// Below workers running turns, every turn is admitted (up to the tenant's
// maxRunningTurns). Once every worker is busy, a turn is still admitted if
// its tenant runs fewer turns than its fair share, ceil(workers / n), where
// n counts the tenants running turns here plus the requester: one tenant
// filling the pool cannot lock another out. The overcommit is bounded:
// never more than 2×workers turns run at once.
//
// A tenant at or above its share gets ErrOverFairShare, a tenant that
// alone fills every worker included: it is this tenant's load, and another
// tenant would still be served. Only a tenant below its share refused at
// the hard cap gets ErrOverloaded: then the process cannot serve anyone.
//
// The overcommit is safe because a turn holds a worker mostly while its
// model thinks, not a CPU or a database connection; the cap keeps the
// goroutines and memory of a saturated process within twice the
// configured pool.
type admission struct {
	workers int

	mu       sync.Mutex
	total    int
	byTenant map[string]int
}

func newAdmission(workers int) *admission {
	return &admission{workers: workers, byTenant: map[string]int{}}
}

// admit lets a turn of the tenant start, or says why not. maxRunning is the
// tenant's limit of running turns in this process, 0 for none. The release
// it returns must be called once, when the turn's worker is free again.
func (a *admission) admit(tenantID string, maxRunning int) (release func(), err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	mine := a.byTenant[tenantID]
	if maxRunning > 0 && mine >= maxRunning {
		return nil, &TurnLimitError{Limit: maxRunning}
	}
	if a.total >= a.workers {
		others := len(a.byTenant)
		if mine > 0 {
			others--
		}
		switch {
		case mine >= a.fairShare(others+1):
			return nil, ErrOverFairShare
		case a.total >= 2*a.workers:
			return nil, ErrOverloaded
		}
	}
	a.total++
	a.byTenant[tenantID] = mine + 1
	return sync.OnceFunc(func() { a.release(tenantID) }), nil
}

// fairShare is each of n tenants' share of the workers, rounded up.
func (a *admission) fairShare(n int) int { return (a.workers + n - 1) / n }

func (a *admission) release(tenantID string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.total--
	if n := a.byTenant[tenantID] - 1; n > 0 {
		a.byTenant[tenantID] = n
	} else {
		delete(a.byTenant, tenantID)
	}
}

// running reports the turns admitted and not yet released, in all and of
// the tenant.
func (a *admission) running(tenantID string) (total, tenant int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.total, a.byTenant[tenantID]
}
