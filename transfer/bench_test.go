package transfer_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/aapd/aapd/store"
	"github.com/aapd/aapd/store/storetest"
	"github.com/aapd/aapd/transfer"
)

// drain is an Importer that reads every part and writes nothing: the cost
// of reading and checking a document alone.
type drain struct{}

func (drain) SessionImport(_ context.Context, _ store.SessionImportParams, next func() (store.ImportPart, error)) (store.Session, error) {
	for {
		if _, err := next(); err != nil {
			if errors.Is(err, io.EOF) {
				return store.Session{}, nil
			}
			return store.Session{}, err
		}
	}
}

// document is a session document of n messages of about 1,200 bytes.
func document(n int) []byte {
	var b bytes.Buffer
	h := sha256.New()
	w := io.MultiWriter(&b, h)
	fmt.Fprintf(w, `{"type":"header","format":"aapd-session","version":1,"session":{"id":"sess_x","createdAt":"2026-01-01T00:00:00Z","agent":{"name":"echo"},"messages":%d}}`+"\n", n)
	filler := strings.Repeat("lorem ipsum dolor sit amet ", 44)
	turns := 0
	for i := 1; i <= n; i++ {
		role, origin := "assistant", "agent"
		if i%2 == 1 {
			turns++
			role, origin = "user", "client"
			fmt.Fprintf(w, `{"type":"turn","id":"turn_%d","status":"completed","stream":"none","usage":{"inputTokens":0,"outputTokens":0},"createdAt":"2026-01-01T00:00:00Z"}`+"\n", turns)
		}
		fmt.Fprintf(w, `{"type":"message","position":%d,"turn":"turn_%d","origin":%q,"time":"2026-01-01T00:00:00Z","message":{"role":%q,"content":"message %d: %s"}}`+"\n",
			i, turns, origin, role, i, filler)
	}
	fmt.Fprintf(&b, `{"type":"trailer","counts":{"turns":%d,"messages":%d,"compactions":0,"replaced":0,"compacted":0},"sha256":%q}`+"\n", turns, n, hex.EncodeToString(h.Sum(nil)))
	return b.Bytes()
}

// BenchmarkReadSession measures reading and checking a document, without
// the database: the reader's share of an import's time.
func BenchmarkReadSession(b *testing.B) {
	doc := document(10_000)
	b.SetBytes(int64(len(doc)))
	for b.Loop() {
		if _, err := transfer.ReadSession(context.Background(), bytes.NewReader(doc), drain{}, transfer.ReadOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkImportSession measures an import into the database: reading,
// checking and writing a document of 10,000 messages.
func BenchmarkImportSession(b *testing.B) {
	st := storetest.Open(b)
	tn := storetest.NewTenant(b, st)
	doc := document(10_000)
	b.SetBytes(int64(len(doc)))
	for b.Loop() {
		if _, err := transfer.ReadSession(context.Background(), bytes.NewReader(doc), st, transfer.ReadOptions{TenantID: tn.ID}); err != nil {
			b.Fatal(err)
		}
	}
}
