package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/httpapi"
	v1 "github.com/aapd/aapd/httpapi/v1"
	"github.com/aapd/aapd/store/storetest"
)

// AAP v1's PUT /v1/session creates a session and runs its first turn; the
// session is created in the first turn's claim, one transaction, so no
// fault leaves a session with its seed and without its turn.

// seedOnlySessions counts the sessions of the database that have no turn:
// what a creation committed without its first turn's claim would leave.
func seedOnlySessions(t *testing.T, dbURL string) int {
	t.Helper()
	var n int
	storetest.Scan(t, dbURL, `SELECT count(*) FROM sessions s
		WHERE NOT EXISTS (SELECT 1 FROM turns t WHERE t.tenant_id = s.tenant_id AND t.session_id = s.id)`, nil, &n)
	return n
}

// A process is killed while a PUT /v1/session of its waits between the
// session's seed and its turn's claim (held there by a lock on turns), and
// the transaction's connection ends before the wait does (as Postgres
// ends a dead client's once it notices): nothing of the session is left —
// written in two transactions, the seed was committed, and no cleanup of
// the dead process could delete it — and the request sent again with its
// key to another process creates the session and runs its turn, once.
func TestV1CreateKilledBetweenSeedAndClaimLeavesNoSession(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	dbURL, key := processTenant(t)
	a := startProc(t, dbURL)
	ctx := context.Background()

	lock, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close(ctx)
	tx, err := lock.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `LOCK TABLE turns IN SHARE MODE`); err != nil {
		t.Fatal(err)
	}
	body := v1Put("", "seed question", "seed answer", "first")
	ca := &client{t: t, base: a.base, key: key}
	go func() {
		b, _ := json.Marshal(body)
		req, _ := http.NewRequest("PUT", ca.base+"/v1/session", bytes.NewReader(b))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(httpapi.IdempotencyKeyHeader, "cut-1")
		if res, err := http.DefaultClient.Do(req); err == nil {
			res.Body.Close()
		}
	}()
	var pid int32
	// The creation's batch waits on the lock (where in the batch depends on
	// when its statements take their locks): killed there, before its one
	// commit, it must leave nothing.
	// Watched from a connection of its own: pg_stat_activity is read once
	// per transaction, so polled inside the lock's transaction it would show
	// forever what it showed first.
	probe, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer probe.Close(ctx)
	waitFor(t, "the creation to wait for the lock on turns", 10*time.Second, func() bool {
		err := probe.QueryRow(ctx, `SELECT pid FROM pg_stat_activity
			WHERE datname = current_database() AND pid <> pg_backend_pid() AND wait_event_type = 'Lock'`).Scan(&pid)
		return err == nil
	})
	a.kill()
	// $1::int: Citus adds pg_terminate_backend(bigint) (a global pid), so an
	// untyped parameter is ambiguous there.
	if _, err := lock.Exec(ctx, `SELECT pg_terminate_backend($1::int)`, pid); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	var sessions, messages int
	storetest.Scan(t, dbURL, `SELECT (SELECT count(*) FROM sessions), (SELECT count(*) FROM messages)`, nil, &sessions, &messages)
	if sessions != 0 || messages != 0 {
		t.Fatalf("the killed creation left %d sessions and %d messages", sessions, messages)
	}

	b := startProc(t, dbURL)
	cb := &client{t: t, base: b.base, key: key}
	var out v1.AgentResponse
	cb.do("PUT", "/v1/session", body, httpapi.IdempotencyKeyHeader, "cut-1").expect(t, http.StatusCreated).json(t, &out)
	var texts []string
	for _, m := range cb.history(out.SessionID, aap.HistoryFull) {
		texts = append(texts, m.Content.PlainText())
	}
	if want := "seed question|seed answer|first|Echo: first"; strings.Join(texts, "|") != want {
		t.Errorf("history after the retry: %q, want %q", texts, want)
	}
	if n := seedOnlySessions(t, dbURL); n != 0 {
		t.Errorf("%d sessions without a turn", n)
	}
}

// A process killed while it creates sessions over v1 leaves none with its
// seed alone; each creation sent again with its key to another process
// answers 201 with its one turn, stored once.
func TestV1CreateKilledMidStreamLeavesNoSeedOnlySession(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	dbURL, key := processTenant(t)
	a := startProc(t, dbURL)
	ca := &client{t: t, base: a.base, key: key}
	const clients = 24
	var (
		wg      sync.WaitGroup
		stop    = make(chan struct{})
		mu      sync.Mutex
		created int
		keys    []string
	)
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				k := fmt.Sprintf("kill-%d-%d", i, n)
				mu.Lock()
				keys = append(keys, k)
				mu.Unlock()
				b, _ := json.Marshal(v1Put("", "seed "+k, "answer "+k, k))
				req, _ := http.NewRequest("PUT", ca.base+"/v1/session", bytes.NewReader(b))
				req.Header.Set("Authorization", "Bearer "+key)
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set(httpapi.IdempotencyKeyHeader, k)
				res, err := http.DefaultClient.Do(req)
				if err != nil {
					return // the process is gone
				}
				res.Body.Close()
				if res.StatusCode == http.StatusCreated {
					mu.Lock()
					created++
					mu.Unlock()
				}
			}
		}()
	}
	waitFor(t, "some sessions created", 20*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return created >= 20
	})
	a.kill()
	close(stop)
	wg.Wait()

	if n := seedOnlySessions(t, dbURL); n != 0 {
		t.Errorf("the kill left %d sessions with their seed and no turn", n)
	}
	b := startProc(t, dbURL)
	cb := &client{t: t, base: b.base, key: key}
	for _, k := range keys {
		var out v1.AgentResponse
		cb.do("PUT", "/v1/session", v1Put("", "seed "+k, "answer "+k, k), httpapi.IdempotencyKeyHeader, k).
			expect(t, http.StatusCreated).json(t, &out)
		var texts []string
		for _, m := range cb.history(out.SessionID, aap.HistoryFull) {
			texts = append(texts, m.Content.PlainText())
		}
		// A turn the kill interrupted is replayed as it ended: its reply
		// may be missing, never doubled.
		got := strings.Join(texts, "|")
		if want := "seed " + k + "|answer " + k + "|" + k; got != want && got != want+"|Echo: "+k {
			t.Errorf("%s: history %q", k, got)
		}
	}
	var sessions int
	storetest.Scan(t, dbURL, `SELECT count(*) FROM sessions`, nil, &sessions)
	if sessions != len(keys) {
		t.Errorf("%d sessions for %d creations", sessions, len(keys))
	}
	t.Logf("%d creations, %d answered before the kill", len(keys), created)
}
