package httpapi

import (
	"net/http"
	"testing"
	"time"

	"github.com/aapd/aapd/auth"
	"github.com/aapd/aapd/quota"
)

func TestRateLimitHeaders(t *testing.T) {
	tests := []struct {
		name              string
		policies          []quota.Policy
		policy, rateLimit string
	}{
		{"none", nil, "", ""},
		{"burst above a second's rate",
			[]quota.Policy{{Name: "tenant", Rate: 2, Burst: 10, Remaining: 7, UntilFull: 1500 * time.Millisecond}},
			`"tenant";q=10;w=5`, `"tenant";r=7;t=2`},
		{"rate above the burst: a one second window",
			[]quota.Policy{{Name: "tenant", Rate: 100, Burst: 10, Remaining: 10}},
			`"tenant";q=100;w=1`, `"tenant";r=10;t=0`},
		{"tenant and principal",
			[]quota.Policy{{Name: "tenant", Rate: 0.5, Burst: 1}, {Name: "principal", Rate: 0.25, Burst: 1, UntilFull: 4 * time.Second}},
			`"tenant";q=1;w=2, "principal";q=1;w=4`, `"tenant";r=0;t=0, "principal";r=0;t=4`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			setRateLimitHeaders(h, tt.policies)
			if got := h.Get(RateLimitPolicyHeader); got != tt.policy {
				t.Errorf("RateLimit-Policy = %q, want %q", got, tt.policy)
			}
			if got := h.Get(RateLimitHeader); got != tt.rateLimit {
				t.Errorf("RateLimit = %q, want %q", got, tt.rateLimit)
			}
		})
	}
}

// A token's end user is its own principal; an API key is one.
func TestPrincipalKey(t *testing.T) {
	key := auth.Principal{TenantID: "t", KeyID: "k1"}
	user := auth.Principal{TenantID: "t", KeyID: "k1", Subject: "alice"}
	if principalKey(key) == principalKey(user) || principalKey(user) != principalKey(auth.Principal{Subject: "alice"}) {
		t.Errorf("principal keys: key %q, user %q", principalKey(key), principalKey(user))
	}
}
