package compaction

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/aapd/aapd/aap"
)

// gen builds random valid compacted histories, the way aapd's store holds
// them: seeded system messages, turns of a user message and the agent's
// steps (text, thinking, parallel tool calls, results in any order), now
// and then a system message between turns, images, provider data, seq gaps,
// what an earlier compaction wrote, and sometimes an unresolved tool call at
// the end. It can go on from a compacted history, as a session does.
type gen struct {
	r     *rand.Rand
	items []Item
	seq   int64
	calls int
	open  []string // tool calls of the last assistant message still unanswered
}

func newGen(seed uint64) *gen {
	return &gen{r: rand.New(rand.NewPCG(seed, 0x5eed)), seq: int64(rand.New(rand.NewPCG(seed, 1)).IntN(50))}
}

// history returns a new random history of up to maxTurns turns.
func (g *gen) history(maxTurns int) []Item {
	for range g.r.IntN(3) {
		g.add(aap.SystemMessage(g.text(g.short())))
	}
	switch g.r.IntN(10) {
	case 0: // compacted before by summarize
		g.items = append(g.items, summaryItem(g.text(g.short()), 500))
	case 1: // compacted before by window, mid-turn
		g.items = append(g.items, omittedItem())
		g.step(true)
	case 2: // a seeded history that opens with the assistant
		g.add(assistantText(g.text(g.short())))
	}
	g.more(maxTurns)
	return g.items
}

// more appends up to maxTurns turns, closing any open tool call first as the
// server does when a user moves on, and may leave a tool call unresolved.
func (g *gen) more(maxTurns int) []Item {
	for _, id := range g.open {
		g.add(aap.ToolMessage(id, "Tool call cancelled: the user sent a new message"))
	}
	g.open = nil
	for range 1 + g.r.IntN(maxTurns) {
		if g.r.IntN(20) == 0 {
			g.add(aap.SystemMessage(g.text(g.short())))
		}
		g.add(g.user())
		for range g.r.IntN(4) {
			if !g.step(false) {
				break
			}
		}
		if g.r.IntN(2) == 0 {
			g.add(assistantText(g.text(g.short())))
		}
	}
	if g.r.IntN(5) == 0 {
		g.step(true)
		answered := g.r.IntN(len(g.open))
		for _, id := range g.open[:answered] {
			g.add(g.result(id))
		}
		g.open = g.open[answered:]
	}
	return g.items
}

// step adds an assistant message; when it calls tools (always if calls is
// set) their results follow, in any order, and step reports true.
func (g *gen) step(calls bool) bool {
	var blocks []aap.ContentBlock
	if g.r.IntN(3) == 0 {
		blocks = append(blocks, aap.ThinkingBlock(g.text(g.short())))
	}
	if g.r.IntN(2) == 0 {
		blocks = append(blocks, aap.TextBlock(g.text(g.short())))
	}
	n := g.r.IntN(4)
	if calls {
		n = 1 + g.r.IntN(3)
	}
	var ids []string
	for range n {
		g.calls++
		id := fmt.Sprintf("call_%d", g.calls)
		ids = append(ids, id)
		input, _ := json.Marshal(map[string]string{"q": g.text(g.r.IntN(80))})
		blocks = append(blocks, aap.ToolUseBlock(aap.ToolCall{ToolCallID: id, Name: "lookup", Input: input}))
	}
	if len(blocks) == 0 {
		blocks = append(blocks, aap.TextBlock(g.text(g.short())))
	}
	it := g.add(aap.AssistantMessage(blocks...))
	if g.r.IntN(3) == 0 {
		it.Extra = json.RawMessage(fmt.Sprintf(`{"signature":%q}`, g.text(40)))
	}
	if calls {
		g.open = ids
		return true
	}
	g.r.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	for _, id := range ids {
		g.add(g.result(id))
	}
	return n > 0
}

func (g *gen) user() aap.Message {
	if g.r.IntN(10) == 0 {
		return aap.Message{Role: aap.RoleUser, Content: aap.BlockContent(aap.TextBlock(g.text(g.short())), g.image())}
	}
	return aap.UserMessage(g.text(g.short()))
}

func (g *gen) result(id string) aap.Message {
	switch g.r.IntN(20) {
	case 0:
		return aap.Message{Role: aap.RoleTool, ToolCallID: id, Content: aap.BlockContent(aap.TextBlock(g.text(g.short())), g.image())}
	case 1, 2, 3, 4, 5:
		return aap.ToolMessage(id, g.text(1_000+g.r.IntN(6_000)))
	}
	return aap.ToolMessage(id, g.text(g.short()))
}

func (g *gen) image() aap.ContentBlock {
	return aap.ContentBlock{Type: aap.BlockImage, URL: "data:image/png;base64," + strings.Repeat("A", g.r.IntN(5_000))}
}

// add appends a message as a new full-history copy, sometimes after a gap
// in seqs (messages compaction dropped earlier), and returns its item.
func (g *gen) add(m aap.Message) *Item {
	g.seq += 1 + int64(g.r.IntN(8)/7*g.r.IntN(5))
	g.items = append(g.items, Item{Message: m, SourceSeq: g.seq})
	return &g.items[len(g.items)-1]
}

// short is a typical message length: mostly short, sometimes long.
func (g *gen) short() int {
	if g.r.IntN(5) == 0 {
		return g.r.IntN(3_000)
	}
	return g.r.IntN(300)
}

// corpus is random text with characters that JSON escapes and one of two
// bytes; generated texts are slices of it, which is much faster than drawing
// each character.
var corpus = sync.OnceValue(func() string {
	alphabet := []rune("abcdefghij klmnopqrstuvwxyz\n.,é{}\"")
	r := rand.New(rand.NewPCG(7, 7))
	var b strings.Builder
	for b.Len() < 1<<16 {
		b.WriteRune(alphabet[r.IntN(len(alphabet))])
	}
	return b.String()
})

// text returns about n bytes of random text, cut on characters.
func (g *gen) text(n int) string {
	c := corpus()
	start := g.r.IntN(len(c) - n - utf8.UTFMax)
	for !utf8.RuneStart(c[start]) {
		start++
	}
	end := start + n
	for !utf8.RuneStart(c[end]) {
		end++
	}
	return c[start:end]
}

func assistantText(s string) aap.Message {
	return aap.Message{Role: aap.RoleAssistant, Content: aap.TextContent(s)}
}
