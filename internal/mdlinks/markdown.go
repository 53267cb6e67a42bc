package main

import (
	"html"
	"regexp"
	"strconv"
	"strings"
	"unicode"
)

// document is what a Markdown file offers and asks of others: the anchors
// its headings (and HTML ids) define, and its links.
type document struct {
	anchors map[string]bool
	links   []link
}

// link is one link's target and the line it starts on.
type link struct {
	line   int
	target string
}

var (
	fencePattern   = regexp.MustCompile("^\\s*(`{3,}|~{3,})")
	atxPattern     = regexp.MustCompile(`^ {0,3}#{1,6}(?:\s+(.*?))?(?:\s+#+)?\s*$`)
	setextPattern  = regexp.MustCompile(`^ {0,3}(?:=+|-+)\s*$`)
	htmlIDPattern  = regexp.MustCompile(`<[A-Za-z][^>]*\s(?:id|name)="([^"]+)"`)
	inlinePattern  = regexp.MustCompile(`\[((?:[^\[\]]|\[[^\[\]]*\])*)\]\(\s*(<[^>\n]*>|[^)\s]*)(?:\s+(?:"[^"]*"|'[^']*'))?\s*\)`)
	refDefPattern  = regexp.MustCompile(`(?m)^ {0,3}\[[^\]]+\]:\s*(<[^>\n]*>|\S+)`)
	htmlRefPattern = regexp.MustCompile(`<[A-Za-z][^>]*\s(?:href|src)="([^"]*)"`)
)

// parse reads a Markdown file's anchors and links, leaving out what is in
// code blocks and code spans.
func parse(src string) *document {
	d := &document{anchors: map[string]bool{}}
	slugs := slugger{}
	lines := strings.Split(src, "\n")
	var fence string // the opening fence while in a fenced code block
	prose := make([]string, len(lines))
	for i, line := range lines {
		if fence != "" {
			if m := fencePattern.FindStringSubmatch(line); m != nil && m[1][0] == fence[0] && len(m[1]) >= len(fence) &&
				strings.TrimSpace(strings.TrimLeft(strings.TrimSpace(line), m[1][:1])) == "" {
				fence = ""
			}
			continue
		}
		if m := fencePattern.FindStringSubmatch(line); m != nil {
			fence = m[1]
			continue
		}
		prose[i] = line
		if m := atxPattern.FindStringSubmatch(line); m != nil {
			d.anchors[slugs.slug(m[1])] = true
		} else if i > 0 && prose[i-1] != "" && strings.TrimSpace(prose[i-1]) != "" && setextPattern.MatchString(line) &&
			!strings.HasPrefix(strings.TrimSpace(prose[i-1]), "|") {
			d.anchors[slugs.slug(prose[i-1])] = true
		}
	}
	text := blankCodeSpans(strings.Join(prose, "\n"))
	for _, m := range htmlIDPattern.FindAllStringSubmatch(text, -1) {
		d.anchors[m[1]] = true
	}
	add := func(text string, matches [][]int, group int) {
		for _, m := range matches {
			target := strings.Trim(text[m[2*group]:m[2*group+1]], "<>")
			if target == "" {
				continue
			}
			d.links = append(d.links, link{line: 1 + strings.Count(text[:m[0]], "\n"), target: html.UnescapeString(target)})
		}
	}
	add(text, inlinePattern.FindAllStringSubmatchIndex(text, -1), 2)
	add(text, refDefPattern.FindAllStringSubmatchIndex(text, -1), 1)
	add(text, htmlRefPattern.FindAllStringSubmatchIndex(text, -1), 1)
	return d
}

// blankCodeSpans replaces the content of code spans (`...`, “...“) by
// spaces, so that a link written inside one is not read as a link.
func blankCodeSpans(s string) string {
	b := []byte(s)
	for i := 0; i < len(b); {
		if b[i] != '`' {
			i++
			continue
		}
		n := backticks(b, i)
		// The span closes at the next run of exactly n backticks.
		end := -1
		for j := i + n; j < len(b); {
			if b[j] != '`' {
				j++
				continue
			}
			m := backticks(b, j)
			if m == n {
				end = j
				break
			}
			j += m
		}
		if end < 0 {
			i += n
			continue
		}
		for k := i; k < end+n; k++ {
			if b[k] != '\n' {
				b[k] = ' '
			}
		}
		i = end + n
	}
	return string(b)
}

// backticks is the length of the run of backticks at b[i].
func backticks(b []byte, i int) int {
	n := 0
	for i+n < len(b) && b[i+n] == '`' {
		n++
	}
	return n
}

// slugger makes GitHub's anchors for a file's headings: a second heading
// with the same anchor gets -1, a third -2, and so on.
type slugger map[string]int

var (
	headingLinkPattern = regexp.MustCompile(`!?\[((?:[^\[\]]|\[[^\[\]]*\])*)\]\([^)]*\)`)
	htmlTagPattern     = regexp.MustCompile(`</?[A-Za-z][^>]*>`)
	emphasisUnderscore = regexp.MustCompile(`(^|[\s(])_+|_+($|[\s).,:;!?])`)
)

// slug is the anchor GitHub gives a heading: its text as shown (links by
// their text, no markup), lower case, every character that is not a
// letter, a digit, '-', '_' or a space dropped, and each space a '-'.
func (s slugger) slug(heading string) string {
	text := headingLinkPattern.ReplaceAllString(heading, "$1")
	text = htmlTagPattern.ReplaceAllString(text, "")
	text = stripEmphasisUnderscores(text)
	text = html.UnescapeString(text)
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(text)) {
		switch {
		case unicode.IsLetter(r), unicode.IsNumber(r), unicode.IsMark(r), r == '-', r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	slug := b.String()
	unique := slug
	for {
		if _, taken := s[unique]; !taken {
			break
		}
		s[slug]++
		unique = slug + "-" + strconv.Itoa(s[slug])
	}
	s[unique] = 0
	return unique
}

// stripEmphasisUnderscores drops the underscores that mark emphasis
// (_word_), keeping those inside words and inside code spans (snake_case).
func stripEmphasisUnderscores(text string) string {
	parts := strings.Split(text, "`")
	for i := 0; i < len(parts); i += 2 { // the even parts are outside code spans
		parts[i] = emphasisUnderscore.ReplaceAllString(parts[i], "$1$2")
	}
	return strings.Join(parts, "`")
}
