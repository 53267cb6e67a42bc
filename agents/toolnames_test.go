package agents

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/aapd/aapd/aap"
)

// Tool names with characters a provider refuses ('.', more than 64
// characters) reach the model as names it accepts, and its calls come back
// with the AAP names; acceptable names are never touched.
func TestToolNamesAProviderRefusesAreMappedAndBack(t *testing.T) {
	long := strings.Repeat("x", 100)
	spec := func(name string) aap.ToolSpec {
		return aap.ToolSpec{Name: name, Description: "d", Parameters: json.RawMessage(`{}`)}
	}
	call := func(id, name string) aap.ContentBlock {
		return aap.ToolUseBlock(aap.ToolCall{ToolCallID: id, Name: name, Input: json.RawMessage(`{}`)})
	}
	req := ModelRequest{
		Tools: []aap.ToolSpec{spec("fs.read"), spec("fs_read"), spec(long), spec("plain")},
		Messages: Messages(
			aap.UserMessage("go"),
			aap.AssistantMessage(call("c1", "fs.read"), call("c2", "old.tool")),
		),
	}
	names := newToolNames(req)
	sent := names.request(req)
	seen := map[string]bool{}
	for _, s := range sent.Tools {
		if !providerToolName.MatchString(s.Name) {
			t.Errorf("tool %q reaches the model", s.Name)
		}
		if seen[s.Name] {
			t.Errorf("two tools reach the model as %q", s.Name)
		}
		seen[s.Name] = true
	}
	if sent.Tools[1].Name != "fs_read" || sent.Tools[3].Name != "plain" {
		t.Errorf("acceptable names were mapped: %+v", sent.Tools)
	}
	if req.Tools[0].Name != "fs.read" || req.Messages[1].Content.Blocks[0].Name != "fs.read" {
		t.Error("the request itself was changed")
	}
	hist := sent.Messages[1].Content.Blocks
	if hist[0].Name != sent.Tools[0].Name || !providerToolName.MatchString(hist[1].Name) {
		t.Errorf("history calls reach the model as %q, %q", hist[0].Name, hist[1].Name)
	}
	// The model calls the tools by the names it was given.
	resp := names.response(ModelResponse{Message: Message{Message: aap.AssistantMessage(
		call("c3", sent.Tools[0].Name), call("c4", sent.Tools[2].Name), call("c5", "plain"), call("c6", "made_up"))}})
	var got []string
	for _, c := range resp.Message.ToolCalls() {
		got = append(got, c.Name)
	}
	if want := []string{"fs.read", long, "plain", "made_up"}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("calls come back as %v, want %v", got, want)
	}
	// Nothing to map: the request goes as it is.
	plain := ModelRequest{Tools: []aap.ToolSpec{spec("a")}}
	if n := newToolNames(plain); n.toProvider != nil || n.request(plain).Tools[0].Name != "a" {
		t.Error("a request with acceptable names was mapped")
	}
}

// A forced call names its tool as the model is given it: a name mapped
// for the provider is forced by its mapped name.
func TestAForcedToolIsNamedAsTheModelKnowsIt(t *testing.T) {
	req := ModelRequest{
		Tools:      []aap.ToolSpec{{Name: "fs.read", Parameters: json.RawMessage(`{}`)}, {Name: "plain", Parameters: json.RawMessage(`{}`)}},
		Messages:   Messages(aap.UserMessage("go")),
		ToolChoice: &ToolChoice{Name: "fs.read"},
	}
	sent := newToolNames(req).request(req)
	if sent.ToolChoice == nil || sent.ToolChoice.Name != sent.Tools[0].Name || sent.ToolChoice.Name == "fs.read" {
		t.Errorf("forced %+v, tools %+v", sent.ToolChoice, sent.Tools)
	}
	if req.ToolChoice.Name != "fs.read" {
		t.Error("the request itself was changed")
	}
	req.ToolChoice = &ToolChoice{Name: "plain"}
	if sent := newToolNames(req).request(req); sent.ToolChoice.Name != "plain" {
		t.Errorf("an acceptable name was mapped: %+v", sent.ToolChoice)
	}
}
