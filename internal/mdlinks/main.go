// Command mdlinks checks that every relative link in the repository's
// Markdown resolves on a fresh clone: its file or directory is tracked by
// git, and its #anchor names a heading of the Markdown file it points at,
// by GitHub's rules for heading anchors. `make lint` runs it from the root
// of the repository:
//
//	go run ./internal/mdlinks
//
// It checks every tracked *.md file and prints one line per broken link,
// exiting 1 if there is any. Links with a scheme (https:, mailto:) are not
// followed; an anchor into a file that is not Markdown (main.go#L10) is not
// checked.
package main

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"strings"
)

func main() {
	tracked, err := gitFiles()
	if err != nil {
		fmt.Fprintln(os.Stderr, "mdlinks:", err)
		os.Exit(2)
	}
	os.Exit(run(os.DirFS("."), tracked, os.Stdout))
}

// run checks the tracked Markdown files of root, writes what is broken to
// out, and returns the exit code.
func run(root fs.FS, tracked []string, out io.Writer) int {
	broken, err := check(root, tracked)
	if err != nil {
		fmt.Fprintln(out, "mdlinks:", err)
		return 2
	}
	for _, b := range broken {
		fmt.Fprintln(out, b)
	}
	if len(broken) > 0 {
		fmt.Fprintf(out, "mdlinks: %d broken links in the Markdown files (a link is relative to the file it is in)\n", len(broken))
		return 1
	}
	return 0
}

// gitFiles lists the files git tracks, relative to the working directory
// (the repository's root).
func gitFiles() ([]string, error) {
	out, err := exec.Command("git", "ls-files", "-z").Output()
	if err != nil {
		return nil, fmt.Errorf("git ls-files (run mdlinks at the root of the repository): %w", err)
	}
	var files []string
	for _, f := range bytes.Split(out, []byte{0}) {
		if len(f) > 0 {
			files = append(files, string(f))
		}
	}
	return files, nil
}

// isMarkdown reports whether a path names a Markdown file.
func isMarkdown(path string) bool { return strings.HasSuffix(strings.ToLower(path), ".md") }
