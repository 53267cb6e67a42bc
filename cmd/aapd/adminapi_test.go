package main

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aapd/aapd/store/storetest"
)

func operatorToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// The operator token comes from $AAPD_ADMIN_TOKEN or a file; a token that
// is empty or short refuses the start. It changes the environment, so it
// does not run in parallel.
func TestServeAdminToken(t *testing.T) {
	clearServeEnv(t)
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	token := operatorToken()
	db := []string{"--database-url", "postgres://x/y"}

	cfg, err := parseServeFlags(db, &bytes.Buffer{})
	if err != nil || cfg.AdminToken != "" {
		t.Fatalf("without a token: %q, %v", cfg.AdminToken, err)
	}
	cfg, err = parseServeFlags(append(db, "--admin-token-file", write("good", token+"\n")), &bytes.Buffer{})
	if err != nil || cfg.AdminToken != token {
		t.Fatalf("from a file: %q, %v", cfg.AdminToken, err)
	}
	for _, tc := range []struct {
		name, content, want string
	}{
		{"empty", "", "is empty"},
		{"blank", " \n", "is empty"},
		{"short", "hunter2\n", "at least 32"},
		{"spaced", strings.Repeat("ab ", 20), "without spaces"},
	} {
		args := append(db, "--admin-token-file", write(tc.name, tc.content))
		_, err := parseServeFlags(args, &bytes.Buffer{})
		cliResult{err: err}.failed(t, 2, tc.want)
		aapd(t, append([]string{"serve"}, args...)...).failed(t, 2, tc.want)
	}
	_, err = parseServeFlags(append(db, "--admin-token-file", filepath.Join(dir, "missing")), &bytes.Buffer{})
	cliResult{err: err}.failed(t, 2, "missing")

	t.Setenv("AAPD_ADMIN_TOKEN", token)
	if cfg, err = parseServeFlags(db, &bytes.Buffer{}); err != nil || cfg.AdminToken != token {
		t.Fatalf("from the environment: %q, %v", cfg.AdminToken, err)
	}
	_, err = parseServeFlags(append(db, "--admin-token-file", write("other", operatorToken())), &bytes.Buffer{})
	cliResult{err: err}.failed(t, 2, "not both")
	t.Setenv("AAPD_ADMIN_TOKEN", "short")
	_, err = parseServeFlags(db, &bytes.Buffer{})
	cliResult{err: err}.failed(t, 2, "$AAPD_ADMIN_TOKEN")
	// The file can also be named in the environment.
	t.Setenv("AAPD_ADMIN_TOKEN", "")
	t.Setenv("AAPD_ADMIN_TOKEN_FILE", write("env-file", token))
	if cfg, err = parseServeFlags(db, &bytes.Buffer{}); err != nil || cfg.AdminToken != token {
		t.Fatalf("file from the environment: %q, %v", cfg.AdminToken, err)
	}
}

// The admin API end to end through a real `aapd serve` process started with
// AAPD_ADMIN_TOKEN: a tenant and a key made over HTTP serve the AAP API,
// the key stops at once when revoked, and neither secret reaches the logs.
// It sets the environment the process inherits, so it does not run in
// parallel.
func TestAdminAPIThroughTheProcess(t *testing.T) {
	token := operatorToken()
	t.Setenv("AAPD_ADMIN_TOKEN", token)
	p := startProc(t, storetest.URL(t))
	op := &client{t: t, base: p.base + "/admin/v1", key: token}

	checkProblem(t, (&client{t: t, base: op.base}).do("GET", "/tenants", nil), http.StatusUnauthorized, "unauthorized")
	checkProblem(t, (&client{t: t, base: op.base, key: operatorToken()}).do("GET", "/tenants", nil), http.StatusUnauthorized, "unauthorized")

	name := uniqueName("e2e")
	op.do("POST", "/tenants", map[string]string{"name": name}).expect(t, http.StatusCreated)
	var k struct {
		ID     string   `json:"id"`
		Key    string   `json:"key"`
		Scopes []string `json:"scopes"`
	}
	op.do("POST", "/tenants/"+name+"/keys", map[string]any{"label": "e2e"}).expect(t, http.StatusCreated).json(t, &k)
	if !keyPattern.MatchString(k.Key) || len(k.Scopes) != 2 {
		t.Fatalf("created key %+v", k)
	}
	app := &client{t: t, base: p.base, key: k.Key}
	sid := app.echoSession(nil)
	app.say(sid, "hello")
	op.do("DELETE", "/tenants/"+name+"/keys/"+k.ID, nil).expect(t, http.StatusNoContent)
	checkProblem(t, app.do("GET", "/sessions/"+sid, nil), http.StatusUnauthorized, "unauthorized")

	var usage struct {
		Totals struct {
			Turns int `json:"turns"`
		} `json:"totals"`
	}
	op.do("GET", "/tenants/"+name+"/usage", nil).expect(t, http.StatusOK).json(t, &usage)
	if usage.Totals.Turns != 1 {
		t.Errorf("usage %+v", usage)
	}
	op.do("DELETE", "/tenants/"+name, nil).expect(t, http.StatusNoContent)

	logs := p.logs.String()
	if !strings.Contains(logs, `"msg":"audit"`) || !strings.Contains(logs, `"action":"key.revoke"`) {
		t.Errorf("no audit lines in the logs:\n%s", logs)
	}
	if strings.Contains(logs, token) || strings.Contains(logs, k.Key) || strings.Contains(logs, strings.TrimPrefix(k.Key, "aapd_"+k.ID+"_")) {
		t.Errorf("a secret is in the logs:\n%s", logs)
	}

	// Without a token, the same binary has no admin API.
	t.Setenv("AAPD_ADMIN_TOKEN", "")
	off := startProc(t, storetest.URL(t))
	checkProblem(t, (&client{t: t, base: off.base, key: token}).do("GET", "/admin/v1/tenants", nil), http.StatusNotFound, "not-found")
}
