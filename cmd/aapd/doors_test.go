package main

import (
	"context"
	"net/http"
	"reflect"
	"strings"
	"testing"

	openaisdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/conversations"
	"github.com/openai/openai-go/v3/responses"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/aapclient"
	"github.com/aapd/aapd/httpapi/agui"
)

// One conversation, every door (docs/protocols.md): a session started over
// AAP v1 is continued over AAP v3, over AG-UI, over sandbox-agent and over
// the OpenAI door, and every door then reads the same history; the session
// event log holds the five turns, whichever door sent them, in order,
// sandbox-agent's events are that log's, translated, and the OpenAI
// conversation's items are the history's.
func TestOneConversationThroughEveryDoor(t *testing.T) {
	t.Parallel()
	s := startParallelServer(t)
	c := s.newTenant(t)

	sid := c.v1Create(v1Put("", "over v1")).SessionID
	c.say(sid, "over v3")
	run := c.runAGUI("echo", map[string]any{"threadId": sid, "messages": []any{aguiUser("ag-1", "over AG-UI")}})
	run.expect(t, http.StatusOK)
	if got := run.Header.Get(agui.SessionIDHeader); got != sid {
		t.Fatalf("AG-UI ran on session %q, want %q", got, sid)
	}
	if last := run.last(); last.Type() != "RUN_FINISHED" {
		t.Fatalf("AG-UI run ended with %s", last.Type())
	}

	if streamed := c.saStream(sid, "over sandbox-agent"); !terminal(t, streamed[len(streamed)-1]) {
		t.Fatalf("sandbox-agent's turn ended with %s", streamed[len(streamed)-1].Type)
	}

	oa := c.openai()
	resp, err := oa.Responses.New(context.Background(), responses.ResponseNewParams{Model: "echo",
		Conversation: responses.ResponseNewParamsConversationUnion{OfString: openaisdk.String(sid)},
		Input:        responses.ResponseNewParamsInputUnion{OfString: openaisdk.String("over OpenAI")}})
	if err != nil || resp.OutputText() != "Echo: over OpenAI" {
		t.Fatalf("OpenAI response: %v %v", err, resp)
	}

	full := c.history(sid, aap.HistoryFull)
	var texts []string
	for _, m := range full {
		texts = append(texts, m.Content.PlainText())
	}
	want := []string{"over v1", "Echo: over v1", "over v3", "Echo: over v3", "over AG-UI", "Echo: over AG-UI",
		"over sandbox-agent", "Echo: over sandbox-agent", "over OpenAI", "Echo: over OpenAI"}
	if !reflect.DeepEqual(texts, want) {
		t.Fatalf("v3 full history = %q, want %q", texts, want)
	}
	v1Sess, _ := c.v1Get(sid)
	if !reflect.DeepEqual(v1Sess.History.Full, full) {
		t.Errorf("v1 reads %+v, v3 %+v", v1Sess.History.Full, full)
	}

	var turns []string
	for _, e := range c.eventPages(sid, 100) {
		if e.Event == aap.EventTurnStart {
			turns = append(turns, e.TurnID)
		}
	}
	turnPage, err := c.api().ListTurns(context.Background(), sid, aapclient.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	records := turnPage.Turns
	if len(turns) != 5 || len(records) != 5 {
		t.Fatalf("event log turns %v, turn records %d; want the 5 turns of the 5 doors", turns, len(records))
	}
	for i, rec := range records { // newest first
		if got := turns[len(turns)-1-i]; got != rec.TurnID {
			t.Errorf("event log turn %d is %s, the records say %s", len(turns)-1-i, got, rec.TurnID)
		}
	}

	// sandbox-agent reads the same conversation: each message of the
	// history as an item, in order.
	var items []string
	for _, e := range c.saAll(sid, 1000) {
		if d := e.data(t); e.Type == "item.completed" && d.Item.Kind == "message" {
			items = append(items, d.Item.Content[0].Text)
		}
	}
	if !reflect.DeepEqual(items, want) {
		t.Errorf("sandbox-agent reads %q, want %q", items, want)
	}

	// So does the OpenAI door: the conversation's items, oldest first.
	page, err := oa.Conversations.Items.List(context.Background(), sid, conversations.ItemListParams{
		Order: conversations.ItemListParamsOrderAsc, Limit: openaisdk.Int(100)})
	if err != nil {
		t.Fatal(err)
	}
	var read []string
	for _, s := range itemTexts(t, page.Data) {
		_, text, _ := strings.Cut(s, ":")
		read = append(read, text)
	}
	if !reflect.DeepEqual(read, want) {
		t.Errorf("the OpenAI door reads %q, want %q", read, want)
	}
}

// One conversation through the OpenAI door and AAP v3, both ways
// (docs/protocols.md): a conversation started on the OpenAI door continues
// over AAP v3, and one started over AAP v3 continues on the OpenAI door;
// after each turn both doors read the same history, message by message
// (role and text), and the OpenAI items keep their ids as it grows.
func TestOneConversationThroughTheOpenAIDoorAndV3BothWays(t *testing.T) {
	t.Parallel()
	s := startParallelServer(t)
	c := s.newTenant(t)
	oa := c.openai()
	ctx := context.Background()

	// agree checks that AAP v3's full history and the conversation's items
	// are want, message by message, and that the items seen before keep
	// their ids.
	ids := map[string][]string{}
	agree := func(sid string, want []string) {
		t.Helper()
		var v3 []string
		for _, m := range c.history(sid, aap.HistoryFull) {
			v3 = append(v3, string(m.Role)+":"+m.Content.PlainText())
		}
		page, err := oa.Conversations.Items.List(ctx, sid, conversations.ItemListParams{
			Order: conversations.ItemListParamsOrderAsc, Limit: openaisdk.Int(100)})
		if err != nil {
			t.Fatal(err)
		}
		items := itemTexts(t, page.Data)
		if len(v3) != len(want) || len(items) != len(want) {
			t.Fatalf("v3 reads %q, the OpenAI door %q; want %q", v3, items, want)
		}
		for i := range want {
			if v3[i] != want[i] || items[i] != want[i] {
				t.Errorf("message %d: v3 %q, OpenAI %q, want %q", i, v3[i], items[i], want[i])
			}
		}
		for i, id := range ids[sid] {
			if page.Data[i].ID != id {
				t.Errorf("item %d was %s, is now %s", i, id, page.Data[i].ID)
			}
		}
		ids[sid] = nil
		for _, it := range page.Data {
			ids[sid] = append(ids[sid], it.ID)
		}
	}
	respond := func(sid, text string) {
		t.Helper()
		r, err := oa.Responses.New(ctx, responses.ResponseNewParams{Model: "echo",
			Conversation: responses.ResponseNewParamsConversationUnion{OfString: openaisdk.String(sid)},
			Input:        responses.ResponseNewParamsInputUnion{OfString: openaisdk.String(text)}})
		if err != nil || r.OutputText() != "Echo: "+text || r.Conversation.ID != sid {
			t.Fatalf("OpenAI response on %s: %v %v", sid, err, r)
		}
	}
	say := func(sid, text string) {
		t.Helper()
		if got := c.say(sid, text); got.StopReason != aap.StopEndTurn {
			t.Fatalf("v3 turn on %s: %+v", sid, got)
		}
	}

	// Started on the OpenAI door, continued over AAP v3, and back.
	conv, err := oa.Conversations.New(ctx, conversations.ConversationNewParams{
		Items: []responses.ResponseInputItemUnionParam{userItem("seeded on OpenAI")}})
	if err != nil {
		t.Fatal(err)
	}
	sid := conv.ID
	respond(sid, "first on OpenAI")
	want := []string{"user:seeded on OpenAI", "user:first on OpenAI", "assistant:Echo: first on OpenAI"}
	agree(sid, want)
	say(sid, "then over v3")
	want = append(want, "user:then over v3", "assistant:Echo: then over v3")
	agree(sid, want)
	respond(sid, "back on OpenAI")
	want = append(want, "user:back on OpenAI", "assistant:Echo: back on OpenAI")
	agree(sid, want)

	// Started over AAP v3, continued on the OpenAI door, and back.
	sid = c.createSession(map[string]any{"agent": map[string]any{"name": "echo"}})
	say(sid, "first over v3")
	want = []string{"user:first over v3", "assistant:Echo: first over v3"}
	agree(sid, want)
	respond(sid, "then on OpenAI")
	want = append(want, "user:then on OpenAI", "assistant:Echo: then on OpenAI")
	agree(sid, want)
	say(sid, "back over v3")
	want = append(want, "user:back over v3", "assistant:Echo: back over v3")
	agree(sid, want)
}
