package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// TestMain runs the receiver itself when the test binary is started as
// one (the test below does), so that what is tested is main as
// docs/background.md shows it, flags, environment and log included.
func TestMain(m *testing.M) {
	if os.Getenv("WEBHOOKRECEIVER_RUN_MAIN") == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

func newSecret(t *testing.T) string {
	t.Helper()
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return "whsec_" + base64.StdEncoding.EncodeToString(b)
}

// The receiver of the walkthrough answers 204 to a request signed with its
// secret, alone or beside another (a rotation), and logs the event once
// however often it comes under its webhook-id; it answers 401 to a wrong
// signature, a body changed after signing and a stale timestamp, and logs
// none of them.
func TestReceiverChecksSignaturesAndLogsEachEventOnce(t *testing.T) {
	secret, other := newSecret(t), newSecret(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()

	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, os.Args[0], "-addr", addr)
	cmd.Env = append(os.Environ(), "WEBHOOKRECEIVER_RUN_MAIN=1", "WEBHOOK_SECRET="+secret)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	t.Cleanup(func() { cancel(); cmd.Wait() })
	next := func() (string, bool) {
		select {
		case line, ok := <-lines:
			return line, ok
		case <-time.After(30 * time.Second):
			return "", false
		}
	}
	if line, ok := next(); !ok || !strings.Contains(line, "receiving webhooks on http://"+addr+"/hooks") {
		t.Fatalf("the receiver began with %q", line)
	}
	// It logs that line just before it listens.
	for deadline := time.Now().Add(30 * time.Second); ; {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the receiver does not listen: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}

	sign := func(secret, id string, at time.Time, body []byte) string {
		wh, err := standardwebhooks.NewWebhook(secret)
		if err != nil {
			t.Fatal(err)
		}
		sig, err := wh.Sign(id, at, body)
		if err != nil {
			t.Fatal(err)
		}
		return sig
	}
	post := func(id string, at time.Time, sig string, body []byte) int {
		t.Helper()
		req, err := http.NewRequest("POST", "http://"+addr+"/hooks", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("webhook-id", id)
		req.Header.Set("webhook-timestamp", strconv.FormatInt(at.Unix(), 10))
		req.Header.Set("webhook-signature", sig)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res.StatusCode
	}
	event := func(turn string) []byte {
		return []byte(fmt.Sprintf(`{"type":"turn.completed","timestamp":"2026-11-27T01:00:00Z","data":{"tenant":"dev","sessionId":"sess_1","turnId":"%s","status":"completed","stopReason":"end_turn"}}`, turn))
	}
	now := time.Now()

	refused := []struct {
		name string
		id   string
		at   time.Time
		sig  string
		body []byte
	}{
		{"another secret", "evt_bad1", now, sign(other, "evt_bad1", now, event("turn_a")), event("turn_a")},
		{"a changed body", "evt_bad2", now, sign(secret, "evt_bad2", now, event("turn_a")), event("turn_b")},
		{"another id", "evt_bad3", now, sign(secret, "evt_bad4", now, event("turn_a")), event("turn_a")},
		{"a stale timestamp", "evt_bad5", now.Add(-time.Hour), sign(secret, "evt_bad5", now.Add(-time.Hour), event("turn_a")), event("turn_a")},
	}
	for _, r := range refused {
		if code := post(r.id, r.at, r.sig, r.body); code != http.StatusUnauthorized {
			t.Errorf("%s: %d, want 401", r.name, code)
		}
	}

	body := event("turn_1")
	sig := sign(secret, "evt_1", now, body)
	for range 2 { // the same event twice: handled once
		if code := post("evt_1", now, sig, body); code != http.StatusNoContent {
			t.Fatalf("a signed event: %d, want 204", code)
		}
	}
	// During a rotation two signatures come, one per secret.
	body2 := event("turn_2")
	if code := post("evt_2", now, sign(other, "evt_2", now, body2)+" "+sign(secret, "evt_2", now, body2), body2); code != http.StatusNoContent {
		t.Fatalf("an event signed by two secrets, one the receiver's: %d, want 204", code)
	}

	want := []string{
		"evt_1 turn.completed (tenant dev): session sess_1, turn turn_1: completed, end_turn",
		"evt_2 turn.completed (tenant dev): session sess_1, turn turn_2: completed, end_turn",
	}
	for _, w := range want {
		line, ok := next()
		if !ok || !strings.HasSuffix(line, w) {
			t.Fatalf("the receiver logged %q, want %q", line, w)
		}
	}
	cancel()
	for line := range lines {
		if strings.Contains(line, "evt_") {
			t.Errorf("logged more: %q", line)
		}
	}
}
