package main

import (
	"fmt"
	"io/fs"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strings"
)

// brokenLink is a link that does not resolve, and why.
type brokenLink struct {
	file   string
	line   int
	target string
	why    string
}

func (b brokenLink) String() string {
	return fmt.Sprintf("%s:%d: %s: %s", b.file, b.line, b.target, b.why)
}

// schemePattern matches a link with a scheme (https:, mailto:), which is
// not a path in the repository.
var schemePattern = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)

// check resolves every link of every tracked Markdown file against the
// tracked files: a path must name a tracked file or a directory holding
// one, an anchor into a Markdown file one of its headings.
func check(root fs.FS, tracked []string) ([]brokenLink, error) {
	files := map[string]bool{}
	dirs := map[string]bool{".": true}
	for _, f := range tracked {
		files[f] = true
		for d := path.Dir(f); d != "." && !dirs[d]; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	parsed := map[string]*document{}
	load := func(name string) (*document, error) {
		if d, ok := parsed[name]; ok {
			return d, nil
		}
		b, err := fs.ReadFile(root, name)
		if err != nil {
			return nil, err
		}
		d := parse(string(b))
		parsed[name] = d
		return d, nil
	}
	var broken []brokenLink
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for f := range files {
			if isMarkdown(f) && !yield(f) {
				return
			}
		}
	}) {
		doc, err := load(name)
		if err != nil {
			return nil, err
		}
		for _, l := range slices.SortedStableFunc(slices.Values(doc.links), func(a, b link) int { return a.line - b.line }) {
			why, err := resolve(name, l.target, files, dirs, load)
			if err != nil {
				return nil, err
			}
			if why != "" {
				broken = append(broken, brokenLink{file: name, line: l.line, target: l.target, why: why})
			}
		}
	}
	return broken, nil
}

// resolve says why target, a link in the file from, does not resolve, or
// "" when it does (or is not a link into the repository).
func resolve(from, target string, files, dirs map[string]bool, load func(string) (*document, error)) (string, error) {
	if schemePattern.MatchString(target) || strings.HasPrefix(target, "//") {
		return "", nil
	}
	p, fragment, _ := strings.Cut(target, "#")
	p, _, _ = strings.Cut(p, "?")
	if unescaped, err := url.PathUnescape(p); err == nil {
		p = unescaped
	}
	file := from
	if p != "" {
		if strings.HasPrefix(p, "/") {
			file = path.Clean(strings.TrimPrefix(p, "/"))
		} else {
			file = path.Join(path.Dir(from), p)
		}
		if file == ".." || strings.HasPrefix(file, "../") {
			return "outside the repository", nil
		}
		if !files[file] {
			if dirs[file] {
				return "", nil // a directory: GitHub lists it
			}
			return fmt.Sprintf("no file %s in the repository", file), nil
		}
	}
	if fragment == "" || !isMarkdown(file) {
		return "", nil
	}
	if f, err := url.PathUnescape(fragment); err == nil {
		fragment = f
	}
	doc, err := load(file)
	if err != nil {
		return "", err
	}
	if !doc.anchors[fragment] {
		return fmt.Sprintf("%s has no heading with the anchor #%s", file, fragment), nil
	}
	return "", nil
}
