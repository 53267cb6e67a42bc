package agents

import (
	"container/list"
	"sync"

	"github.com/aapd/aapd/store"
)

// DefaultHistoryCacheBytes is how much memory a process gives, by default,
// to the decoded histories of its recently active sessions
// (RunnerConfig.HistoryCacheBytes).
const DefaultHistoryCacheBytes = 64 << 20

// historyCache keeps the compacted history of recently active sessions
// decoded in memory, so a turn reads and decodes only the messages added
// since (by any process) instead of the whole history. An entry is valid
// for a compaction version: a compaction, which rewrites the history,
// moves the version and the next turn reads the history whole.
//
// An entry made at the end of a turn, or at a session's creation, also
// keeps the session as that write left it (known): while nothing else
// writes the session, its next turn here claims it without reading
// anything (store.TurnBeginParams.Known).
//
// The cache is bounded by the bytes its entries hold, not by their count:
// a burst of many new short sessions all stay, while a few long histories
// cannot take the process's memory. The least recently used go first.
type historyCache struct {
	mu      sync.Mutex
	limit   int64
	bytes   int64
	entries map[string]*list.Element
	order   *list.List // most recently used first
}

type cachedHistory struct {
	key      string
	version  int64
	upTo     int64
	messages []Message
	known    *store.KnownSession
	bytes    int64
}

func newHistoryCache(limit int64) *historyCache {
	return &historyCache{limit: limit, entries: map[string]*list.Element{}, order: list.New()}
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
// session as the turn's end wrote it (nil if unknown). A history larger
// than the whole cache is not kept.
func (c *historyCache) put(key string, version, upTo int64, messages []Message, known *store.KnownSession) {
	h := &cachedHistory{key: key, version: version, upTo: upTo, messages: messages, known: known}
	h.bytes = entryBytes(h)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.remove(key)
	if h.bytes > c.limit {
		return
	}
	c.entries[key] = c.order.PushFront(h)
	c.bytes += h.bytes
	for c.bytes > c.limit {
		c.remove(c.order.Back().Value.(*cachedHistory).key)
	}
}

// drop forgets a session's history.
func (c *historyCache) drop(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.remove(key)
}

// size returns how many sessions the cache holds and their bytes.
func (c *historyCache) size() (entries int, bytes int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len(), c.bytes
}

func (c *historyCache) remove(key string) {
	el, ok := c.entries[key]
	if !ok {
		return
	}
	c.order.Remove(el)
	delete(c.entries, key)
	c.bytes -= el.Value.(*cachedHistory).bytes
}

// Estimated sizes, in bytes, of what an entry holds besides its text: the
// entry with its session record, and each message and content block.
const (
	entryOverhead   = 1024
	messageOverhead = 160
	blockOverhead   = 160
)

// entryBytes estimates the memory an entry holds: its messages' text and
// JSON, plus a fixed cost for each structure. It needs to be close, not
// exact: it bounds the cache, not an allocation.
func entryBytes(h *cachedHistory) int64 {
	n := int64(entryOverhead + len(h.key))
	if h.known != nil {
		s := h.known.Session
		n += int64(64 * (len(s.Options) + len(s.SecretOptions) + len(s.AgentTools)))
		for _, t := range s.ClientTools {
			n += int64(128 + len(t.Name) + len(t.Title) + len(t.Description) + len(t.Parameters))
		}
	}
	for _, m := range h.messages {
		n += messageOverhead + int64(len(m.Extra)+len(m.Content.Text)+len(m.ToolCallID)+len(m.Reason))
		for _, b := range m.Content.Blocks {
			n += blockOverhead + int64(len(b.Text)+len(b.Thinking)+len(b.ToolCallID)+len(b.Name)+len(b.Input)+len(b.URL))
		}
	}
	return n
}
