package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aapd/aapd/store/storetest"
)

// A --dev start prints a key of the "dev" tenant. The next start on the
// same database revokes it, prints another, and says that the earlier one
// no longer works: a shell that exported it gets 401s otherwise, unwarned.
func TestDevStartSaysItReplacedTheEarlierDevKey(t *testing.T) {
	t.Parallel()
	db := storetest.NewDatabase(t)
	printed := regexp.MustCompile(`export AAPD_KEY=(aapd_([a-z2-7]{16})_\S+)`)
	start := func() (base, key, publicID, out string) {
		t.Helper()
		var stderr bytes.Buffer
		m, err := Start(context.Background(), Config{Addr: "127.0.0.1:0", DatabaseURL: db, NoMigrate: true, Dev: true,
			Workers: 4, Lease: 30 * time.Second, DrainTimeout: 5 * time.Second, MaxBodyBytes: 1 << 20},
			slog.New(slog.NewTextHandler(io.Discard, nil)), &stderr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = m.Shutdown() })
		match := printed.FindStringSubmatch(stderr.String())
		if match == nil {
			t.Fatalf("no key printed:\n%s", stderr.String())
		}
		return "http://" + m.Addr(), match[1], match[2], stderr.String()
	}

	base, first, firstID, out := start()
	if strings.Contains(out, "no longer works") {
		t.Errorf("the first dev start speaks of an earlier key:\n%s", out)
	}
	(&client{t: t, base: base, key: first}).do("GET", "/sessions", nil).expect(t, http.StatusOK)

	base, second, _, out := start()
	if want := "The key of the previous dev start (aapd_" + firstID + "_…) no longer works"; !strings.Contains(out, want) {
		t.Errorf("the second dev start does not say %q:\n%s", want, out)
	}
	(&client{t: t, base: base, key: second}).do("GET", "/sessions", nil).expect(t, http.StatusOK)
	(&client{t: t, base: base, key: first}).do("GET", "/sessions", nil).expect(t, http.StatusUnauthorized)
}
