package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aapd/aapd/store/storetest"
)

// exitBound is how long a test waits for an interrupted server to exit:
// far above what stopping takes, far below the --shutdown-delay of 10
// minutes the tests set, so exiting within it proves the delay skipped
// without timing anything.
const exitBound = 2 * time.Minute

// Ctrl-C (SIGINT) stops an idle server at once and cleanly: no shutdown
// delay (SIGTERM keeps it, for load balancers: TestShutdownFails...), and
// exit code 0.
func TestInterruptStopsAnIdleServerAtOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	t.Parallel()
	p := startProc(t, storetest.NewDatabase(t), "--shutdown-delay", "10m")
	p.signal(os.Interrupt)
	if code := p.exitCode(exitBound); code != 0 {
		t.Errorf("exit code %d after SIGINT, want 0", code)
	}
	if logs := p.logs.String(); !strings.Contains(logs, `"msg":"shutting down","shutdown_delay":"0s"`) || !strings.Contains(logs, `"msg":"stopped"`) {
		t.Errorf("the logs do not show a stop without delay:\n%s", logs)
	}
}

// make run, as a newcomer runs it: it builds and serves with the VCS
// revision stamped, and Ctrl-C in the terminal (SIGINT to the whole
// foreground process group: make and the server) ends it at once with
// make reporting no error.
func TestMakeRunStopsAtOnceOnCtrlC(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts processes")
	}
	t.Parallel()
	makePath, err := exec.LookPath("make")
	if err != nil {
		t.Skip("no make on this machine")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dbURL, exists := storetest.MissingDatabase(t)
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	cmd := exec.Command(makePath, "--no-print-directory", "run", "DATABASE_URL="+dbURL, "ADDR="+addr,
		"BIN="+filepath.Join(t.TempDir(), "aapd"))
	cmd.Dir = root
	// The test may itself run under make (make test): its make's variables
	// are not this one's. The server keeps a long delay on SIGTERM.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "MAKE") && !strings.HasPrefix(kv, "MFLAGS=") && !strings.HasPrefix(kv, "AAPD_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "AAPD_SHUTDOWN_DELAY=10m")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.WaitDelay = outputGrace
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		if t.Failed() {
			t.Logf("make run's output:\n%s", out.String())
		}
	})
	base := "http://" + addr
	waitFor(t, "make run to build and serve", buildTimeout, func() bool {
		select {
		case <-done:
			t.Fatalf("make run exited at start:\n%s", out.String())
		default:
		}
		res, err := http.Get(base + "/healthz")
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == http.StatusOK
	})
	if !exists() || !strings.Contains(out.String(), "export AAPD_KEY=aapd_") {
		t.Errorf("make run did not create the database and print a dev key:\n%s", out.String())
	}

	// The build is stamped with the checkout's revision, as make build's.
	if head, err := exec.Command("git", "-C", root, "rev-parse", "HEAD").Output(); err != nil {
		t.Logf("no git revision to compare with (%v)", err)
	} else {
		res, err := http.Get(base + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		want := regexp.MustCompile(`aapd_build_info\{[^}]*revision="` + strings.TrimSpace(string(head)) + `(-modified)?"[^}]*\} 1`)
		if !want.Match(body) {
			t.Errorf("aapd_build_info does not carry revision %s:\n%s", strings.TrimSpace(string(head)),
				regexp.MustCompile(`(?m)^aapd_build_info.*$`).Find(body))
		}
	}

	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(exitBound):
		t.Fatalf("make run did not exit within %s of Ctrl-C", exitBound)
	}
	// GNU make ends by the SIGINT it got itself, silently, as on any
	// Ctrl-C (the shell shows the prompt again); an exit code would mean
	// it saw its recipe fail.
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !(ws.Exited() && ws.ExitStatus() == 0 || ws.Signaled() && ws.Signal() == syscall.SIGINT) {
		t.Errorf("make run ended %v after Ctrl-C, want exit 0 or the interrupt", cmd.ProcessState)
	}
	if logs := out.String(); strings.Contains(logs, "make: ***") || !strings.Contains(logs, `"msg":"stopped"`) {
		t.Errorf("make run did not end cleanly:\n%s", logs)
	}
}
