package main

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// API keys are remembered by each process so that a request costs no
// round trip to authenticate; a revocation must still take effect at once
// on every replica. (Raw requests: a credential refused is the wire.)
func TestRevokedKeyIsRefusedAtOnceByEveryReplica(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	dbURL, key := processTenant(t)
	replicas := []*client{
		{t: t, base: startProc(t, dbURL).base, key: key},
		{t: t, base: startProc(t, dbURL).base, key: key},
	}
	for _, c := range replicas {
		c.do("GET", "/sessions", nil).expect(t, http.StatusOK) // now remembered
	}
	aapd(t, "keys", "revoke", "--database-url", dbURL, strings.Split(key, "_")[1]).ok(t)
	for i, c := range replicas {
		deadline := time.Now().Add(5 * time.Second)
		for c.do("GET", "/sessions", nil).StatusCode != http.StatusUnauthorized {
			if time.Now().After(deadline) {
				t.Fatalf("replica %d still accepts the revoked key", i)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}
