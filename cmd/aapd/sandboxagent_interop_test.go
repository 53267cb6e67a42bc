package main

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/aapd/aapd/httpapi/sandboxagent"
)

// sandboxAgentInteropDir holds the scenarios that drive the sandbox-agent
// door with the project's official clients (its SDK, its inspector).
const sandboxAgentInteropDir = "../../interop/sandbox-agent"

// sandboxAgentKit is the directory of the official sandbox-agent 0.1.7
// SDK, built, with its inspector (the project's shared material, README
// there): $SANDBOX_AGENT_SDK, or shared/interop/sandbox-agent-0.1.7 in a
// directory above the repository. Without it the interop tests skip.
func sandboxAgentKit(t *testing.T) string {
	t.Helper()
	if dir := os.Getenv("SANDBOX_AGENT_SDK"); dir != "" {
		return dir
	}
	dir, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	for ; dir != filepath.Dir(dir); dir = filepath.Dir(dir) {
		kit := filepath.Join(dir, "shared", "interop", "sandbox-agent-0.1.7")
		if _, err := os.Stat(filepath.Join(kit, "dist", "index.js")); err == nil {
			return kit
		}
	}
	t.Skip("the sandbox-agent 0.1.7 SDK was not found: set SANDBOX_AGENT_SDK to its directory (with dist/ and inspector/) to run the sandbox-agent interop tests")
	return ""
}

// TestSandboxAgentOfficialSDK runs interop/sandbox-agent/sdk.mjs — the
// official SDK's SandboxAgent through every method, in ten scenarios —
// against a real server, with a second tenant, two end users, and two
// real aapd processes on a database of their own, the first of which the
// script SIGKILLs mid-turn while it follows the events on the second.
func TestSandboxAgentOfficialSDK(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed: install Node.js 20 or later to run the sandbox-agent SDK interop test")
	}
	kit := sandboxAgentKit(t)
	dir, err := filepath.Abs(sandboxAgentInteropDir)
	if err != nil {
		t.Fatal(err)
	}
	s := startParallelServer(t)
	tn := newOwnedTenant(t, s)
	other := s.newTenant(t)
	dbURL, replicaKey := processTenant(t)
	a, b := startProc(t, dbURL), startProc(t, dbURL)
	env := append(os.Environ(), "SANDBOX_AGENT_SDK="+kit, "AAPD_URL="+s.base, "AAPD_KEY="+tn.key.key,
		"AAPD_KEY2="+other.key, "AAPD_USER1="+tn.user1.key, "AAPD_USER2="+tn.user2.key,
		"REPLICA_A_URL="+a.base, "REPLICA_B_URL="+b.base, "REPLICA_A_PID="+strconv.Itoa(a.cmd.Process.Pid), "REPLICA_KEY="+replicaKey)
	runScenarios(t, node, dir, "sdk.mjs", env, 10)
	select {
	case <-a.done:
	default:
		t.Error("the replica the script was to kill is still running")
	}
}

// chromium is the browser the inspector test drives: $CHROMIUM, or
// Debian's chromium on the PATH.
func chromium() (string, error) {
	if p := os.Getenv("CHROMIUM"); p != "" {
		return p, nil
	}
	return exec.LookPath("chromium")
}

// TestSandboxAgentInspector runs interop/sandbox-agent/inspector.mjs: the
// official sandbox-agent inspector, served under /ui/ from another origin
// (a static file server), in headless Chromium driven by playwright-core
// (pinned by package-lock.json; installed with npm ci when missing). It
// opens the inspector with ?url=…&token=…, creates a session with the echo
// agent, sends a message and sees the answer and the events, answers a
// permission and a question. Without Chromium (Debian's chromium, or
// $CHROMIUM) it skips, and says so — except under .ci/run, which installs
// it and sets AAPD_REQUIRE_INSPECTOR.
func TestSandboxAgentInspector(t *testing.T) {
	// .ci/run requires the test to run: there, what it lacks is a failure.
	skip := t.Skip
	if os.Getenv("AAPD_REQUIRE_INSPECTOR") != "" {
		skip = t.Fatal
	}
	browser, err := chromium()
	if err != nil {
		skip("Chromium is not installed (apt-get install chromium, or set CHROMIUM): the sandbox-agent inspector test skips")
	}
	node, errNode := exec.LookPath("node")
	npm, errNpm := exec.LookPath("npm")
	if errNode != nil || errNpm != nil {
		skip("node and npm are not installed: install Node.js 20 or later to run the sandbox-agent inspector test")
	}
	kit := sandboxAgentKit(t)
	dir, err := filepath.Abs(sandboxAgentInteropDir)
	if err != nil {
		t.Fatal(err)
	}
	npmInstall(t, npm, dir)
	s := startParallelServer(t)
	c := s.newTenant(t)
	mux := http.NewServeMux()
	mux.Handle("/ui/", http.StripPrefix("/ui/", http.FileServer(http.Dir(filepath.Join(kit, "inspector")))))
	ui := httptest.NewServer(mux) // another origin than the server's
	defer ui.Close()
	page := ui.URL + "/ui/?url=" + url.QueryEscape(s.base+sandboxagent.Prefix) + "&token=" + url.QueryEscape(c.key)
	env := append(os.Environ(), "CHROMIUM="+browser, "INSPECTOR_URL="+page, "AAPD_URL="+s.base, "AAPD_KEY="+c.key)
	runScenarios(t, node, dir, "inspector.mjs", env, 5)
}
