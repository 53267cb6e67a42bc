package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Real aapd processes, for the faults a process meets: SIGKILL, SIGTERM,
// replicas, a database going away.

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
	buildDir  string
)

// aapdBinary builds the aapd binary once per test run.
func aapdBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "aapd-test-bin-")
		if buildErr != nil {
			return
		}
		binPath = filepath.Join(buildDir, "aapd")
		out, err := runTool(context.Background(), buildTimeout, commandSpec{}, "go", "build", "-o", binPath, ".")
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// removeBinary removes what aapdBinary built; TestMain calls it.
func removeBinary() {
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
}

// proc is an `aapd serve` process.
type proc struct {
	t    testing.TB
	cmd  *exec.Cmd
	base string
	logs *syncBuffer
	done chan struct{}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// startProc starts aapd serve on a free port against dbURL and waits until
// it is healthy. Its logs are shown if the test fails.
func startProc(t testing.TB, dbURL string, args ...string) *proc {
	t.Helper()
	return startProcEnv(t, dbURL, nil, args...)
}

// startProcEnv is startProc with environment variables added to the
// test's own ("NAME=value").
func startProcEnv(t testing.TB, dbURL string, env []string, args ...string) *proc {
	t.Helper()
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	p := &proc{t: t, base: "http://" + addr, logs: &syncBuffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(aapdBinary(t), append([]string{"serve", "--addr", addr, "--database-url", dbURL, "--no-migrate"}, args...)...)
	if env != nil {
		p.cmd.Env = append(os.Environ(), env...)
	}
	p.cmd.Stderr = p.logs
	p.cmd.WaitDelay = outputGrace // a child left holding stderr (an MCP server) cannot stall Wait
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.signal(syscall.SIGKILL)
		<-p.done
		if t.Failed() {
			t.Logf("logs of aapd at %s:\n%s", addr, p.logs.String())
		}
	})
	waitFor(t, "aapd to be healthy", 15*time.Second, func() bool {
		select {
		case <-p.done:
			t.Fatalf("aapd exited at start:\n%s", p.logs.String())
		default:
		}
		res, err := http.Get(p.base + "/healthz")
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == http.StatusOK
	})
	return p
}

func (p *proc) signal(sig os.Signal) {
	if p.cmd.Process != nil {
		_ = p.cmd.Process.Signal(sig)
	}
}

// kill SIGKILLs the process and waits for it to be gone.
func (p *proc) kill() {
	p.signal(syscall.SIGKILL)
	<-p.done
}

// exitCode waits for the process to exit and returns its exit code.
func (p *proc) exitCode(within time.Duration) int {
	p.t.Helper()
	select {
	case <-p.done:
		return p.cmd.ProcessState.ExitCode()
	case <-time.After(within):
		p.t.Fatalf("aapd did not exit within %s", within)
		return -1
	}
}
