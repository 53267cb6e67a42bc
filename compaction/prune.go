package compaction

import (
	"context"
	"strconv"
	"unicode/utf8"

	"github.com/aapd/aapd/aap"
)

// PruneToolResults replaces bulky old tool results with a short placeholder
// that keeps the tool call id (so the call still has its result) and says
// how much was there. Tool results — file contents, search hits, command
// output — are usually most of an agent's history and the part it needs
// least once acted on, while the calls and the assistant's reasoning about
// them stay. It prunes the oldest first and only as many as it takes to get
// under the target; if pruning them all is not enough, it then drops the
// oldest messages as Window does.
//
// A result is bulky when its text has more than Policy.PruneMinChars
// characters, or it holds an image. Results among the newest KeepLast
// messages, and placeholders compaction wrote (SourceSeq 0), are never
// pruned.
type PruneToolResults struct{}

// Compact implements Strategy.
func (PruneToolResults) Compact(_ context.Context, h History, p Policy) (Result, error) {
	l, before, extra, over, err := prepare(h, p)
	if !over {
		return unchanged(h, before), err
	}
	out := h.Items
	total := before
	var pruned []int // indexes of pruned items, increasing
	for i := l.head; i < l.tail && total > p.Target; i++ {
		it := out[i]
		if it.Message.Role != aap.RoleTool || it.SourceSeq == 0 {
			continue
		}
		chars, images, ok := bulky(it.Message.Content, p.PruneMinChars)
		if !ok {
			continue
		}
		placeholder := aap.ToolMessage(it.Message.ToolCallID, PrunedText(chars, images))
		t := messageTokens(placeholder)
		if t >= l.tokens[i] {
			continue
		}
		if pruned == nil {
			out = append([]Item(nil), h.Items...)
		}
		out[i] = Item{Message: placeholder}
		total -= l.tokens[i] - t
		l.tokens[i] = t
		pruned = append(pruned, i)
	}
	from := l.head
	if total > p.Target {
		out, from = dropOldest(out, l, total, p.Target)
	}
	kept := 0
	for _, i := range pruned {
		if i >= from {
			kept++
		}
	}
	return finish(h, out, Result{TokensBefore: before, Dropped: from - l.head, Pruned: kept}, extra), nil
}

// PrunedText is the content of a pruned tool result, such as
// "[tool result pruned: 12,345 characters]".
func PrunedText(chars, images int) string {
	var what string
	switch {
	case images == 0:
		what = count(chars, "character")
	case chars == 0:
		what = count(images, "image")
	default:
		what = count(chars, "character") + " and " + count(images, "image")
	}
	return "[tool result pruned: " + what + "]"
}

// bulky reports whether a tool result is bulky — more than minChars
// characters of text, or an image — with its characters and images. Text has
// no more characters than bytes, so most results are ruled out without
// counting characters.
func bulky(c aap.Content, minChars int) (chars, images int, ok bool) {
	var texts []string
	if !c.IsBlocks() {
		texts = []string{c.Text}
	}
	textBytes := 0
	for _, b := range c.Blocks {
		switch b.Type {
		case aap.BlockText:
			texts = append(texts, b.Text)
		case aap.BlockImage:
			images++
		}
	}
	for _, t := range texts {
		textBytes += len(t)
	}
	if textBytes <= minChars && images == 0 {
		return 0, 0, false
	}
	for _, t := range texts {
		chars += utf8.RuneCountInString(t)
	}
	return chars, images, chars > minChars || images > 0
}

// count writes n with thousands separators and the noun, plural unless 1.
func count(n int, noun string) string {
	if n != 1 {
		noun += "s"
	}
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s + " " + noun
}
