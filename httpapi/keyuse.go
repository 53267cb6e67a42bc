package httpapi

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/aapd/aapd/store"
)

// keyUseTimeout bounds one write of key uses: a slow database delays when
// last_used_at moves, never a request, and never a shutdown by more.
const keyUseTimeout = 5 * time.Second

// keyUses records when API keys are used, off the request path: a request
// only notes the use in memory; a key is written at most once per
// store.APIKeyTouchEvery, by a background goroutine that writes every key
// waiting in one statement. One write is in flight at a time; the uses
// that arrive meanwhile wait for the next one, so under load the writes
// batch themselves.
//
// The goroutine runs only while there is something to write, so a server
// that is never closed leaks nothing for longer than a write; Close waits
// for it.
type keyUses struct {
	touch func(context.Context, []store.APIKeyUse) error
	now   func() time.Time
	log   *slog.Logger

	mu sync.Mutex
	// last is, by key, the use last handed to a write; entries older than
	// APIKeyTouchEvery are dropped, so it holds the keys used in the last
	// minute, not every key ever seen.
	last     map[string]time.Time
	pending  map[string]store.APIKeyUse // by key: uses waiting for a write
	writing  bool                       // a writer goroutine runs
	closed   bool
	finished sync.WaitGroup
}

func newKeyUses(touch func(context.Context, []store.APIKeyUse) error, now func() time.Time, log *slog.Logger) *keyUses {
	return &keyUses{touch: touch, now: now, log: log,
		last: map[string]time.Time{}, pending: map[string]store.APIKeyUse{}}
}

// used notes that a key was used now; it never waits on the database.
func (k *keyUses) used(tenantID, publicID string) {
	at := k.now()
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed {
		return
	}
	if t, ok := k.last[publicID]; ok && at.Sub(t) < store.APIKeyTouchEvery {
		return
	}
	k.last[publicID] = at
	k.pending[publicID] = store.APIKeyUse{TenantID: tenantID, PublicID: publicID, At: at}
	if !k.writing {
		k.writing = true
		k.finished.Add(1)
		go k.write()
	}
}

// write writes the pending uses, batch after batch, until none is left.
func (k *keyUses) write() {
	defer k.finished.Done()
	for {
		k.mu.Lock()
		if len(k.pending) == 0 {
			k.writing = false
			k.forgetOld()
			k.mu.Unlock()
			return
		}
		batch := make([]store.APIKeyUse, 0, len(k.pending))
		for _, u := range k.pending {
			batch = append(batch, u)
		}
		clear(k.pending)
		k.mu.Unlock()

		ctx, cancel := context.WithTimeout(context.Background(), keyUseTimeout)
		err := k.touch(ctx, batch)
		cancel()
		if err != nil {
			k.log.Warn("record API key use", "keys", len(batch), "err", err)
			k.retryLater(batch)
		}
	}
}

// retryLater forgets the uses of a failed write, so that the keys' next
// uses are written.
func (k *keyUses) retryLater(batch []store.APIKeyUse) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, u := range batch {
		if k.last[u.PublicID].Equal(u.At) {
			delete(k.last, u.PublicID)
		}
	}
}

// forgetOld drops the keys not used for APIKeyTouchEvery: their next use
// is written anyway. k.mu is held.
func (k *keyUses) forgetOld() {
	now := k.now()
	for id, t := range k.last {
		if now.Sub(t) >= store.APIKeyTouchEvery {
			delete(k.last, id)
		}
	}
}

// close stops noting uses and waits for the write in flight, if any.
func (k *keyUses) close() {
	k.mu.Lock()
	k.closed = true
	k.mu.Unlock()
	k.finished.Wait()
}

// Close stops the server's background work: it waits for the write of API
// key uses in flight (at most keyUseTimeout), and records no use after.
// Call it once the HTTP server has stopped, before closing the store.
func (s *Server) Close() {
	s.keyUses.close()
	s.tokens.Close()
}
