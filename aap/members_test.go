package aap_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/aapd/aapd/aap"
)

// The specification leaves a request's shapes open: members it does not
// name are ignored, so a client's extensions keep working. When the request
// is refused anyway, the refusal names them, with the member a misspelt one
// meant ({"message": "hi"}: did you mean "messages"?).
func TestUnknownMembersAreIgnoredAndNamedWhenTheRequestIsRefused(t *testing.T) {
	t.Parallel()
	agent := fullAgent()
	turns := []struct {
		name, body string
		field      string // "" when the request is valid
		want       string // what the refusal says, in full
	}{
		{"an extension member", `{"messages":[{"role":"user","content":"hi"}],"x-trace":{"id":1}}`, "", ""},
		{"members told by case, as encoding/json does", `{"Messages":[{"role":"user","content":"hi"}],"STREAM":"delta"}`, "", ""},
		{"a misspelt member", `{"message":"hi"}`, "messages",
			`messages: at least one message is required; the body's member "message" (did you mean "messages"?) is not one of a turn request's, and was ignored`},
		{"several", `{"mesages":[],"foo":1,"strem":"delta"}`, "messages",
			`messages: at least one message is required; the body's members "mesages" (did you mean "messages"?), "foo" and "strem" (did you mean "stream"?) are not a turn request's, and were ignored`},
		{"a refusal of another member", `{"messages":[{"role":"user","content":"hi"}],"stream":"fast","tool":[]}`, "stream",
			`stream: unknown stream mode "fast" (want "none", "delta" or "message"); the body's member "tool" (did you mean "tools"?) is not one of a turn request's, and was ignored`},
		{"nothing unknown", `{"messages":[]}`, "messages", `messages: at least one message is required`},
	}
	for _, tc := range turns {
		var req aap.TurnRequest
		if err := json.Unmarshal([]byte(tc.body), &req); err != nil {
			t.Fatalf("%s: decode: %v", tc.name, err)
		}
		err := aap.ValidateTurn(req, agent.Name, nil, agent)
		checkRule(t, tc.name, err, tc.field)
		if tc.want != "" && (err == nil || err.Error() != tc.want) {
			t.Errorf("%s: refused with\n%v\nwant\n%s", tc.name, err, tc.want)
		}
	}

	// Creating a session: the same.
	var create aap.CreateSessionRequest
	err := json.Unmarshal([]byte(`{"agnet":{"name":"echo"},"metadata":{}}`), &create)
	if want := `"agent" is required; the body's members "agnet" (did you mean "agent"?) and "metadata" are not a create-session request's, and were ignored`; err == nil || err.Error() != want {
		t.Errorf("create without agent: %v\nwant %s", err, want)
	}
	if err := json.Unmarshal([]byte(`{"agent":{"name":"full"},"tool":[{"name":"x"}],"x-app":1}`), &create); err != nil {
		t.Fatalf("create with extension members: %v", err)
	}
	if err := aap.ValidateCreateSession(create, agent); err != nil {
		t.Errorf("a create request with members it does not name is refused: %v", err)
	}
	create.Tools = []aap.ToolSpec{{Name: "bad name!", Description: "d", Parameters: json.RawMessage(`{"type":"object"}`)}}
	var refused *aap.Error
	if err := aap.ValidateCreateSession(create, agent); !errors.As(err, &refused) ||
		!strings.HasSuffix(refused.Msg, `; the body's members "tool" (did you mean "tools"?) and "x-app" are not a create-session request's, and were ignored`) {
		t.Errorf("create refused with %v, which does not name the unknown members", err)
	}
}
