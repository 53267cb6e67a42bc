package main

import (
	"bytes"
	"strings"
	"testing"
	"testing/fstest"
)

// The anchors GitHub gives headings (as github-slugger makes them).
func TestSlugFollowsGitHub(t *testing.T) {
	cases := []struct{ heading, want string }{
		{"Limits and fair share", "limits-and-fair-share"},
		{"AAP v1 (`/v1`)", "aap-v1-v1"},
		{"`GET /sessions/{id}/events`", "get-sessionsidevents"},
		{"Why a turn failed: the `error` object", "why-a-turn-failed-the-error-object"},
		{"Issue 9's targets: where they stand", "issue-9s-targets-where-they-stand"},
		{"`prune_tool_results` (the default)", "prune_tool_results-the-default"},
		{"[The admin API](tenancy.md) in short", "the-admin-api-in-short"},
		{"_Emphasis_ and **strong**", "emphasis-and-strong"},
		{"snake_case stays", "snake_case-stays"},
		{"C++ & Go", "c--go"},
		{"A -- B", "a----b"},
		{"Ünïcode Café", "ünïcode-café"},
		{"Fish &amp; chips", "fish--chips"},
		{"<a name=\"x\"></a>Tagged", "tagged"},
	}
	for _, tc := range cases {
		if got := (slugger{}).slug(tc.heading); got != tc.want {
			t.Errorf("slug(%q) = %q, want %q", tc.heading, got, tc.want)
		}
	}
	// Headings that repeat get -1, -2, ...; a heading whose own text is a
	// repeat's anchor then gets the next free one.
	s := slugger{}
	var got []string
	for _, h := range []string{"Usage", "Usage", "Usage 1", "Usage", "Usage-1"} {
		got = append(got, s.slug(h))
	}
	if want := "usage usage-1 usage-1-1 usage-2 usage-1-2"; strings.Join(got, " ") != want {
		t.Errorf("repeated headings: %q, want %q", strings.Join(got, " "), want)
	}
}

func TestCheckFindsEveryBrokenLink(t *testing.T) {
	files := fstest.MapFS{
		"README.md": {Data: []byte(`# Project

See [the docs](docs/), [ops](docs/ops.md#metrics), [limits](docs/ops.md#limits),
[a file](deploy/dash.json), [a line](main.go#L3), [home](https://example.com/x.md#nope)
and [mail](mailto:a@example.com), [self](#project), [a space](docs/two%20words.md).

A link whose text
[wraps over
lines](docs/gone.md) is read too.

` + "`[not a link](nowhere.md)`" + ` and

` + "```sh\n[not a link either](nowhere.md)\n# not a heading\n```" + `

[ref]: docs/missing.md
<a href="docs/ops.md#nope">html</a>
[up](../outside.md), [untracked](secret.md), [anchor](#not-a-heading)
`)},
		"docs/ops.md": {Data: []byte(`# Ops

## Metrics

[Home](../README.md#project), [wrong](docs/ops.md), [here](#metrics), [root](/README.md)

Setext heading
--------------
[setext](#setext-heading)
`)},
		"docs/two words.md": {Data: []byte("# Two\n")},
		"deploy/dash.json":  {Data: []byte("{}")},
		"main.go":           {Data: []byte("package main\n")},
		"secret.md":         {Data: []byte("# Untracked\n")},
	}
	tracked := []string{"README.md", "docs/ops.md", "docs/two words.md", "deploy/dash.json", "main.go"}
	var out bytes.Buffer
	if code := run(files, tracked, &out); code != 1 {
		t.Errorf("exit code %d, want 1", code)
	}
	want := []string{
		"README.md:3: docs/ops.md#limits: docs/ops.md has no heading with the anchor #limits",
		"README.md:8: docs/gone.md: no file docs/gone.md in the repository",
		"README.md:18: docs/missing.md: no file docs/missing.md in the repository",
		"README.md:19: docs/ops.md#nope: docs/ops.md has no heading with the anchor #nope",
		"README.md:20: ../outside.md: outside the repository",
		"README.md:20: secret.md: no file secret.md in the repository",
		"README.md:20: #not-a-heading: README.md has no heading with the anchor #not-a-heading",
		"docs/ops.md:5: docs/ops.md: no file docs/docs/ops.md in the repository",
		"mdlinks: 8 broken links in the Markdown files (a link is relative to the file it is in)",
	}
	if got := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("mdlinks printed:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestCheckPassesCleanFiles(t *testing.T) {
	files := fstest.MapFS{
		"README.md":   {Data: []byte("# A\n\n[b](docs/b.md#b-section) [c](docs/)\n")},
		"docs/b.md":   {Data: []byte("# B\n\n## B section\n\n[a](../README.md#a)\n")},
		"docs/img.md": {Data: []byte("![alt](../README.md) <img src=\"b.md\">\n")},
	}
	var out bytes.Buffer
	if code := run(files, []string{"README.md", "docs/b.md", "docs/img.md"}, &out); code != 0 || out.Len() != 0 {
		t.Errorf("exit code %d, output %q; want 0 and nothing", code, out.String())
	}
}
