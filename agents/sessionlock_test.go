package agents

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestSessionLocksSerializeOneKeyAndForgetUnusedOnes(t *testing.T) {
	var l sessionLocks
	ctx := context.Background()
	var (
		inside, most atomic.Int32
		wg           sync.WaitGroup
	)
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			unlock, err := l.lock(ctx, "t/s")
			if err != nil {
				t.Error(err)
				return
			}
			n := inside.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			time.Sleep(time.Millisecond)
			inside.Add(-1)
			unlock()
		}()
	}
	wg.Wait()
	if most.Load() != 1 {
		t.Errorf("%d holders at once, want 1", most.Load())
	}
	if n := l.size(); n != 0 {
		t.Errorf("%d entries left after every holder unlocked", n)
	}

	// Other keys do not wait.
	unlock, _ := l.lock(ctx, "t/a")
	other, err := l.lock(ctx, "t/b")
	if err != nil {
		t.Fatal(err)
	}
	other()

	// A waiter gives up with its context, and leaves no entry behind.
	cause := errors.New("client gone")
	wctx, cancel := context.WithCancelCause(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := l.lock(wctx, "t/a")
		done <- err
	}()
	cancel(cause)
	if err := <-done; !errors.Is(err, cause) {
		t.Errorf("waiter: %v, want %v", err, cause)
	}
	unlock()
	if n := l.size(); n != 0 {
		t.Errorf("%d entries left", n)
	}
}
