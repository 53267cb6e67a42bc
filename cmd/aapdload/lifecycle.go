package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aapd/aapd/aapclient"
)

// The lifecycle modes of aapdload (docs/benchmarks.md): -import builds a
// session of many messages as an export document, streamed into POST
// /sessions/import as it is generated; -export reads a session's document
// to its end; -fork forks a session again and again. Each reports its time
// and, with -server-pid, how much the server process grew meanwhile.

// importSession streams a generated document of n messages of about size
// bytes each (with a compaction, as a long conversation has) into the
// server, and reports the rate.
func importSession(ctx context.Context, c *aapclient.Client, n, size int, pid int) error {
	before := memory(pid)
	pr, pw := io.Pipe()
	sent := &countingReader{r: pr}
	go func() { pw.CloseWithError(writeDocument(pw, n, size)) }()
	start := time.Now()
	sess, err := c.Import(ctx, sent, "")
	elapsed := time.Since(start)
	pr.Close()
	if err != nil {
		return fmt.Errorf("import: %w", err)
	}
	fmt.Printf("import: session %s, %d messages, %.1f MiB in %s: %.1f MiB/s%s\n", sess.SessionID, n,
		mib(sent.n), elapsed.Round(time.Millisecond), mib(sent.n)/elapsed.Seconds(), growth(pid, before))
	return nil
}

// exportSession reads a session's document to its end and reports the rate.
func exportSession(ctx context.Context, c *aapclient.Client, sessionID string, pid int) error {
	before := memory(pid)
	start := time.Now()
	n, err := c.Export(ctx, sessionID, io.Discard)
	elapsed := time.Since(start)
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	fmt.Printf("export: session %s, %.1f MiB in %s: %.1f MiB/s%s\n", sessionID, mib(n),
		elapsed.Round(time.Millisecond), mib(n)/elapsed.Seconds(), growth(pid, before))
	return nil
}

// forkSession forks a session count times, one after the other, deleting
// each fork once made (not timed), and reports the latency percentiles.
func forkSession(ctx context.Context, c *aapclient.Client, sessionID string, count int) error {
	var took []time.Duration
	begin := time.Now()
	for range count {
		start := time.Now()
		fork, err := c.Fork(ctx, sessionID, aapclient.ForkRequest{})
		took = append(took, time.Since(start))
		if err != nil {
			return fmt.Errorf("fork: %w", err)
		}
		if err := c.DeleteSession(ctx, fork.SessionID); err != nil {
			return fmt.Errorf("delete the fork: %w", err)
		}
	}
	slices.Sort(took)
	fmt.Printf("fork: %d forks of %s in %s: p50 %s, p90 %s, max %s\n", count, sessionID, time.Since(begin).Round(time.Millisecond),
		pct(took, 50).Round(time.Millisecond), pct(took, 90).Round(time.Millisecond), took[len(took)-1].Round(time.Millisecond))
	return nil
}

// writeDocument writes a session document of n messages of about size
// bytes, alternately a user's and the echo agent's, a turn for each pair,
// and a compaction of all but the last 50, whose compacted history is a
// summary and the last 50 messages.
func writeDocument(out io.Writer, n, size int) error {
	bw := bufio.NewWriterSize(out, 256<<10)
	h := sha256.New()
	w := &hashedLines{w: bw, h: h}
	now := time.Now().UTC().Truncate(time.Second).Add(-time.Duration(n) * time.Second)
	w.object(map[string]any{"type": "header", "format": "aapd-session", "version": 1, "session": map[string]any{
		"id": "sess_generated", "createdAt": now, "agent": map[string]any{"name": "echo"}, "messages": n}})
	filler := strings.Repeat("lorem ipsum dolor sit amet ", max(size/27, 1))
	turns := 0
	var line []byte
	for i := 1; i <= n; i++ {
		at := now.Add(time.Duration(i) * time.Second).Format(time.RFC3339)
		role, origin := "user", "client"
		if i%2 == 1 {
			turns++
			w.object(map[string]any{"type": "turn", "id": "turn_" + strconv.Itoa(turns), "status": "completed", "stream": "none",
				"stopReason": "end_turn", "usage": map[string]any{"inputTokens": 0, "outputTokens": 0}, "createdAt": at, "finishedAt": at})
		} else {
			role, origin = "assistant", "agent"
		}
		line = fmt.Appendf(line[:0], `{"type":"message","position":%d,"turn":"turn_%d","origin":%q,"time":%q,"message":{"role":%q,"content":"message %d: %s"}}`+"\n",
			i, turns, origin, at, role, i, filler)
		w.line(line)
	}
	kept := min(50, n)
	if n > kept {
		at := now.Add(time.Duration(n) * time.Second)
		w.object(map[string]any{"type": "compaction", "time": at, "trigger": "auto", "strategy": "summarize", "from": 1, "to": n - kept,
			"messagesBefore": n, "messagesAfter": kept + 1, "tokensBefore": n * size / 4, "tokensAfter": (kept + 1) * size / 4})
		w.object(map[string]any{"type": "replaced", "position": 1, "copies": map[string]any{"from": 1, "to": n}})
		w.object(map[string]any{"type": "compacted", "position": n - kept, "message": map[string]any{"role": "user", "content": "Summary of the earlier conversation: …"}})
	}
	if kept > 0 {
		w.object(map[string]any{"type": "compacted", "position": n - kept + 1, "copies": map[string]any{"from": n - kept + 1, "to": n}})
	}
	counts := map[string]any{"turns": turns, "messages": n, "compactions": 0, "replaced": 0, "compacted": 1}
	if n > kept {
		counts["compactions"], counts["replaced"], counts["compacted"] = 1, 1, 2
	}
	if w.err != nil {
		return w.err
	}
	trailer, _ := json.Marshal(map[string]any{"type": "trailer", "counts": counts, "sha256": hex.EncodeToString(h.Sum(nil))})
	if _, err := bw.Write(append(trailer, '\n')); err != nil {
		return err
	}
	return bw.Flush()
}

// hashedLines writes lines and hashes them, keeping the first error.
type hashedLines struct {
	w   io.Writer
	h   hash.Hash
	err error
}

func (l *hashedLines) line(b []byte) {
	if l.err == nil {
		l.h.Write(b)
		_, l.err = l.w.Write(b)
	}
}

func (l *hashedLines) object(v any) {
	b, err := json.Marshal(v)
	if err != nil && l.err == nil {
		l.err = err
	}
	l.line(append(b, '\n'))
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }

// memory returns a process's resident set size now, in bytes (0 without
// a pid or a /proc).
func memory(pid int) int64 { return procStatus(pid, "VmRSS:") }

// growth says how far the process's peak resident set size (VmHWM) went
// above before.
func growth(pid int, before int64) string {
	if pid == 0 || before == 0 {
		return ""
	}
	peak := procStatus(pid, "VmHWM:")
	return fmt.Sprintf("; server RSS %.1f MiB before, peak %.1f MiB (+%.1f MiB)", mib(before), mib(peak), mib(peak-before))
}

func procStatus(pid int, field string) int64 {
	if pid == 0 {
		return 0
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, field); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}
