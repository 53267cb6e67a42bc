package transfer_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/store"
	"github.com/aapd/aapd/store/storetest"
	"github.com/aapd/aapd/transfer"
	"github.com/aapd/aapd/transfer/transfertest"
)

// export writes a session's document.
func export(t *testing.T, st *store.Store, tenantID, sessionID string, opts transfer.WriteOptions) []byte {
	t.Helper()
	var buf bytes.Buffer
	if _, err := transfer.WriteSession(context.Background(), &buf, st, store.SessionExportParams{TenantID: tenantID, SessionID: sessionID}, opts); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// A session exported, imported and exported again gives the same document
// but for its ids and checksum: every message with its position, turn,
// origin and time, the turns' records, the compactions with what each
// replaced, the compacted history, the pending calls, the configuration
// (secret values carried sealed, an operator's export), and the origin of a
// fork. The imported session has the same histories.
func TestExportImportExportGivesTheSameDocument(t *testing.T) {
	st := storetest.Open(t)
	from, to := storetest.NewTenant(t, st), storetest.NewTenant(t, st)
	ctx := context.Background()
	c, _ := storetest.LongConversation(t, st, from.ID)
	call := storetest.ToolCall("call_last")
	c.Turn([]aap.Message{aap.UserMessage("look it up")}, []aap.Message{aap.AssistantMessage(aap.ToolUseBlock(call))},
		[]aap.PendingToolCall{{ToolCall: call}})
	fork, err := st.SessionFork(ctx, store.SessionForkParams{TenantID: from.ID, SessionID: c.ID, Point: store.ForkPoint{Messages: 24, AtMessages: true}})
	if err != nil {
		t.Fatal(err)
	}
	storetest.Continue(t, st, from.ID, fork.ID, 24).Say("in the fork", "forked answer")
	// A schedule goes with its session (a fork copies none).
	next, end := time.Now().Add(time.Hour).UTC().Truncate(time.Millisecond), time.Now().Add(48*time.Hour).UTC().Truncate(time.Millisecond)
	if _, err := st.ScheduleCreate(ctx, store.ScheduleCreateParams{Schedule: store.Schedule{TenantID: from.ID, SessionID: c.ID, ID: store.NewScheduleID(),
		Cron: "0 9 * * 1-5", Timezone: "Europe/Berlin", EndAt: &end, NextRunAt: &next,
		Request: aap.TurnRequest{Messages: []aap.Message{aap.UserMessage("the morning report")}, Stream: aap.StreamDelta}}}); err != nil {
		t.Fatal(err)
	}

	for _, id := range []string{c.ID, fork.ID} {
		opts := transfer.WriteOptions{Sealed: true}
		first := export(t, st, from.ID, id, opts)
		imported, err := transfer.ReadSession(ctx, bytes.NewReader(first), st, transfer.ReadOptions{TenantID: to.ID, Owner: "alice", Sealed: true})
		if err != nil {
			t.Fatalf("import: %v", err)
		}
		second := export(t, st, to.ID, imported.ID, opts)
		a, b := transfertest.Normalized(t, first), transfertest.Normalized(t, second)
		schedules := 0
		for _, line := range a {
			if line["type"] == "schedule" {
				schedules++
			}
		}
		if want := map[string]int{c.ID: 1, fork.ID: 0}[id]; schedules != want || a[0]["version"] != float64(1+min(want, 1)) {
			t.Errorf("the document of %s has %d schedules, version %v; want %d", id, schedules, a[0]["version"], want)
		}
		a[0]["session"].(map[string]any)["owner"] = "alice" // the importer's
		if d := transfertest.Diff(a, b); d != "" {
			t.Errorf("the round trip changed the document:\n%s", d)
		}
		for _, typ := range []aap.HistoryType{aap.HistoryFull, aap.HistoryCompacted} {
			x, _ := st.History(ctx, store.HistoryParams{TenantID: from.ID, SessionID: id, Type: typ})
			y, _ := st.History(ctx, store.HistoryParams{TenantID: to.ID, SessionID: imported.ID, Type: typ})
			if !reflect.DeepEqual(storetest.CompactedTexts(x), storetest.CompactedTexts(y)) {
				t.Errorf("%s history differs after the import:\n%q\n%q", typ, storetest.CompactedTexts(x), storetest.CompactedTexts(y))
			}
		}
		got, err := st.SessionGet(ctx, to.ID, imported.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.SecretOptions["apiKey"] != "sk-secret" || got.Owner != "alice" {
			t.Errorf("imported session: secrets %v, owner %q", got.SecretOptions, got.Owner)
		}
		// The imported session runs turns of its own.
		storetest.Continue(t, st, to.ID, imported.ID, int64(len(storetest.FullTexts(t, st, to.ID, imported.ID)))).
			Turn([]aap.Message{aap.ToolMessage("call_last", "x")}, []aap.Message{aap.AssistantMessage(aap.TextBlock("done"))}, nil)
	}
}

// Without the operator's sealed values, an export names the secret options
// set, and says nothing of their values; the session it is imported into
// has none.
func TestExportNamesSecretsAndNeverShowsThem(t *testing.T) {
	st := storetest.Open(t)
	tn := storetest.NewTenant(t, st)
	c := storetest.NewConversation(t, st, tn.ID, store.SessionCreateParams{SecretOptions: map[string]string{"apiKey": "sk-very-secret", "empty": ""}},
		aap.UserMessage("hi"))
	doc := export(t, st, tn.ID, c.ID, transfer.WriteOptions{DeclaredSecrets: func(string) []string { return []string{"apiKey", "other"} }})
	if bytes.Contains(doc, []byte("sk-very-secret")) || bytes.Contains(doc, []byte("sealedSecrets")) {
		t.Fatalf("the document shows a secret:\n%s", doc)
	}
	var h transfer.Header
	if err := json.Unmarshal(doc[:bytes.IndexByte(doc, '\n')], &h); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"apiKey": "set", "empty": "unset", "other": "unset"}
	if !reflect.DeepEqual(h.Session.Agent.Secrets, want) {
		t.Errorf("secrets %v, want %v", h.Session.Agent.Secrets, want)
	}
	imported, err := transfer.ReadSession(context.Background(), bytes.NewReader(doc), st, transfer.ReadOptions{TenantID: tn.ID})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := st.SessionGet(context.Background(), tn.ID, imported.ID)
	if len(got.SecretOptions) != 0 {
		t.Errorf("imported secrets %v", got.SecretOptions)
	}
	// A tenant's import never takes sealed values: another tenant's could
	// be borrowed so.
	sealed := export(t, st, tn.ID, c.ID, transfer.WriteOptions{Sealed: true})
	var lerr *transfer.LineError
	if _, err := transfer.ReadSession(context.Background(), bytes.NewReader(sealed), st, transfer.ReadOptions{TenantID: tn.ID}); !errors.As(err, &lerr) || lerr.Line != 1 {
		t.Errorf("a tenant's import of sealed secrets: %v", err)
	}
}

// An export while a turn runs holds the session as it stood before the
// turn: nothing of the turn, and the turn named as left out.
func TestExportLeavesARunningTurnOut(t *testing.T) {
	st := storetest.Open(t)
	tn := storetest.NewTenant(t, st)
	ctx := context.Background()
	in := storetest.StartInstance(t, st)
	c := storetest.NewConversation(t, st, tn.ID, store.SessionCreateParams{}, aap.UserMessage("one"))
	c.Say("two", "three")
	begun := c.StartTurn(in.ID(), "four")
	doc := export(t, st, tn.ID, c.ID, transfer.WriteOptions{})
	if bytes.Contains(doc, []byte(`"four"`)) || bytes.Count(doc, []byte(`"type":"turn"`)) != 1 {
		t.Errorf("the export holds the running turn:\n%s", doc)
	}
	if !bytes.Contains(doc, []byte(`"leftOutTurn":"`+begun.Turn.ID+`"`)) || !bytes.Contains(doc, []byte(`"messages":3`)) {
		t.Errorf("the export does not name the turn it left out:\n%s", doc)
	}
	if _, err := transfer.ReadSession(ctx, bytes.NewReader(doc), st, transfer.ReadOptions{TenantID: tn.ID}); err != nil {
		t.Errorf("import of the export: %v", err)
	}
}

// sessionsOf counts a tenant's sessions.
func sessionsOf(t *testing.T, st *store.Store, tenantID string) int {
	t.Helper()
	page, err := st.SessionList(context.Background(), store.SessionListParams{TenantID: tenantID, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	return len(page.Sessions)
}

// A document that breaks a rule is refused whole, with the line and the
// rule it breaks, and nothing is written: a truncated or edited file, an
// unknown version, lines out of order, a broken reference, a wrong trailer.
func TestImportRefusesABrokenDocumentWithItsLineAndRule(t *testing.T) {
	st := storetest.Open(t)
	src, dst := storetest.NewTenant(t, st), storetest.NewTenant(t, st)
	c := storetest.NewConversation(t, st, src.ID, store.SessionCreateParams{}, aap.UserMessage("seed"))
	c.Say("q1", "a1")
	c.Say("q2", "a2")
	c.Compact(c.LastSeq - 1)
	doc := string(export(t, st, src.ID, c.ID, transfer.WriteOptions{}))
	// header; turn; message 1 (seed) comes first: 1 header, 2 seed,
	// 3 turn, 4 q1, 5 a1, 6 turn, 7 q2, 8 a2, 9 compaction, 10.. replaced,
	// then compacted, then the trailer.
	lines := strings.Split(strings.TrimSuffix(doc, "\n"), "\n")
	if !strings.Contains(lines[1], `"position":1`) || !strings.Contains(lines[2], `"type":"turn"`) || !strings.Contains(lines[8], `"type":"compaction"`) {
		t.Fatalf("unexpected document:\n%s", doc)
	}
	last := len(lines)
	join := func(ls []string) string { return strings.Join(ls, "\n") + "\n" }
	with := func(i int, line string) string {
		ls := append([]string{}, lines...)
		ls[i-1] = line
		return join(ls)
	}
	swap := func(i, j int) string {
		ls := append([]string{}, lines...)
		ls[i-1], ls[j-1] = ls[j-1], ls[i-1]
		return join(ls)
	}
	firstCompacted := 0
	for i, l := range lines {
		if strings.Contains(l, `"type":"compacted"`) && firstCompacted == 0 {
			firstCompacted = i + 1
		}
	}
	for _, tc := range []struct {
		name string
		doc  string
		line int
		rule string
	}{
		{"empty", "", 1, transfer.RuleFormat},
		{"truncated: no trailer", join(lines[:last-1]), last, transfer.RuleTrailer},
		{"cut inside the last line", strings.TrimSuffix(doc, "\n"), last, transfer.RuleTrailer},
		{"edited", with(4, strings.Replace(lines[3], "q1", "Q1", 1)), last, transfer.RuleTrailer},
		{"a line after the trailer", doc + lines[1] + "\n", last + 1, transfer.RuleTrailer},
		{"unknown version", with(1, strings.Replace(lines[0], `"version":1`, `"version":99`, 1)), 1, transfer.RuleFormat},
		{"another format", with(1, strings.Replace(lines[0], `"aapd-session"`, `"other"`, 1)), 1, transfer.RuleFormat},
		{"not a header first", join(lines[1:]), 1, transfer.RuleFormat},
		{"messages out of order", swap(4, 5), 4, transfer.RuleOrder},
		{"a compaction after the compacted history", with(firstCompacted+1, lines[8]), firstCompacted + 1, transfer.RuleOrder},
		{"a message naming another turn", with(4, strings.Replace(lines[3], `"turn":"`, `"turn":"x`, 1)), 4, transfer.RuleReference},
		{"copies of messages it does not hold", with(firstCompacted, `{"type":"compacted","position":7,"copies":{"from":7,"to":9}}`), firstCompacted, transfer.RuleReference},
		{"malformed JSON", with(5, lines[4][:20]), 5, transfer.RuleJSON},
		{"an unknown member", with(5, strings.Replace(lines[4], `{"type":"message",`, `{"type":"message","mood":"x",`, 1)), 5, transfer.RuleJSON},
		{"a tool permission in the history", with(5, lines[4][:strings.Index(lines[4], `"message":`)]+
			`"message":{"role":"tool_permission","toolCallId":"c","granted":true}}`), 5, transfer.RuleValue},
		{"a turn still running", with(3, strings.Replace(lines[2], `"status":"completed"`, `"status":"running"`, 1)), 3, transfer.RuleValue},
		{"a pending call the history never made", with(1, strings.Replace(lines[0], `"messages":5`,
			`"messages":5,"pending":[{"toolCallId":"c1","name":"lookup","input":{},"awaiting":"result"}]`, 1)), 1, transfer.RuleReference},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := sessionsOf(t, st, dst.ID)
			_, err := transfer.ReadSession(context.Background(), strings.NewReader(tc.doc), st, transfer.ReadOptions{TenantID: dst.ID})
			var lerr *transfer.LineError
			if !errors.As(err, &lerr) || lerr.Line != tc.line || lerr.Rule != tc.rule {
				t.Errorf("import: %v; want a LineError at line %d breaking %q", err, tc.line, tc.rule)
			}
			if after := sessionsOf(t, st, dst.ID); after != before {
				t.Errorf("a refused import left %d sessions", after-before)
			}
		})
	}
	// The document as it was imports.
	if _, err := transfer.ReadSession(context.Background(), strings.NewReader(doc), st, transfer.ReadOptions{TenantID: dst.ID}); err != nil {
		t.Errorf("the document itself: %v", err)
	}
}

// A session whose full history retention trimmed exports with the trimmed
// prefix named (trimmedThrough, version 3) and its messages after it, and
// imports as the same: exported again, the same document, the same full
// history and the same compacted history's messages.
func TestExportImportOfATrimmedSession(t *testing.T) {
	st := storetest.Open(t)
	from, to := storetest.NewTenant(t, st), storetest.NewTenant(t, st)
	ctx := context.Background()
	c, _ := storetest.LongConversation(t, st, from.ID)
	storetest.Exec(t, storetest.URL(t), `UPDATE messages SET created_at = now() - interval '40 days'
		WHERE tenant_id = $1 AND session_id = $2`, from.ID, c.ID)
	for {
		tr, err := st.SessionTrimHistory(ctx, from.ID, c.ID, time.Now().Add(-30*24*time.Hour), 1000)
		if err != nil {
			t.Fatal(err)
		}
		if !tr.More {
			break
		}
	}
	trimmed := c.ToSeqs[len(c.ToSeqs)-1]
	first := export(t, st, from.ID, c.ID, transfer.WriteOptions{Sealed: true})
	a := transfertest.Normalized(t, first)
	if a[0]["version"] != float64(3) || a[0]["session"].(map[string]any)["trimmedThrough"] != float64(trimmed) {
		t.Fatalf("header of a trimmed session: %v; want version 3, trimmedThrough %d", a[0], trimmed)
	}
	imported, err := transfer.ReadSession(ctx, bytes.NewReader(first), st, transfer.ReadOptions{TenantID: to.ID, Sealed: true})
	if err != nil {
		t.Fatalf("import: %v", err)
	}
	if d := transfertest.Diff(a, transfertest.Normalized(t, export(t, st, to.ID, imported.ID, transfer.WriteOptions{Sealed: true}))); d != "" {
		t.Errorf("the round trip changed the document:\n%s", d)
	}
	if x, y := storetest.FullTexts(t, st, from.ID, c.ID), storetest.FullTexts(t, st, to.ID, imported.ID); !reflect.DeepEqual(x, y) || len(x) == 0 {
		t.Errorf("full history after the import %q, want %q", y, x)
	}
	texts := func(tenantID, id string) []string {
		h, err := st.History(ctx, store.HistoryParams{TenantID: tenantID, SessionID: id, Type: aap.HistoryCompacted})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, m := range h {
			out = append(out, m.Message.Content.PlainText())
		}
		return out
	}
	if x, y := texts(from.ID, c.ID), texts(to.ID, imported.ID); !reflect.DeepEqual(x, y) {
		t.Errorf("compacted history after the import %q, want %q", y, x)
	}
	if got, err := st.SessionGet(ctx, to.ID, imported.ID); err != nil || got.HistoryTrimmedThrough != trimmed {
		t.Errorf("imported session trimmed through %d, %v; want %d", got.HistoryTrimmedThrough, err, trimmed)
	}
}
