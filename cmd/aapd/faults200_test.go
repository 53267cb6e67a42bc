package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/aapclient"
	"github.com/aapd/aapd/store/storetest"
)

// The fault run at scale (make test-faults-200, docs/durability.md): 200
// clients, each its own session, against two replicas of one PostgreSQL,
// each turn sent with an idempotency key and sent again, to either
// replica, after a 503, a 409 or a broken connection, while every first
// attempt is abandoned by its client a few milliseconds in and PostgreSQL
// is crashed (pg_ctl stop -m immediate) and restarted every 2 s (at least
// three times) while the load runs. Then
// every turn is counted: lost (its message or its reply missing),
// duplicated (either stored twice) and wedged (recorded running, or its
// session refusing the next turn). All three must be 0.
func TestTwoHundredClientsOnTwoReplicasUnderFaults(t *testing.T) {
	if os.Getenv("AAPD_FAULTS") != "full" {
		t.Skip("the 200-client fault run takes minutes: make test-faults-200")
	}
	const clients, turns = 200, 20
	pg, dbURL, key := crashablePostgres(t)
	a, b := startProc(t, dbURL), startProc(t, dbURL)
	c := &client{t: t, base: a.base, key: key}
	load := turnLoad{bases: []string{a.base, b.base}, key: key, turns: turns, dropFirst: true}
	for range clients {
		load.sessions = append(load.sessions, c.echoSession(nil))
	}
	start := time.Now()
	loadDone, done := make(chan struct{}), make(chan int)
	go func() { // a crash every 2 s while the load runs
		crashes := 0
		for {
			select {
			case <-loadDone:
				done <- crashes
				return
			case <-time.After(2 * time.Second):
			}
			pg.run("pg_ctl", "-D", pg.data(), "stop", "-m", "immediate")
			time.Sleep(300 * time.Millisecond)
			pg.start()
			crashes++
		}
	}()
	load.run(t, 10*time.Minute)
	elapsed := time.Since(start)
	close(loadDone)
	crashes := <-done
	if crashes < 3 {
		t.Errorf("only %d PostgreSQL crashes while the load ran (want 3 or more)", crashes)
	}

	api := c.api()
	waitFor(t, "the server to read again", 30*time.Second, func() bool {
		_, err := api.ListSessions(context.Background(), aapclient.ListOptions{Limit: 1})
		return err == nil
	})
	var lost, duplicated, wedged int
	for s, sid := range load.sessions {
		count := map[string]int{}
		for _, m := range c.history(sid, aap.HistoryFull) {
			count[string(m.Role)+":"+m.Content.PlainText()]++
		}
		for i := range turns {
			for _, m := range []string{"user:" + load.text(s, i), "assistant:Echo: " + load.text(s, i)} {
				switch n := count[m]; {
				case n == 0:
					lost++
					t.Errorf("session %d: %q lost", s, m)
				case n > 1:
					duplicated++
					t.Errorf("session %d: %q stored %d times", s, m, n)
				}
			}
		}
	}
	var running int
	storetest.Scan(t, dbURL, `SELECT count(*) FROM turns WHERE status = 'running'`, nil, &running)
	wedged += running
	// Each session takes its next turn at once, through either replica.
	apis := []*aapclient.Client{api, (&client{t: t, base: b.base, key: key}).api()}
	for s, sid := range load.sessions {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		res, err := postTurn(ctx, apis[s%2], sid, "after", fmt.Sprintf("after-%d", s))
		cancel()
		if err != nil || len(res.Messages) != 1 || !strings.HasSuffix(res.Messages[0].Content.PlainText(), "after") {
			wedged++
			t.Errorf("session %d refuses its next turn: %v", s, err)
		}
	}
	t.Logf("%d clients × %d turns on 2 replicas, %d PostgreSQL crashes, every first attempt abandoned: "+
		"%d lost, %d duplicated, %d wedged, in %s", clients, turns, crashes, lost, duplicated, wedged, elapsed.Round(time.Second))
}
