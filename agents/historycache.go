package agents

import (
	"container/list"
	"sync"

	"github.com/aapd/aapd/store"
)

// historyCacheSize is how many sessions' compacted histories a process
// keeps decoded: the sessions with the most recent turns.
const historyCacheSize = 4096

// historyCache keeps the compacted history of recently active sessions
// decoded in memory, so a turn reads and decodes only the messages added
// since (by any process) instead of the whole history. An entry is valid
// for a compaction version: a compaction, which rewrites the history,
// moves the version and the next turn reads the history whole.
//
// An entry made at the end of a turn also keeps the session as that end
// wrote it (known): while nothing else writes the session, its next turn
// here claims it without reading anything (store.TurnBeginParams.Known).
type historyCache struct {
	mu      sync.Mutex
	entries map[string]*list.Element
	order   *list.List // most recently used first
}

type cachedHistory struct {
	key      string
	version  int64
	upTo     int64
	messages []Message
	known    *store.KnownSession
}

func newHistoryCache() *historyCache {
	return &historyCache{entries: map[string]*list.Element{}, order: list.New()}
}

func cacheKey(tenantID, sessionID string) string { return tenantID + "/" + sessionID }

// get returns a session's cached history. The caller may append to it:
// appends go past the cached length, in place when there is room, which
// only the session's next turn does (one turn at a time holds a session),
// so a turn costs no copy of its history.
func (c *historyCache) get(key string) cachedHistory {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.entries[key]
	if !ok {
		return cachedHistory{}
	}
	c.order.MoveToFront(el)
	return *el.Value.(*cachedHistory)
}

// put remembers a session's history as it is after a turn, and the
// session as the turn's end wrote it (nil if unknown).
func (c *historyCache) put(key string, version, upTo int64, messages []Message, known *store.KnownSession) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h := &cachedHistory{key: key, version: version, upTo: upTo, messages: messages, known: known}
	if el, ok := c.entries[key]; ok {
		el.Value = h
		c.order.MoveToFront(el)
		return
	}
	c.entries[key] = c.order.PushFront(h)
	for c.order.Len() > historyCacheSize {
		last := c.order.Back()
		c.order.Remove(last)
		delete(c.entries, last.Value.(*cachedHistory).key)
	}
}

// drop forgets a session's history.
func (c *historyCache) drop(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[key]; ok {
		c.order.Remove(el)
		delete(c.entries, key)
	}
}
