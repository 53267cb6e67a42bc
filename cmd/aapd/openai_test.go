package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	openaisdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/conversations"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"github.com/aapd/aapd/aap"
	openaidoor "github.com/aapd/aapd/httpapi/openai"
)

// The OpenAI door (docs/protocols.md), driven by the official Go SDK,
// openai-go: every exchange goes through checkedTransport, which holds it
// to aapd's OpenAPI document.

// openai returns an SDK client acting as the tenant, retrying nothing.
func (c *client) openai() openaisdk.Client {
	return openaisdk.NewClient(option.WithBaseURL(c.base+openaidoor.Prefix+"/"), option.WithAPIKey(c.key),
		option.WithHTTPClient(&http.Client{Transport: checkedTransport{t: c.t}}), option.WithMaxRetries(0))
}

// userItem is a user message item, as the SDK sends one.
func userItem(text string) responses.ResponseInputItemUnionParam {
	return responses.ResponseInputItemParamOfMessage(text, responses.EasyInputMessageRoleUser)
}

// weatherTool is a function tool, get_weather of a city.
func weatherTool() responses.ToolUnionParam {
	return responses.ToolUnionParam{OfFunction: &responses.FunctionToolParam{Name: "get_weather",
		Description: openaisdk.String("The weather of a city"),
		Parameters:  map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}}}
}

// apiErr returns the SDK's error, failing the test if err is another.
func apiErr(t *testing.T, err error) *openaisdk.Error {
	t.Helper()
	var e *openaisdk.Error
	if !errors.As(err, &e) {
		t.Fatalf("err = %v, want an API error", err)
	}
	return e
}

func itemTexts(t *testing.T, items []conversations.ConversationItemUnion) []string {
	t.Helper()
	var out []string
	for _, it := range items {
		var m struct {
			Type    string `json:"type"`
			Role    string `json:"role"`
			Output  string `json:"output"`
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		}
		if err := json.Unmarshal([]byte(it.RawJSON()), &m); err != nil {
			t.Fatal(err)
		}
		s := m.Type
		if m.Role != "" {
			s = m.Role
		}
		for _, c := range m.Content {
			s += ":" + c.Text
		}
		out = append(out, s)
	}
	return out
}

// Conversations: created with items and metadata, read, updated, their
// items listed in pages (newest first by default), added to, read one by
// one; deleting an item is refused in OpenAI's error shape; deleting the
// conversation deletes the session.
func TestOpenAIConversations(t *testing.T) {
	t.Parallel()
	s := startParallelServer(t)
	c := s.newTenant(t)
	api := c.openai()
	ctx := context.Background()

	conv, err := api.Conversations.New(ctx, conversations.ConversationNewParams{
		Items:    []responses.ResponseInputItemUnionParam{userItem("hello"), responses.ResponseInputItemParamOfMessage("hi there", responses.EasyInputMessageRoleAssistant)},
		Metadata: shared.Metadata{"topic": "greetings"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(conv.ID, "sess_") || conv.Metadata.(map[string]any)["topic"] != "greetings" {
		t.Fatalf("created %s", conv.RawJSON())
	}
	got, err := api.Conversations.Get(ctx, conv.ID)
	if err != nil || got.ID != conv.ID {
		t.Fatalf("get: %v %+v", err, got)
	}
	upd, err := api.Conversations.Update(ctx, conv.ID, conversations.ConversationUpdateParams{Metadata: shared.Metadata{"topic": "other", "k": "v"}})
	if err != nil {
		t.Fatal(err)
	}
	if md := upd.Metadata.(map[string]any); md["topic"] != "other" || md["k"] != "v" {
		t.Fatalf("updated metadata %v", md)
	}

	added, err := api.Conversations.Items.New(ctx, conv.ID, conversations.ItemNewParams{
		Items: []responses.ResponseInputItemUnionParam{userItem("one"), userItem("two")}})
	if err != nil {
		t.Fatal(err)
	}
	if len(added.Data) != 2 || added.FirstID == "" || added.LastID == "" {
		t.Fatalf("added %s", added.RawJSON())
	}

	page, err := api.Conversations.Items.List(ctx, conv.ID, conversations.ItemListParams{Limit: openaisdk.Int(3)})
	if err != nil {
		t.Fatal(err)
	}
	if texts := itemTexts(t, page.Data); !reflect.DeepEqual(texts, []string{"user:two", "user:one", "assistant:hi there"}) || !page.HasMore {
		t.Fatalf("first page %q (has_more %v)", texts, page.HasMore)
	}
	next, err := page.GetNextPage()
	if err != nil {
		t.Fatal(err)
	}
	if texts := itemTexts(t, next.Data); !reflect.DeepEqual(texts, []string{"user:hello"}) || next.HasMore {
		t.Fatalf("second page %q", texts)
	}
	asc, err := api.Conversations.Items.List(ctx, conv.ID, conversations.ItemListParams{Order: conversations.ItemListParamsOrderAsc})
	if err != nil {
		t.Fatal(err)
	}
	if texts := itemTexts(t, asc.Data); !reflect.DeepEqual(texts, []string{"user:hello", "assistant:hi there", "user:one", "user:two"}) {
		t.Fatalf("ascending %q", texts)
	}
	// Ids are stable: the same item read again, alone, has the same id.
	one, err := api.Conversations.Items.Get(ctx, conv.ID, asc.Data[2].ID, conversations.ItemGetParams{})
	if err != nil || one.ID != asc.Data[2].ID || one.ID != added.FirstID {
		t.Fatalf("item %v: %v", one, err)
	}

	_, err = api.Conversations.Items.Delete(ctx, conv.ID, one.ID)
	e := apiErr(t, err)
	if e.StatusCode != http.StatusBadRequest || e.Param != "item_id" || e.Type != "invalid_request_error" ||
		e.Response.Header.Get(openaidoor.ShouldRetryHeader) != "false" {
		t.Fatalf("deleting an item: %d %s", e.StatusCode, e.RawJSON())
	}

	// The conversation is an AAP session: the same history.
	if h := c.history(conv.ID, aap.HistoryFull); len(h) != 4 || h[3].Content.PlainText() != "two" {
		t.Fatalf("AAP history %+v", h)
	}

	del, err := api.Conversations.Delete(ctx, conv.ID)
	if err != nil || !del.Deleted {
		t.Fatalf("delete: %v %+v", err, del)
	}
	_, err = api.Conversations.Get(ctx, conv.ID)
	if e := apiErr(t, err); e.StatusCode != http.StatusNotFound || e.Code != "not_found" {
		t.Fatalf("after delete: %d %s", e.StatusCode, e.RawJSON())
	}
	c.do(http.MethodGet, "/sessions/"+conv.ID, nil).expect(t, http.StatusNotFound)
}

// Responses: a string input on a new session, a conversation's turn (the
// model naming its agent), store false keeping nothing, and the
// conversation's items showing both turns.
func TestOpenAIResponses(t *testing.T) {
	t.Parallel()
	s := startParallelServer(t)
	c := s.newTenant(t)
	api := c.openai()
	ctx := context.Background()

	resp, err := api.Responses.New(ctx, responses.ResponseNewParams{Model: "echo",
		Input: responses.ResponseNewParamsInputUnion{OfString: openaisdk.String("hello")}, Metadata: shared.Metadata{"a": "b"}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.OutputText() != "Echo: hello" || resp.Status != responses.ResponseStatusCompleted || resp.Metadata["a"] != "b" {
		t.Fatalf("response %s", resp.RawJSON())
	}
	again, err := api.Responses.Get(ctx, resp.ID, responses.ResponseGetParams{})
	if err != nil || again.OutputText() != "Echo: hello" || again.ID != resp.ID {
		t.Fatalf("get %v: %v", again, err)
	}

	conv, err := api.Conversations.New(ctx, conversations.ConversationNewParams{})
	if err != nil {
		t.Fatal(err)
	}
	for _, text := range []string{"first", "/think hmm\nsecond"} {
		r, err := api.Responses.New(ctx, responses.ResponseNewParams{Model: "echo",
			Input:        responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{userItem(text)}},
			Conversation: responses.ResponseNewParamsConversationUnion{OfConversationObject: &responses.ResponseConversationParam{ID: conv.ID}}})
		if err != nil {
			t.Fatal(err)
		}
		if r.Conversation.ID != conv.ID || !strings.HasPrefix(r.OutputText(), "Echo: ") {
			t.Fatalf("response %s", r.RawJSON())
		}
	}
	items, err := api.Conversations.Items.List(ctx, conv.ID, conversations.ItemListParams{Order: conversations.ItemListParamsOrderAsc})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"user:first", "assistant:Echo: first", "user:/think hmm\nsecond", "reasoning", "assistant:Echo: second"}
	if texts := itemTexts(t, items.Data); !reflect.DeepEqual(texts, want) {
		t.Fatalf("items %q, want %q", texts, want)
	}

	// store false: the response is answered, then nothing of it is kept.
	gone, err := api.Responses.New(ctx, responses.ResponseNewParams{Model: "echo", Store: openaisdk.Bool(false),
		Input: responses.ResponseNewParamsInputUnion{OfString: openaisdk.String("forget me")}})
	if err != nil || gone.OutputText() != "Echo: forget me" {
		t.Fatalf("store false: %v %v", err, gone)
	}
	_, err = api.Responses.Get(ctx, gone.ID, responses.ResponseGetParams{})
	if e := apiErr(t, err); e.StatusCode != http.StatusNotFound {
		t.Fatalf("a response not stored: %d", e.StatusCode)
	}
}

// A retrieved response returns what its request sent: metadata, tools,
// tool_choice, parallel_tool_calls, max_output_tokens, temperature,
// top_p, text, truncation, user, its conversation (migration 00039 keeps
// them with the turn), answered at once and read later alike, in the
// background too.
func TestOpenAIRetrievedResponseReturnsWhatWasSent(t *testing.T) {
	t.Parallel()
	s := startParallelServer(t)
	c := s.newTenant(t)
	api := c.openai()
	ctx := context.Background()
	conv, err := api.Conversations.New(ctx, conversations.ConversationNewParams{})
	if err != nil {
		t.Fatal(err)
	}
	weather := weatherTool()
	params := responses.ResponseNewParams{Model: "echo", Input: responses.ResponseNewParamsInputUnion{OfString: openaisdk.String("hi")},
		Metadata: shared.Metadata{"app": "x", "k": "v"}, Tools: []responses.ToolUnionParam{weather},
		ToolChoice:        responses.ResponseNewParamsToolChoiceUnion{OfToolChoiceMode: openaisdk.Opt(responses.ToolChoiceOptionsNone)},
		ParallelToolCalls: openaisdk.Bool(false), MaxOutputTokens: openaisdk.Int(77), Temperature: openaisdk.Float(0.5),
		TopP: openaisdk.Float(0.9), User: openaisdk.String("u-1"), Truncation: responses.ResponseNewParamsTruncationAuto,
		Conversation: responses.ResponseNewParamsConversationUnion{OfString: openaisdk.String(conv.ID)}}
	check := func(what string, r *responses.Response) {
		t.Helper()
		if r.Metadata["app"] != "x" || r.Metadata["k"] != "v" || len(r.Metadata) != 2 {
			t.Errorf("%s: metadata %v", what, r.Metadata)
		}
		if len(r.Tools) != 1 || r.Tools[0].Name != "get_weather" || r.Tools[0].Description != "The weather of a city" ||
			r.Tools[0].Type != "function" || !strings.Contains(r.Tools[0].RawJSON(), `"city"`) {
			t.Errorf("%s: tools %s", what, r.JSON.Tools.Raw())
		}
		if r.ToolChoice.OfToolChoiceMode != responses.ToolChoiceOptionsNone || r.ParallelToolCalls ||
			r.MaxOutputTokens != 77 || r.Temperature != 0.5 || r.TopP != 0.9 || r.User != "u-1" ||
			r.Truncation != responses.ResponseTruncationAuto || r.Conversation.ID != conv.ID || r.Model != "echo" {
			t.Errorf("%s: %s", what, r.RawJSON())
		}
	}
	resp, err := api.Responses.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	check("answered", resp)
	got, err := api.Responses.Get(ctx, resp.ID, responses.ResponseGetParams{})
	if err != nil {
		t.Fatal(err)
	}
	check("retrieved", got)
	if got.OutputText() != "Echo: hi" {
		t.Errorf("retrieved output %q", got.OutputText())
	}

	params.Background = openaisdk.Bool(true)
	params.Input = responses.ResponseNewParamsInputUnion{OfString: openaisdk.String("later")}
	bg, err := api.Responses.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	check("background, answered", bg)
	deadline := time.Now().Add(20 * time.Second)
	for {
		got, err = api.Responses.Get(ctx, bg.ID, responses.ResponseGetParams{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Status == responses.ResponseStatusCompleted || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	check("background, retrieved", got)
	if !got.Background || got.OutputText() != "Echo: later" {
		t.Errorf("background retrieved: %s", got.RawJSON())
	}
}

// Function tools are AAP client tools: the response ends with the
// function_call, and the next request's function_call_output resumes the
// turn (on the previous response, and statelessly with store false). A
// server tool of aapd's runs as an mcp_call.
func TestOpenAIFunctionTools(t *testing.T) {
	t.Parallel()
	s := startParallelServer(t)
	c := s.newTenant(t)
	api := c.openai()
	ctx := context.Background()
	weather := weatherTool()

	first, err := api.Responses.New(ctx, responses.ResponseNewParams{Model: "echo", Tools: []responses.ToolUnionParam{weather},
		Input: responses.ResponseNewParamsInputUnion{OfString: openaisdk.String(`/tool get_weather {"city":"Paris"}`)}})
	if err != nil {
		t.Fatal(err)
	}
	var call responses.ResponseOutputItemUnion
	for _, it := range first.Output {
		if it.Type == "function_call" {
			call = it
		}
	}
	if call.Name != "get_weather" || call.CallID == "" || !strings.Contains(call.Arguments.OfString, "Paris") {
		t.Fatalf("no function call in %s", first.RawJSON())
	}
	second, err := api.Responses.New(ctx, responses.ResponseNewParams{Model: "echo", PreviousResponseID: openaisdk.String(first.ID),
		Tools: []responses.ToolUnionParam{weather},
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
			{OfFunctionCallOutput: &responses.ResponseInputItemFunctionCallOutputParam{CallID: openaisdk.String(call.CallID),
				Output: responses.ResponseInputItemFunctionCallOutputOutputUnionParam{OfString: openaisdk.String("sunny")}}}}}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(second.OutputText(), "sunny") || second.PreviousResponseID != first.ID {
		t.Fatalf("after the output: %s", second.RawJSON())
	}
	// The same request again (a retry) replays its response: no turn runs twice.
	retried, err := api.Responses.New(ctx, responses.ResponseNewParams{Model: "echo", PreviousResponseID: openaisdk.String(first.ID),
		Tools: []responses.ToolUnionParam{weather},
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
			{OfFunctionCallOutput: &responses.ResponseInputItemFunctionCallOutputParam{CallID: openaisdk.String(call.CallID),
				Output: responses.ResponseInputItemFunctionCallOutputOutputUnionParam{OfString: openaisdk.String("sunny")}}}}}})
	if err != nil || retried.ID != second.ID {
		t.Fatalf("a retry: %v, response %v, first answered %s", err, retried, second.ID)
	}
	// Another continuation of an earlier response, no longer the latest:
	// a fork of its conversation at that response.
	say := func(prev, text string) *responses.Response {
		t.Helper()
		p := responses.ResponseNewParams{Model: "echo", Input: responses.ResponseNewParamsInputUnion{OfString: openaisdk.String(text)}}
		if prev != "" {
			p.PreviousResponseID = openaisdk.String(prev)
		}
		r, err := api.Responses.New(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	one := say("", "one")
	two := say(one.ID, "two")
	three := say(one.ID, "three")
	if three.OutputText() != "Echo: three" || three.ID[:5+32] == one.ID[:5+32] {
		t.Fatalf("fork: %s", three.RawJSON())
	}
	if again, err := api.Responses.Get(ctx, two.ID, responses.ResponseGetParams{}); err != nil || again.OutputText() != "Echo: two" {
		t.Fatalf("the original goes on: %v %v", err, again)
	}

	// Stateless: the whole exchange sent again, nothing kept.
	stateless, err := api.Responses.New(ctx, responses.ResponseNewParams{Model: "echo", Store: openaisdk.Bool(false),
		Tools: []responses.ToolUnionParam{weather},
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
			userItem(`/tool get_weather {"city":"Oslo"}`),
			responses.ResponseInputItemParamOfFunctionCall(`{"city":"Oslo"}`, "call_1", "get_weather"),
			{OfFunctionCallOutput: &responses.ResponseInputItemFunctionCallOutputParam{CallID: openaisdk.String("call_1"),
				Output: responses.ResponseInputItemFunctionCallOutputOutputUnionParam{OfString: openaisdk.String("snow")}}}}}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stateless.OutputText(), "snow") {
		t.Fatalf("stateless: %s", stateless.RawJSON())
	}

	// A server tool: an mcp_call with its output, never a function_call.
	calc, err := api.Responses.New(ctx, responses.ResponseNewParams{Model: "echo",
		Input: responses.ResponseNewParamsInputUnion{OfString: openaisdk.String(`/tool calculator {"expression":"6*7"}`)}})
	if err != nil {
		t.Fatal(err)
	}
	var mcp *responses.ResponseOutputItemUnion
	for i, it := range calc.Output {
		if it.Type == "function_call" {
			t.Fatalf("a server tool shown as a function_call: %s", calc.RawJSON())
		}
		if it.Type == "mcp_call" {
			mcp = &calc.Output[i]
		}
	}
	if mcp == nil || mcp.ServerLabel != openaidoor.ServerLabel || mcp.Name != "calculator" || !strings.Contains(mcp.Output.OfString, "42") {
		t.Fatalf("no mcp_call in %s", calc.RawJSON())
	}
}

// Errors are OpenAI's error object with its statuses: an unknown model,
// an unknown conversation, another tenant's conversation, a bad key
// (instructions and tool_choice: openai_choices_test.go).
func TestOpenAIErrors(t *testing.T) {
	t.Parallel()
	s := startParallelServer(t)
	c := s.newTenant(t)
	api := c.openai()
	ctx := context.Background()

	_, err := api.Responses.New(ctx, responses.ResponseNewParams{Model: "gpt-nope",
		Input: responses.ResponseNewParamsInputUnion{OfString: openaisdk.String("hi")}})
	if e := apiErr(t, err); e.StatusCode != http.StatusNotFound || e.Param != "model" || e.Code != "model_not_found" {
		t.Fatalf("unknown model: %d %s", e.StatusCode, e.RawJSON())
	}

	conv, err := api.Conversations.New(ctx, conversations.ConversationNewParams{Items: []responses.ResponseInputItemUnionParam{userItem("secret")}})
	if err != nil {
		t.Fatal(err)
	}
	other := s.newTenant(t).openai()
	if _, err := other.Conversations.Get(ctx, conv.ID); apiErr(t, err).StatusCode != http.StatusNotFound {
		t.Fatalf("another tenant reads the conversation")
	}
	if _, err := other.Conversations.Items.List(ctx, conv.ID, conversations.ItemListParams{}); apiErr(t, err).StatusCode != http.StatusNotFound {
		t.Fatalf("another tenant lists its items")
	}
	_, err = other.Responses.New(ctx, responses.ResponseNewParams{Model: "echo",
		Conversation: responses.ResponseNewParamsConversationUnion{OfString: openaisdk.String(conv.ID)},
		Input:        responses.ResponseNewParamsInputUnion{OfString: openaisdk.String("hi")}})
	if e := apiErr(t, err); e.StatusCode != http.StatusNotFound || e.Param != "conversation" {
		t.Fatalf("another tenant's conversation: %d %s", e.StatusCode, e.RawJSON())
	}

	bad := openaisdk.NewClient(option.WithBaseURL(c.base+openaidoor.Prefix+"/"), option.WithAPIKey("aapd_nope"), option.WithMaxRetries(0))
	_, err = bad.Conversations.Get(ctx, conv.ID)
	if e := apiErr(t, err); e.StatusCode != http.StatusUnauthorized || e.Code != "invalid_api_key" {
		t.Fatalf("bad key: %d %s", e.StatusCode, e.RawJSON())
	}
}

// A streamed response, through openai-go's stream: the event sequence the
// SDKs' helpers require, numbered from 0 without a gap, the text's deltas
// adding up to the response's text, and no top-level "error" member on a
// normal event; a function call streams its arguments.
func TestOpenAIStreaming(t *testing.T) {
	t.Parallel()
	s := startParallelServer(t)
	c := s.newTenant(t)
	api := c.openai()
	ctx := context.Background()
	conv, err := api.Conversations.New(ctx, conversations.ConversationNewParams{})
	if err != nil {
		t.Fatal(err)
	}

	stream := api.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: "echo",
		Conversation: responses.ResponseNewParamsConversationUnion{OfString: openaisdk.String(conv.ID)},
		Input:        responses.ResponseNewParamsInputUnion{OfString: openaisdk.String("/think first\nstream me please")}})
	var (
		types  []string
		text   string
		final  responses.Response
		itemID string
	)
	for stream.Next() {
		ev := stream.Current()
		if ev.SequenceNumber != int64(len(types)) {
			t.Fatalf("event %d has sequence_number %d", len(types), ev.SequenceNumber)
		}
		var top map[string]json.RawMessage
		if err := json.Unmarshal([]byte(ev.RawJSON()), &top); err != nil {
			t.Fatal(err)
		}
		if _, ok := top["error"]; ok {
			t.Fatalf("a top-level error member on %s", ev.RawJSON())
		}
		types = append(types, ev.Type)
		switch ev.Type {
		case "response.output_text.delta":
			text += ev.Delta
			itemID = ev.ItemID
		case "response.completed":
			final = ev.Response
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	want := []string{"response.created", "response.in_progress",
		"response.output_item.added", "response.reasoning_summary_part.added", "response.reasoning_summary_text.delta",
		"response.reasoning_summary_text.done", "response.reasoning_summary_part.done", "response.output_item.done",
		"response.output_item.added", "response.content_part.added"}
	if len(types) < len(want)+5 || !reflect.DeepEqual(types[:len(want)], want) {
		t.Fatalf("events %q", types)
	}
	tail := types[len(types)-5:]
	if !reflect.DeepEqual(tail, []string{"response.output_text.delta", "response.output_text.done", "response.content_part.done",
		"response.output_item.done", "response.completed"}) {
		t.Fatalf("events end with %q", tail)
	}
	if text != "Echo: stream me please" || final.OutputText() != text || final.Status != responses.ResponseStatusCompleted {
		t.Fatalf("deltas %q, final %s", text, final.RawJSON())
	}
	// What was streamed is named as the conversation names it.
	if last := final.Output[len(final.Output)-1]; last.ID != itemID {
		t.Errorf("streamed item %s, final item %s", itemID, last.ID)
	}
	items, err := api.Conversations.Items.List(ctx, conv.ID, conversations.ItemListParams{})
	if err != nil || items.Data[0].ID != itemID {
		t.Fatalf("newest item %v (%v), streamed %s", items.Data, err, itemID)
	}

	weather := responses.ToolUnionParam{OfFunction: &responses.FunctionToolParam{Name: "get_weather",
		Parameters: map[string]any{"type": "object"}}}
	stream = api.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: "echo", Tools: []responses.ToolUnionParam{weather},
		Input: responses.ResponseNewParamsInputUnion{OfString: openaisdk.String(`/tool get_weather {"city":"Rome"}`)}})
	var args string
	types = nil
	for stream.Next() {
		ev := stream.Current()
		types = append(types, ev.Type)
		if ev.Type == "response.function_call_arguments.done" {
			args = ev.Arguments
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(args, "Rome") || types[len(types)-1] != "response.completed" {
		t.Fatalf("function call stream %q, arguments %q", types, args)
	}
}

// Background responses: answered at once, read until done, followed as a
// stream from a sequence number, cancelled; a response's input items; a
// response deleted with the session it alone made.
func TestOpenAIBackground(t *testing.T) {
	t.Parallel()
	s := startParallelServer(t)
	c := s.newTenant(t)
	api := c.openai()
	ctx := context.Background()

	bg, err := api.Responses.New(ctx, responses.ResponseNewParams{Model: "echo", Background: openaisdk.Bool(true),
		Input: responses.ResponseNewParamsInputUnion{OfString: openaisdk.String("/slow 100\nlater please")}})
	if err != nil {
		t.Fatal(err)
	}
	if bg.Status != responses.ResponseStatusInProgress && bg.Status != responses.ResponseStatusQueued {
		t.Fatalf("background answered %s", bg.RawJSON())
	}
	var done *responses.Response
	waitFor(t, "the background response", 30*time.Second, func() bool {
		done, err = api.Responses.Get(ctx, bg.ID, responses.ResponseGetParams{})
		return err == nil && done.Status == responses.ResponseStatusCompleted
	})
	if done.OutputText() != "Echo: later please" {
		t.Fatalf("background output %s", done.RawJSON())
	}
	stream := api.Responses.GetStreaming(ctx, bg.ID, responses.ResponseGetParams{StartingAfter: openaisdk.Int(2)})
	var seqs []int64
	var last string
	for stream.Next() {
		seqs = append(seqs, stream.Current().SequenceNumber)
		last = stream.Current().Type
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if len(seqs) == 0 || seqs[0] != 3 || last != "response.completed" {
		t.Fatalf("resumed stream: sequence numbers %v, last %s", seqs, last)
	}

	in, err := api.Responses.InputItems.List(ctx, bg.ID, responses.InputItemListParams{})
	if err != nil || len(in.Data) != 1 || in.Data[0].Type != "message" {
		t.Fatalf("input items %v: %v", in, err)
	}

	slow, err := api.Responses.New(ctx, responses.ResponseNewParams{Model: "echo", Background: openaisdk.Bool(true),
		Input: responses.ResponseNewParamsInputUnion{OfString: openaisdk.String("/slow 500\n/words 40")}})
	if err != nil {
		t.Fatal(err)
	}
	cancelled, err := api.Responses.Cancel(ctx, slow.ID)
	if err != nil || cancelled.Status != responses.ResponseStatusCancelled {
		t.Fatalf("cancel: %v %v", err, cancelled)
	}

	if err := api.Responses.Delete(ctx, bg.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := api.Responses.Get(ctx, bg.ID, responses.ResponseGetParams{}); apiErr(t, err).StatusCode != http.StatusNotFound {
		t.Fatal("a deleted response is still there")
	}
	other := s.newTenant(t).openai()
	if _, err := other.Responses.Get(ctx, slow.ID, responses.ResponseGetParams{}); apiErr(t, err).StatusCode != http.StatusNotFound {
		t.Fatal("another tenant reads the response")
	}
}

// TestOpenAIOfficialClients runs interop/openai/run.mjs — the openai npm
// client (7.x) and @openai/agents, pinned by its lock file, through eight
// scenarios — against a real server, with a second tenant.
func TestOpenAIOfficialClients(t *testing.T) {
	node, errNode := exec.LookPath("node")
	npm, errNpm := exec.LookPath("npm")
	if errNode != nil || errNpm != nil {
		t.Skip("node and npm are not installed: install Node.js 20 or later to run the OpenAI clients' interop test")
	}
	dir, err := filepath.Abs("../../interop/openai")
	if err != nil {
		t.Fatal(err)
	}
	npmInstall(t, npm, dir)
	s := startParallelServer(t)
	c, other := s.newTenant(t), s.newTenant(t)
	env := append(os.Environ(), "AAPD_URL="+s.base, "AAPD_KEY="+c.key, "AAPD_OTHER_KEY="+other.key)
	runScenarios(t, node, dir, "run.mjs", env, 8)
}
