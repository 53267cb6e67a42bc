package main

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aapd/aapd/store/storetest"
)

// keys create takes scopes and an expiry; keys list shows both; bad ones
// are usage errors.
func TestCLIKeyScopesAndExpiry(t *testing.T) {
	t.Parallel()
	s := startParallelServer(t)
	db := storetest.URL(t)
	tenant := uniqueName("scoped")
	aapd(t, "tenants", "create", "--database-url", db, tenant).ok(t)

	r := aapd(t, "keys", "create", "--database-url", db, "--tenant", tenant, "--scopes", "sessions:read", "--expires-in", "1h", "--name", "reader").ok(t)
	key := strings.TrimSpace(r.stdout)
	if !keyPattern.MatchString(key) || !strings.Contains(r.stderr, "sessions:read") || !strings.Contains(r.stderr, "expires") {
		t.Fatalf("keys create: stdout %q, stderr %q", r.stdout, r.stderr)
	}
	(&client{t: t, base: s.base, key: key}).do("GET", "/sessions", nil).expect(t, http.StatusOK)

	rows := table(aapd(t, "keys", "list", "--database-url", db, "--tenant", tenant).ok(t).stdout)
	if len(rows) != 2 || rows[1][3] != "sessions:read" {
		t.Fatalf("keys list %v", rows)
	}
	if exp, err := time.Parse(time.RFC3339, rows[1][5]); err != nil || exp.Sub(time.Now()) < 59*time.Minute || exp.Sub(time.Now()) > 61*time.Minute {
		t.Errorf("expires %q, want in an hour: %v", rows[1][5], err)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--scopes", "sessions:read,admin"}, `--scopes: unknown scope "admin"`},
		{[]string{"--scopes", ""}, "--scopes: a key needs at least one scope"},
		{[]string{"--expires-in", "-1h"}, "--expires-in"},
		{[]string{"--expires-in", "soon"}, "expires-in"},
		{[]string{"--name", "a\tb"}, "--name: must not hold control characters"},
	} {
		aapd(t, append([]string{"keys", "create", "--database-url", db, "--tenant", tenant}, tc.args...)...).failed(t, 2, tc.want)
	}
}

// tenants delete removes the tenant's sessions and keys.
func TestCLITenantsDelete(t *testing.T) {
	t.Parallel()
	s := startParallelServer(t)
	db := storetest.URL(t)
	tenant := uniqueName("gone")
	aapd(t, "tenants", "create", "--database-url", db, tenant).ok(t)
	c := &client{t: t, base: s.base, key: strings.TrimSpace(aapd(t, "keys", "create", "--database-url", db, "--tenant", tenant).ok(t).stdout)}
	sid := c.echoSession(nil)
	c.say(sid, "remember me")

	r := aapd(t, "tenants", "delete", "--database-url", db, tenant).ok(t)
	if r.stdout != "" || !strings.Contains(r.stderr, tenant) {
		t.Errorf("tenants delete: stdout %q, stderr %q", r.stdout, r.stderr)
	}
	waitFor(t, "the deleted tenant's key to stop working", 5*time.Second, func() bool {
		return c.do("GET", "/sessions", nil).StatusCode == http.StatusUnauthorized
	})
	var n int
	storetest.Scan(t, db, `SELECT count(*) FROM sessions WHERE id = $1`, []any{sid}, &n)
	if n != 0 {
		t.Error("the tenant's session is still there")
	}
	aapd(t, "tenants", "delete", "--database-url", db, tenant).failed(t, 1, "no tenant named")
	aapd(t, "tenants", "create", "--database-url", db, "bad name").failed(t, 2, `"bad name" is not a tenant name`)
}

func TestCLIIssuers(t *testing.T) {
	t.Parallel()
	db := storetest.URL(t)
	tenant := uniqueName("issuing")
	aapd(t, "tenants", "create", "--database-url", db, tenant).ok(t)
	iss := "https://" + uniqueName("login") + ".example"

	byURL := strings.TrimSpace(aapd(t, "issuers", "add", "--database-url", db, "--tenant", tenant,
		"--issuer", iss, "--audience", "app", "--jwks-url", iss+"/jwks").ok(t).stdout)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, _ := x509.MarshalPKIXPublicKey(&key.PublicKey)
	pemFile := filepath.Join(t.TempDir(), "key.pem")
	if err := os.WriteFile(pemFile, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	byKey := strings.TrimSpace(aapd(t, "issuers", "add", "--database-url", db, "--tenant", tenant,
		"--issuer", iss, "--audience", "mobile", "--public-key", pemFile).ok(t).stdout)
	if !strings.HasPrefix(byURL, "iss_") || !strings.HasPrefix(byKey, "iss_") {
		t.Fatalf("issuer ids %q, %q", byURL, byKey)
	}
	rows := table(aapd(t, "issuers", "list", "--database-url", db, "--tenant", tenant).ok(t).stdout)
	if len(rows) != 3 || strings.Join(rows[0], "|") != "ID|ISSUER|AUDIENCE|KEYS|CREATED" ||
		rows[1][0] != byURL || rows[1][3] != iss+"/jwks" || rows[2][0] != byKey || rows[2][3] != "1 PEM" {
		t.Fatalf("issuers list %v", rows)
	}

	add := []string{"issuers", "add", "--database-url", db, "--tenant", tenant, "--issuer", iss}
	aapd(t, append(add, "--audience", "app", "--jwks-url", iss+"/other")...).failed(t, 1, "already registered")
	aapd(t, append(add, "--audience", "x", "--jwks-url", "http://example.com/jwks")...).failed(t, 2, "https")
	aapd(t, append(add, "--audience", "x")...).failed(t, 2, "--jwks-url: give --jwks-url (where the issuer publishes its keys) or --public-key (PEM)")
	aapd(t, append(add, "--audience", "x", "--public-key", filepath.Join(t.TempDir(), "none.pem"))...).failed(t, 2, "none.pem")
	notPEM := filepath.Join(t.TempDir(), "not.pem")
	if err := os.WriteFile(notPEM, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	aapd(t, append(add, "--audience", "x", "--public-key", pemFile, "--public-key", notPEM)...).failed(t, 2, "--public-key "+notPEM+": ")

	aapd(t, "issuers", "remove", "--database-url", db, "--tenant", tenant, byURL).ok(t)
	aapd(t, "issuers", "remove", "--database-url", db, "--tenant", tenant, byURL).failed(t, 1, byURL)
}

func TestCLILimitsAndUsage(t *testing.T) {
	t.Parallel()
	s := startParallelServer(t)
	db := storetest.URL(t)
	tenant := uniqueName("quota")
	aapd(t, "tenants", "create", "--database-url", db, tenant).ok(t)

	c := &client{t: t, base: s.base, key: strings.TrimSpace(aapd(t, "keys", "create", "--database-url", db, "--tenant", tenant).ok(t).stdout)}
	sid := c.echoSession(nil)
	c.say(sid, "one")
	c.say(sid, "two")
	rows := table(aapd(t, "usage", "--database-url", db, "--tenant", tenant).ok(t).stdout)
	last := rows[len(rows)-1]
	if strings.Join(rows[0], "|") != "DATE|AGENT|TURNS|INPUT TOKENS|OUTPUT TOKENS" || len(rows) != 3 ||
		rows[1][0] != time.Now().UTC().Format(time.DateOnly) || rows[1][1] != "echo" || rows[1][2] != "2" || last[0] != "total" || last[2] != "2" {
		t.Errorf("usage %v", rows)
	}
	aapd(t, "usage", "--database-url", db, "--tenant", tenant, "--from", "last week").failed(t, 2, `--from: "last week" is neither`)
	aapd(t, "usage", "--database-url", db).failed(t, 2, "--tenant")

	// Limits last: they apply at once, to a rate shared with the other
	// test servers on this database (replicas, as far as limits go).
	out := aapd(t, "limits", "set", "--database-url", db, "--tenant", tenant, "--rps", "2.5", "--burst", "5").ok(t).stdout
	if want := "requests per second\t2.5\nburst\t5\nmax running turns\tdefault\nmax queued turns\tdefault\n"; out != want {
		t.Errorf("limits set printed %q, want %q", out, want)
	}
	if got := aapd(t, "limits", "show", "--database-url", db, "--tenant", tenant).ok(t).stdout; got != out {
		t.Errorf("limits show printed %q", got)
	}
	aapd(t, "limits", "set", "--database-url", db, "--tenant", tenant, "--rps", "3").failed(t, 2, "--burst: must be at least 1 when --rps is set")
	aapd(t, "limits", "set", "--database-url", db, "--tenant", tenant, "--max-running-turns", "-1").failed(t, 2, "--max-running-turns: must be a whole number from 0 to")
	aapd(t, "limits", "set", "--database-url", db, "--tenant", tenant, "--rps", "-1").failed(t, 2, "--rps: must be from 0 to")

}

// The CLI's changes are audited like the API's, with actor "cli", in the
// server's JSON lines; the key is on stdout only.
func TestCLIAuditLines(t *testing.T) {
	t.Parallel()
	db := storetest.URL(t)
	tenant := uniqueName("audited")
	if audit := auditLine(t, aapd(t, "tenants", "create", "--database-url", db, tenant).ok(t).stderr); audit["action"] != "tenant.create" ||
		audit["actor"] != "cli" || audit["tenant"] != tenant || audit["level"] != "INFO" {
		t.Errorf("tenants create audit line %v", audit)
	}
	r := aapd(t, "keys", "create", "--database-url", db, "--tenant", tenant).ok(t)
	key := strings.TrimSpace(r.stdout)
	id := strings.Split(key, "_")[1]
	if audit := auditLine(t, r.stderr); audit["action"] != "key.create" || audit["target"] != id || strings.Contains(r.stderr, strings.TrimPrefix(key, "aapd_"+id+"_")) {
		t.Errorf("keys create stderr %q", r.stderr)
	}
	if audit := auditLine(t, aapd(t, "keys", "revoke", "--database-url", db, id).ok(t).stderr); audit["action"] != "key.revoke" {
		t.Errorf("keys revoke audit line %v", audit)
	}
}

// auditLine is the one audit line among a command's stderr lines: a JSON
// object with "msg":"audit".
func auditLine(t *testing.T, stderr string) map[string]any {
	t.Helper()
	var found []map[string]any
	for _, line := range strings.Split(stderr, "\n") {
		var v map[string]any
		if json.Unmarshal([]byte(line), &v) == nil && v["msg"] == "audit" {
			found = append(found, v)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d JSON audit lines in %q, want 1", len(found), stderr)
	}
	return found[0]
}

// Where the key went is said: on a terminal it follows; otherwise (a
// variable, a pipe, a file) stderr says it went there.
func TestCLIKeysCreateSaysWhereTheKeyWent(t *testing.T) {
	t.Parallel()
	db := storetest.URL(t)
	tenant := uniqueName("piped")
	aapd(t, "tenants", "create", "--database-url", db, tenant).ok(t)
	// As export AAPD_KEY=$(aapd keys create ...) runs it: stdout a pipe.
	cmd := exec.Command(aapdBinary(t), "keys", "create", "--database-url", db, "--tenant", tenant)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("keys create: %v\n%s", err, stderr.String())
	}
	if !keyPattern.MatchString(strings.TrimSpace(string(out))) {
		t.Errorf("stdout %q, want the key", out)
	}
	if msg := stderr.String(); !strings.Contains(msg, "the key went to standard output (a pipe, a file or a variable, not this terminal)") ||
		strings.HasSuffix(strings.TrimSpace(msg), ":") {
		t.Errorf("stderr %q does not say where the key went", msg)
	}
}

func TestCLIAdminErrors(t *testing.T) {
	t.Parallel()
	db := storetest.URL(t)
	ghost := uniqueName("ghost")
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"issuers"}, 2, "issuers"},
		{[]string{"issuers", "rotate", "--database-url", db}, 2, "rotate"},
		{[]string{"issuers", "list", "--database-url", db}, 2, "--tenant"},
		{[]string{"issuers", "remove", "--database-url", db, "--tenant", "x"}, 2, "ID"},
		{[]string{"issuers", "list", "--database-url", db, "--tenant", ghost}, 1, ghost},
		{[]string{"limits"}, 2, "limits"},
		{[]string{"limits", "set", "--database-url", db}, 2, "--tenant"},
		{[]string{"limits", "show", "--database-url", db, "--tenant", ghost}, 1, ghost},
		{[]string{"tenants", "delete", "--database-url", db}, 2, "NAME"},
		{[]string{"usage", "--database-url", db, "--tenant", ghost}, 1, ghost},
		{[]string{"keys", "revoke", "--database-url", db, "--tenant", ghost, "zzzzzzzzzzzzzzzz"}, 1, ghost},
	} {
		aapd(t, tc.args...).failed(t, tc.code, tc.want)
	}
}
