package mcp_test

import (
	"context"
	"encoding/base64"
	"net"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/agents"
	"github.com/aapd/aapd/agents/mcp"
	"github.com/aapd/aapd/agents/mcp/mcptest"
)

var serverBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "mcpserver-")
	if err != nil {
		panic(err)
	}
	serverBin = filepath.Join(dir, "mcpserver")
	if out, err := exec.Command("go", "build", "-o", serverBin, "./testdata/mcpserver").CombinedOutput(); err != nil {
		os.Stderr.Write(out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func connect(t *testing.T, cfg mcp.ServerConfig) *mcp.Server {
	t.Helper()
	s, err := mcp.Connect(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func tool(t *testing.T, s *mcp.Server, name string) agents.Tool {
	t.Helper()
	for _, tl := range s.Tools() {
		if tl.Spec().Name == name {
			return tl
		}
	}
	t.Fatalf("no tool %q", name)
	return nil
}

func TestStdioServerToolsBecomeServerTools(t *testing.T) {
	s := connect(t, mcp.ServerConfig{Name: "test", Command: []string{serverBin}, ToolPrefix: "t_",
		Include: []string{"add", "fail", "image", "slow", "crash"}, Timeout: 2 * time.Second})
	var names []string
	for _, tl := range s.Tools() {
		names = append(names, tl.Spec().Name)
	}
	slices.Sort(names)
	if strings.Join(names, ",") != "t_add,t_crash,t_fail,t_image,t_slow" {
		t.Fatalf("tools = %v (include filter and prefix)", names)
	}
	add := tool(t, s, "t_add").Spec()
	if add.Title != "Add" || add.Description != "Adds two numbers." || !strings.Contains(string(add.Parameters), `"a":{"type":"number"}`) {
		t.Errorf("spec = %+v", add)
	}

	cases := []struct {
		tool, input string
		want        func(aap.Content, error) bool
	}{
		{"t_add", `{"a":2,"b":3.5}`, func(c aap.Content, err error) bool { return err == nil && !c.IsBlocks() && c.Text == "5.5" }},
		{"t_fail", `{}`, func(c aap.Content, err error) bool { return err != nil && err.Error() == "it failed" }},
		{"t_image", `{}`, func(c aap.Content, err error) bool {
			return err == nil && len(c.Blocks) == 1 && c.Blocks[0].Type == aap.BlockImage &&
				c.Blocks[0].URL == "data:image/png;base64,"+base64.StdEncoding.EncodeToString(mcptest.PNG)
		}},
		{"t_slow", `{"ms":5000}`, func(c aap.Content, err error) bool {
			return err != nil && strings.Contains(err.Error(), "did not answer")
		}},
		{"t_slow", `{"ms":10}`, func(c aap.Content, err error) bool { return err == nil && c.Text == "done" }},
	}
	for _, tc := range cases {
		c, err := tool(t, s, tc.tool).Call(context.Background(), []byte(tc.input))
		if !tc.want(c, err) {
			t.Errorf("%s %s = %+v, %v", tc.tool, tc.input, c, err)
		}
	}
}

func TestCrashedServerReportsAndReconnects(t *testing.T) {
	s := connect(t, mcp.ServerConfig{Name: "crashy", Command: []string{serverBin}, Timeout: 5 * time.Second})
	if _, err := tool(t, s, "crash").Call(context.Background(), []byte(`{}`)); err == nil {
		t.Fatal("a call that killed the server succeeded")
	}
	// The next call connects again.
	c, err := tool(t, s, "add").Call(context.Background(), []byte(`{"a":1,"b":1}`))
	if err != nil || c.Text != "2" {
		t.Errorf("after the crash: %+v, %v", c, err)
	}
}

func TestCloseStopsTheProcess(t *testing.T) {
	s, err := mcp.Connect(context.Background(), mcp.ServerConfig{Name: "p", Command: []string{serverBin}})
	if err != nil {
		t.Fatal(err)
	}
	pids := processes(t, serverBin)
	if len(pids) == 0 {
		t.Fatal("no server process running")
	}
	if err := s.Close(); err != nil {
		t.Logf("close: %v", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for _, pid := range pids {
		for syscall.Kill(pid, 0) == nil && !zombie(pid) {
			if time.Now().After(deadline) {
				t.Fatalf("process %d still running after Close", pid)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

func TestStreamableHTTPServer(t *testing.T) {
	srv := httptest.NewServer(mcptest.Handler())
	defer srv.Close()
	s := connect(t, mcp.ServerConfig{Name: "http", URL: srv.URL, Headers: map[string]string{"X-Test": "sent"}})
	c, err := tool(t, s, "whoami").Call(context.Background(), []byte(`{}`))
	if err != nil || c.Text != "sent" {
		t.Errorf("whoami = %+v, %v (the configured header did not reach the server)", c, err)
	}
	c, err = tool(t, s, "add").Call(context.Background(), []byte(`{"a":40,"b":2}`))
	if err != nil || c.Text != "42" {
		t.Errorf("add = %+v, %v", c, err)
	}
}

func TestServersThatFailToStartAreReportedClearly(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String() + "/mcp"
	ln.Close()
	cases := []struct {
		name string
		cfg  mcp.ServerConfig
		want []string
	}{
		{"no such command", mcp.ServerConfig{Name: "ghost", Command: []string{"/nonexistent/mcp-server"}}, []string{`"ghost"`, "could not be started"}},
		{"exits at once", mcp.ServerConfig{Name: "broken", Command: []string{serverBin, "-fail"}}, []string{`"broken"`, "missing configuration file"}},
		{"nothing listening", mcp.ServerConfig{Name: "remote", URL: closed}, []string{`"remote"`, "could not be started"}},
		{"both command and url", mcp.ServerConfig{Name: "both", Command: []string{"x"}, URL: closed}, []string{"exactly one"}},
		{"included tool missing", mcp.ServerConfig{Name: "inc", Command: []string{serverBin}, Include: []string{"nope"}}, []string{`no tool "nope"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, err := mcp.Connect(ctx, tc.cfg)
			if err == nil {
				t.Fatal("connected")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

// processes lists the pids running the binary.
func processes(t *testing.T, bin string) []int {
	t.Helper()
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
		if err != nil || exe != bin {
			continue
		}
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

func zombie(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", itoa(pid), "stat"))
	return err != nil || strings.Contains(string(b), ") Z ")
}

func itoa(i int) string { return strconv.Itoa(i) }
