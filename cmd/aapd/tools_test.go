package main

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// Limits on the external commands the tests run. A command that hangs —
// or exits leaving a child that holds its output open — fails its test,
// naming the command, instead of stalling the whole package until go
// test's timeout, whose report names neither.
const (
	buildTimeout   = 8 * time.Minute // a go build on a cold cache
	toolTimeout    = 2 * time.Minute // pg_ctl, initdb, node scenarios
	installTimeout = 5 * time.Minute // npm ci
	// outputGrace is how long a finished or killed command's output may
	// stay open (a child that inherited it) before it is closed.
	outputGrace = 5 * time.Second
)

// commandSpec is an external command a test runs.
type commandSpec struct {
	dir string
	env []string // nil: this process's environment
}

// runTool runs argv within the limit and returns its combined output.
func runTool(ctx context.Context, within time.Duration, spec commandSpec, argv ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir, cmd.Env = spec.dir, spec.env
	cmd.WaitDelay = outputGrace
	out, err := cmd.CombinedOutput()
	if err != nil && ctx.Err() != nil {
		err = fmt.Errorf("%s did not finish within %s: %w", strings.Join(argv, " "), within, err)
	}
	return out, err
}

// A command that outlives its limit, its child still holding the output
// open, is ended and reported: the test that ran it fails, naming it.
func TestRunToolEndsACommandThatHangs(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	start := time.Now()
	_, err := runTool(t.Context(), 100*time.Millisecond, commandSpec{}, "sh", "-c", "sleep 60 & sleep 60")
	if err == nil || !strings.Contains(err.Error(), "did not finish within 100ms") {
		t.Fatalf("err = %v, want it to say the command did not finish", err)
	}
	if took := time.Since(start); took > outputGrace+10*time.Second {
		t.Errorf("runTool returned after %s", took)
	}
}
