package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/agents"
	"github.com/aapd/aapd/store"
	"github.com/aapd/aapd/store/storetest"
)

// Benchmarks of the cost of a long conversation; results and the commands
// that produce them are in docs/benchmarks.md.

// benchSizes are the full-history lengths measured.
var benchSizes = []int{10, 1_000, 10_000, 100_000}

// seedSession stores a session of the echo agent whose full history holds n
// messages of about 300 tokens each, then compacts it as the server would,
// so its compacted history is what any long conversation's is: bounded by
// the agent's policy (about ten such messages under the echo agent's).
func seedSession(b *testing.B, s *testServer, tenantID string, n int) string {
	b.Helper()
	ctx := context.Background()
	sid := seedMessages(b, s.Store, tenantID, n)
	if _, err := s.Runner.Compact(ctx, agents.CompactParams{TenantID: tenantID, SessionID: sid}); err != nil {
		b.Fatal(err)
	}
	// The steady state of a long conversation: autovacuum has cleared what
	// the first compaction deleted.
	storetest.Exec(b, storetest.URL(b), "VACUUM ANALYZE compacted_messages, messages, sessions")
	return sid
}

// seedMessages stores an echo session whose history holds n messages of
// about 300 tokens each.
func seedMessages(b *testing.B, st *store.Store, tenantID string, n int) string {
	b.Helper()
	filler := strings.Repeat("lorem ipsum dolor sit amet ", 44) // ~1,200 bytes
	msgs := make([]aap.Message, n)
	for i := range msgs {
		text := fmt.Sprintf("message %d: %s", i, filler)
		if i%2 == 0 {
			msgs[i] = aap.UserMessage(text)
		} else {
			msgs[i] = aap.Message{Role: aap.RoleAssistant, Content: aap.TextContent(text)}
		}
	}
	sess, _, err := st.SessionCreate(context.Background(), store.SessionCreateParams{TenantID: tenantID, AgentName: "echo", Messages: msgs})
	if err != nil {
		b.Fatal(err)
	}
	return sess.ID
}

// BenchmarkTurn measures one stream "none" turn over HTTP (request,
// claim, model, commit, response) on sessions of growing full history.
// The target: a turn at 100,000 messages within 1.2x of a turn at 10.
func BenchmarkTurn(b *testing.B) {
	s := startServer(b)
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("full=%d", n), func(b *testing.B) {
			c := s.newTenant(b)
			sid := seedSession(b, s, tenantIDOf(b, s, c), n)
			compacted := len(c.history(sid, aap.HistoryCompacted))
			for range 5 { // warm up
				c.say(sid, "warm up")
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				c.say(sid, "hello")
			}
			b.ReportMetric(float64(compacted), "compacted-msgs")
		})
	}
}

// BenchmarkHistoryFull measures GET /sessions/:id/history?type=full, read
// to the end, from an aapd process of its own, and that process's peak
// resident memory (VmHWM) after serving it: the history streams from the
// database, so the peak stays far below the size of the response. Sizes run
// smallest first, so each size's peak covers the ones before.
func BenchmarkHistoryFull(b *testing.B) {
	dbURL := storetest.NewDatabase(b)
	st := storetest.OpenURL(b, dbURL)
	tn := storetest.NewTenant(b, st)
	p := startProc(b, dbURL)
	pid := p.cmd.Process.Pid
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("full=%d", n), func(b *testing.B) {
			sid := seedMessages(b, st, tn.ID, n)
			get := func() int64 {
				req, _ := http.NewRequest("GET", p.base+"/sessions/"+sid+"/history?type=full", nil)
				req.Header.Set("Authorization", "Bearer "+tn.Key)
				res, err := http.DefaultClient.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				defer res.Body.Close()
				if res.StatusCode != http.StatusOK {
					b.Fatalf("status %d", res.StatusCode)
				}
				size, _ := io.Copy(io.Discard, res.Body)
				return size
			}
			var size int64
			b.ResetTimer()
			for b.Loop() {
				size = get()
			}
			b.StopTimer()
			b.ReportMetric(float64(size)/(1<<20), "response-MiB")
			b.ReportMetric(float64(peakRSS(b, pid))/(1<<20), "server-peak-rss-MiB")
		})
	}
}

// peakRSS reads a process's peak resident set size (VmHWM) in bytes.
func peakRSS(b testing.TB, pid int) int64 {
	b.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Skip("no /proc to read a process's memory from")
	}
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	b.Fatal("no VmHWM in /proc status")
	return 0
}

// tenantIDOf finds the tenant of a client's key.
func tenantIDOf(b testing.TB, s *testServer, c *client) string {
	b.Helper()
	k, err := s.Store.APIKeyGetByPublicID(context.Background(), strings.Split(c.key, "_")[1])
	if err != nil {
		b.Fatal(err)
	}
	return k.TenantID
}
