package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
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
	out, err := runTool(t.Context(), toolTimeout, commandSpec{dir: dir, env: env}, node, "sdk.mjs")
	t.Logf("node sdk.mjs:\n%s", out)
	if err != nil {
		t.Fatalf("the sandbox-agent SDK scenarios failed: %v", err)
	}
	passed := 0
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(line, "ok   ") {
			passed++
		}
	}
	if passed != 10 {
		t.Fatalf("%d scenarios passed, want 10", passed)
	}
	select {
	case <-a.done:
	default:
		t.Error("the replica the script was to kill is still running")
	}
}
