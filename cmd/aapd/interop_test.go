package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The interop tests run the official clients of the protocols aapd serves
// (npm projects under interop/) against a real server.

// npmInstall installs an interop project's pinned packages (npm ci) when
// its node_modules is missing or older than its package-lock.json.
func npmInstall(t *testing.T, npm, dir string) {
	t.Helper()
	if stale(filepath.Join(dir, "node_modules", ".package-lock.json"), filepath.Join(dir, "package-lock.json")) {
		if out, err := runTool(t.Context(), installTimeout, commandSpec{dir: dir}, npm, "ci", "--no-audit", "--no-fund"); err != nil {
			t.Fatalf("npm ci in %s: %v\n%s", dir, err, out)
		}
	}
}

// stale reports whether the installed lock (npm's copy in node_modules) is
// missing or older than the project's.
func stale(installed, lock string) bool {
	i, err := os.Stat(installed)
	if err != nil {
		return true
	}
	l, err := os.Stat(lock)
	return err != nil || i.ModTime().Before(l.ModTime())
}

// runScenarios runs an interop project's node script, which prints "ok   "
// and a name per scenario that passed, and fails the test unless it exits
// cleanly with want of them.
func runScenarios(t *testing.T, node, dir, script string, env []string, want int) {
	t.Helper()
	out, err := runTool(t.Context(), toolTimeout, commandSpec{dir: dir, env: env}, node, script)
	t.Logf("node %s:\n%s", script, out)
	if err != nil {
		t.Fatalf("the scenarios of %s failed: %v", script, err)
	}
	passed := 0
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(line, "ok   ") {
			passed++
		}
	}
	if passed != want {
		t.Fatalf("%d scenarios of %s passed, want %d", passed, script, want)
	}
}
