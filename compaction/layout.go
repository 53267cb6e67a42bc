package compaction

import "github.com/aapd/aapd/aap"

// layout splits a history into what compaction may remove and what it must
// keep:
//
//	items[:head]          the leading system messages: always kept
//	items[head:tail]      removable, in units (starts[i] to starts[i+1])
//	items[tail:]          the newest KeepLast messages, widened to whole
//	                      units: always kept verbatim
//
// A unit is what is removed whole: one message, or an assistant message that
// calls tools together with the tool messages answering it. Cutting only
// between units is what keeps every tool call with its results.
type layout struct {
	head, tail int
	// starts holds the first index of each removable unit, then tail.
	starts []int
	// tokens[i] is the estimate of items[i].
	tokens []int
}

// units is the number of removable units.
func (l layout) units() int { return len(l.starts) - 1 }

func layoutOf(items []Item, keepLast int) layout {
	l := layout{tokens: make([]int, len(items))}
	for i, it := range items {
		l.tokens[i] = messageTokens(it.Message)
	}
	for l.head < len(items) && items[l.head].Message.Role == aap.RoleSystem {
		l.head++
	}
	// Results follow their call, with only other results between, so a
	// tool message belongs to the unit before it. (One that answers no call
	// there — not a valid conversation — goes with it all the same, so a
	// kept part never starts with a stray result.)
	protect := max(l.head, len(items)-keepLast)
	l.tail = l.head
	for i := l.head; i <= protect && i < len(items); i++ {
		if i > l.head && items[i].Message.Role == aap.RoleTool {
			continue
		}
		l.starts = append(l.starts, i)
		l.tail = i
	}
	// The last start found, tail, is that of the unit holding index protect:
	// that unit and all after it are kept. It stays in starts as the end of
	// the last removable unit.
	if len(l.starts) == 0 {
		l.starts = append(l.starts, l.tail)
	}
	return l
}
