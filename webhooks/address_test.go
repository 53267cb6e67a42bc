package webhooks_test

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/aapd/aapd/webhooks"
)

func TestWebhookPublicAddresses(t *testing.T) {
	for addr, want := range map[string]bool{
		"93.184.216.34": true, "2606:2800:220:1:248:1893:25c8:1946": true, "8.8.8.8": true,
		"127.0.0.1": false, "::1": false, "10.1.2.3": false, "172.16.0.1": false, "192.168.1.1": false,
		"169.254.169.254": false, "fe80::1": false, "fd00::1": false, "0.0.0.0": false, "::": false,
		"100.64.0.1": false, "224.0.0.1": false, "255.255.255.255": false, "::ffff:127.0.0.1": false,
		"::ffff:10.0.0.1": false, "64:ff9b::a00:1": false, "2002:a00:1::": false, "198.18.0.1": false,
	} {
		if got := webhooks.Public(netip.MustParseAddr(addr)); got != want {
			t.Errorf("Public(%s) = %v, want %v", addr, got, want)
		}
	}
}

func TestWebhookURLs(t *testing.T) {
	cases := []struct {
		url          string
		allowPrivate bool
		refusal      string // "" for none
	}{
		{"https://hooks.example.com/aapd", false, ""},
		{"https://93.184.216.34:8443/x?y=1", false, ""},
		{"http://hooks.example.com/aapd", false, "must be https"},
		{"http://127.0.0.1:9000/hooks", true, ""},
		{"https://127.0.0.1/hooks", false, "not a public address"},
		{"https://[::1]/hooks", false, "not a public address"},
		{"https://10.0.0.8/hooks", false, "not a public address"},
		{"https://localhost:8443/hooks", false, "not a public address"},
		{"https://api.localhost/hooks", false, "not a public address"},
		{"https://localhost:8443/hooks", true, ""},
		{"ftp://hooks.example.com/", true, "must be https"},
		{"hooks.example.com/aapd", false, "absolute URL"},
		{"https:///path", false, "no host"},
		{"https://user:pw@hooks.example.com/", false, "credentials"},
		{"https://hooks.example.com/#frag", false, "fragment"},
		{"https://hooks.example.com/" + strings.Repeat("a", 2048), false, "at most"},
		{"://bad", false, "absolute URL"},
	}
	for _, c := range cases {
		err := webhooks.CheckURL(c.url, c.allowPrivate)
		switch {
		case c.refusal == "" && err != nil:
			t.Errorf("CheckURL(%q, %v) = %v, want nil", c.url, c.allowPrivate, err)
		case c.refusal != "" && (err == nil || !strings.Contains(err.Error(), c.refusal)):
			t.Errorf("CheckURL(%q, %v) = %v, want %q", c.url, c.allowPrivate, err, c.refusal)
		}
	}
}

func TestWebhookSecretsAreWhsecAndBase64Of32Bytes(t *testing.T) {
	a, err := webhooks.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := webhooks.NewSecret()
	if !strings.HasPrefix(a, "whsec_") || len(a) != len("whsec_")+44 || a == b {
		t.Errorf("secrets %q, %q", a, b)
	}
}
