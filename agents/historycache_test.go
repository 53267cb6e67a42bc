package agents

import (
	"fmt"
	"strings"
	"testing"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/store"
)

func historyOf(texts ...string) []Message {
	out := make([]Message, len(texts))
	for i, s := range texts {
		out[i] = Message{Message: aap.UserMessage(s)}
	}
	return out
}

// The cache holds what its byte bound allows, dropping the least recently
// used first; a history bigger than the whole cache is not kept at all.
func TestHistoryCacheIsBoundedByBytes(t *testing.T) {
	long := strings.Repeat("x", 10_000)
	one := entryBytes(&cachedHistory{key: "t/s0", messages: historyOf(long)})
	c := newHistoryCache(3*one + one/2) // room for three such sessions

	for i := range 3 {
		c.put(fmt.Sprintf("t/s%d", i), 0, 1, historyOf(long), nil)
	}
	c.get("t/s0") // used since: s1 is now the least recently used
	c.put("t/s3", 0, 1, historyOf(long), nil)

	for key, want := range map[string]bool{"t/s0": true, "t/s1": false, "t/s2": true, "t/s3": true} {
		if got := c.get(key).messages != nil; got != want {
			t.Errorf("%s kept = %v, want %v", key, got, want)
		}
	}
	if n, b := c.size(); n != 3 || b > c.limit {
		t.Errorf("size = %d entries, %d bytes; want 3 within %d", n, b, c.limit)
	}

	// s0 grows past the whole cache: its old entry goes, nothing replaces it.
	c.put("t/s0", 0, 2, historyOf(long, strings.Repeat("y", int(4*one))), nil)
	if c.get("t/s0").messages != nil {
		t.Error("a history larger than the cache was kept")
	}
	if n, b := c.size(); n != 2 || b != 2*one {
		t.Errorf("after dropping s0: %d entries, %d bytes; want 2, %d", n, b, 2*one)
	}
	c.drop("t/s2")
	if n, b := c.size(); n != 1 || b != one {
		t.Errorf("after drop: %d entries, %d bytes; want 1, %d", n, b, one)
	}
}

// A burst of new short sessions — the sessions a process has just created
// and is about to run a turn on — all stay remembered under the default
// bound, so that each first turn claims its session in one round trip.
func TestHistoryCacheKeepsABurstOfNewSessions(t *testing.T) {
	c := newHistoryCache(DefaultHistoryCacheBytes)
	const sessions = 20_000
	for i := range sessions {
		id := fmt.Sprintf("sess_%026d", i)
		sess := store.Session{ID: id, TenantID: "ten_1", AgentName: "echo", Options: map[string]string{"model": "fast"}}
		c.put(cacheKey("ten_1", id), 0, 1, historyOf("a first question of a few words"), &store.KnownSession{Session: sess, LastSeq: 1})
	}
	if n, b := c.size(); n != sessions {
		t.Errorf("%d of %d new sessions remembered (%d bytes, bound %d)", n, sessions, b, c.limit)
	}
}
