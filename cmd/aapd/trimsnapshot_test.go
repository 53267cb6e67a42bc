package main

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/store"
	"github.com/aapd/aapd/store/storetest"
)

// trimDuringHistoryRead sends a request that reads a session's full
// history while a trim through 6 commits between the door's read of the
// session's record and its read of the history: a transaction locks
// messages, waits until the request waits for that lock (it has read the
// record by then: it reads no message before the history), trims (as a
// trim leaves the tables: the prefix's end, its rows gone) and commits.
func trimDuringHistoryRead(t *testing.T, dbURL, tenantID, sessionID string, read func() response) response {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `LOCK TABLE messages IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	done := make(chan response, 1)
	go func() { done <- read() }()
	waitFor(t, "the history read to wait for the lock on messages", 20*time.Second, func() bool {
		var n int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
			WHERE l.locktype = 'relation' AND l.relation = 'messages'::regclass AND NOT l.granted
			  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
			  AND a.query LIKE '%message::text%'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n > 0
	})
	for _, q := range []string{
		`UPDATE sessions SET history_trimmed_through = 6 WHERE tenant_id = $1 AND id = $2`,
		`DELETE FROM messages WHERE tenant_id = $1 AND session_id = $2 AND seq <= 6`,
	} {
		if _, err := tx.Exec(ctx, q, tenantID, sessionID); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	return <-done
}

// Every door's read of a full history says the trim point of the rows it
// read (one snapshot), not the one of the session's record it read before:
// AAP v3's history, AAP v1's session and the OpenAI door's conversation
// items, each read while a trim commits after the door read the record,
// say trimmed through 6 beside the 2 messages after it. (Read from the
// record, the point would be absent: the session was not trimmed then.)
func TestEveryDoorsHistoryReadSaysTheTrimPointOfItsRows(t *testing.T) {
	if storetest.Citus() {
		t.Skip("the lock that holds the read between its two reads is the coordinator's; the statements read the same on Citus")
	}
	t.Parallel()
	dbURL := storetest.NewDatabase(t) // the lock holds every session's reads of messages: none of other tests'
	s := startServer(t, func(cfg *Config) { cfg.DatabaseURL = dbURL })
	tn := storetest.NewTenant(t, s.Store)
	c := &client{t: t, base: s.base, key: tn.Key}
	doors := []struct {
		name string
		// path reads the session (%s); read decodes what it says: where
		// the full history was trimmed (0: not said), and its messages.
		path string
		read func(r response) (trimmed int64, texts []string)
	}{
		{"AAP v3 history", "/sessions/%s/history?type=full", func(r response) (int64, []string) {
			var h struct {
				History        map[string][]aap.Message `json:"history"`
				TrimmedThrough int64                    `json:"trimmedThrough"`
			}
			r.json(t, &h)
			return h.TrimmedThrough, plainTexts(h.History["full"])
		}},
		{"AAP v1 session", "/v1/session/%s", func(r response) (int64, []string) {
			var v1 struct {
				History struct {
					Full []aap.Message `json:"full"`
				} `json:"history"`
				TrimmedThrough int64 `json:"trimmedThrough"`
			}
			r.json(t, &v1)
			return v1.TrimmedThrough, plainTexts(v1.History.Full)
		}},
		{"OpenAI conversation items", "/openai/v1/conversations/%s/items?order=asc", func(r response) (int64, []string) {
			var page struct {
				Data []struct {
					Content []struct {
						Text string `json:"text"`
					} `json:"content"`
				} `json:"data"`
				TrimmedThrough int64 `json:"trimmed_through"`
			}
			r.json(t, &page)
			var texts []string
			for _, it := range page.Data {
				for _, p := range it.Content {
					texts = append(texts, p.Text)
				}
			}
			return page.TrimmedThrough, texts
		}},
	}
	for _, door := range doors {
		conv := storetest.NewConversation(t, s.Store, tn.ID, store.SessionCreateParams{})
		for i := range 4 {
			conv.Say(fmt.Sprintf("q%d", i), fmt.Sprintf("a%d", i))
		}
		r := trimDuringHistoryRead(t, dbURL, tn.ID, conv.ID, func() response {
			return c.do("GET", fmt.Sprintf(door.path, conv.ID), nil)
		})
		if r.StatusCode != http.StatusOK {
			t.Errorf("%s: %d %s", door.name, r.StatusCode, r.body)
			continue
		}
		trimmed, texts := door.read(r)
		if trimmed != 6 || fmt.Sprint(texts) != "[q3 a3]" {
			t.Errorf("%s read during a trim: trimmed through %v, messages %q; want 6 and [q3 a3] (%s)", door.name, trimmed, texts, r.body)
		}
	}
}
