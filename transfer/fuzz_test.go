package transfer_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"testing"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/store"
	"github.com/aapd/aapd/store/storetest"
	"github.com/aapd/aapd/transfer"
)

// FuzzReadSession feeds session documents to the import's reader. The
// property: no panic, and a document is either read whole or refused with
// a *transfer.LineError (a 400 naming the line and the rule), never
// another error, which would be a 500. With fixSum, the trailer's checksum
// is recomputed over the mutated lines, so that the fuzzer reaches the
// rules behind the checksum (order, references, values).
func FuzzReadSession(f *testing.F) {
	st := storetest.Open(f)
	tn := storetest.NewTenant(f, st)
	c := storetest.NewConversation(f, st, tn.ID, store.SessionCreateParams{}, aap.UserMessage("seed"))
	c.Say("q1", "a1")
	call := storetest.ToolCall("call_1")
	c.Turn([]aap.Message{aap.UserMessage("look it up")}, []aap.Message{aap.AssistantMessage(aap.ToolUseBlock(call))}, nil)
	c.Turn([]aap.Message{aap.ToolMessage("call_1", "found")}, []aap.Message{aap.AssistantMessage(aap.TextBlock("done"))}, nil)
	c.Say("q2", "a2")
	c.Compact(c.LastSeq - 1)
	var doc bytes.Buffer
	if _, err := transfer.WriteSession(context.Background(), &doc, st, store.SessionExportParams{TenantID: tn.ID, SessionID: c.ID}, transfer.WriteOptions{}); err != nil {
		f.Fatal(err)
	}
	f.Add(doc.Bytes(), false)
	f.Add(doc.Bytes(), true)
	f.Add([]byte(`{"type":"header","format":"aapd-session","version":1}`+"\n"), true)
	f.Add([]byte{}, false)

	f.Fuzz(func(t *testing.T, doc []byte, fixSum bool) {
		if fixSum {
			doc = withTrailerSum(doc)
		}
		_, err := transfer.ReadSession(context.Background(), bytes.NewReader(doc), drain{}, transfer.ReadOptions{TenantID: "t", MaxLine: 1 << 16})
		var le *transfer.LineError
		if err != nil && !errors.As(err, &le) {
			t.Fatalf("refused with %T (%v), which would be a 500", err, err)
		}
	})
}

// withTrailerSum sets the last line's sha256 to the checksum of the lines
// before it, when that line is a JSON object.
func withTrailerSum(doc []byte) []byte {
	body := bytes.TrimSuffix(doc, []byte("\n"))
	i := bytes.LastIndexByte(body, '\n')
	last := body[i+1:]
	var trailer map[string]any
	if json.Unmarshal(last, &trailer) != nil || trailer == nil {
		return doc
	}
	sum := sha256.Sum256(doc[:i+1])
	trailer["sha256"] = hex.EncodeToString(sum[:])
	line, err := json.Marshal(trailer)
	if err != nil {
		return doc
	}
	return append(append(append([]byte{}, doc[:i+1]...), line...), '\n')
}

// tenantDrain is a TenantImporter that creates nothing.
type tenantDrain struct{ drain }

func (tenantDrain) CreateTenant(context.Context, transfer.Tenant) (string, error) { return "t", nil }

// FuzzReadTenant feeds tenant documents (aapd tenants import, an
// operator's file; also what an end user's export is) to their reader.
// The property: no panic, and a document is either read whole or refused
// with a *transfer.LineError naming the line and the rule, never another
// error. With fixSum, the tenant trailer's checksum is recomputed over the
// mutated lines, so that the fuzzer reaches the rules behind it.
func FuzzReadTenant(f *testing.F) {
	st := storetest.Open(f)
	tn := storetest.NewTenant(f, st)
	c := storetest.NewConversation(f, st, tn.ID, store.SessionCreateParams{Owner: "alice"}, aap.UserMessage("seed"))
	c.Say("q1", "a1")
	storetest.NewConversation(f, st, tn.ID, store.SessionCreateParams{}, aap.UserMessage("other")).Say("q", "a")
	var doc bytes.Buffer
	if _, err := transfer.WriteTenant(context.Background(), &doc, st, tn.ID, transfer.Tenant{Name: "acme"}, transfer.WriteOptions{}, nil); err != nil {
		f.Fatal(err)
	}
	f.Add(doc.Bytes(), false)
	f.Add(doc.Bytes(), true)
	f.Add([]byte(`{"type":"tenant","format":"aapd-tenant","version":1,"tenant":{"name":"acme"}}`+"\n"), true)
	f.Add([]byte(`{"type":"tenant","format":"aapd-tenant","version":1,"tenant":{"name":"acme"}}`+"\n"+`{"type":"tenant-trailer","sessions":0}`+"\n"), true)
	f.Add([]byte{}, false)

	f.Fuzz(func(t *testing.T, doc []byte, fixSum bool) {
		if fixSum {
			doc = withTrailerSum(doc)
		}
		_, _, err := transfer.ReadTenant(context.Background(), bytes.NewReader(doc), tenantDrain{}, transfer.ReadOptions{MaxLine: 1 << 16})
		var le *transfer.LineError
		if err != nil && !errors.As(err, &le) {
			t.Fatalf("refused with %T (%v), which would be a 500", err, err)
		}
	})
}
