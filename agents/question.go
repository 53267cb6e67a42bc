package agents

import (
	"encoding/json"

	"github.com/aapd/aapd/aap"
)

// QuestionToolName names the client tool a door gives its sessions for
// asking the user a question (QuestionTool).
const QuestionToolName = "ask_user"

// QuestionDeclinedText is the result of a question the user declined to
// answer: an error the model reads, and by which the question is told
// rejected rather than answered.
const QuestionDeclinedText = "Error: the user declined to answer the question"

// QuestionTool is the client tool through which an agent asks the user a
// question, with options to pick from. AAP has no questions; a door whose
// protocol has them (sandbox-agent's question.requested) declares this
// tool on the sessions it creates, shows each call of it as a question,
// and sends the user's reply back as the call's result (a rejection as
// QuestionDeclinedText). Any model can call it like any client tool; the
// echo agent's /ask directive does.
func QuestionTool() aap.ToolSpec {
	return aap.ToolSpec{
		Name:        QuestionToolName,
		Title:       "Ask the user",
		Description: "Ask the user a question and wait for the answer. Offer the answers to pick from in options; the result is the answer the user picked or wrote.",
		Parameters: json.RawMessage(`{"type":"object","properties":{` +
			`"question":{"type":"string","description":"The question, as the user will read it."},` +
			`"options":{"type":"array","items":{"type":"string"},"description":"Answers the user may pick from."}},` +
			`"required":["question"]}`),
	}
}
