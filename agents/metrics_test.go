package agents

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/aapd/aapd/aap"
)

// A model id is a label only when the agent's configuration declares it:
// a session may set its model option to anything.
func TestModelLabel(t *testing.T) {
	a := &Agent{Provider: "openai", ModelName: "model-a", ModelOption: "model", Info: aap.AgentInfo{
		Options: []aap.AgentOption{{Type: aap.OptionSelect, Name: "model", Options: []string{"model-a", "model-b"}, Default: "model-a"}},
	}}
	for requested, want := range map[string]string{"": "model-a", "model-a": "model-a", "model-b": "model-b", "gpt-made-up": "other"} {
		if got := a.modelLabel(requested); got != want {
			t.Errorf("modelLabel(%q) = %q, want %q", requested, got, want)
		}
	}
	bare := &Agent{}
	if bare.modelLabel("x") != "other" || bare.modelLabel("") != "other" || bare.providerLabel() != "other" {
		t.Errorf("an agent that declares nothing: model %q, provider %q", bare.modelLabel(""), bare.providerLabel())
	}
}

type fakeTool struct{ name string }

func (f fakeTool) Spec() aap.ToolSpec { return aap.ToolSpec{Name: f.name} }
func (f fakeTool) Call(context.Context, json.RawMessage) (aap.Content, error) {
	return aap.Content{}, nil
}

type fakeMCPTool struct{ fakeTool }

func (fakeMCPTool) MCPServer() string { return "files" }

func TestToolCallLabels(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	m.toolCalled(fakeTool{"calculator"}, nil)
	m.toolCalled(fakeMCPTool{fakeTool{"files_read"}}, errors.New("no such file"))
	m.toolCalled(nil, nil)
	m.clientToolCalled()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range families {
		// The other families are exported at zero from the start.
		if f.GetName() != "aapd_tool_calls_total" {
			continue
		}
		for _, metric := range f.GetMetric() {
			if metric.GetCounter().GetValue() == 0 {
				continue // tool calls' fixed series, at zero
			}
			var labels []string
			for _, l := range metric.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			got = append(got, strings.Join(labels, ",")+" "+fmt.Sprint(metric.GetCounter().GetValue()))
		}
	}
	want := []string{
		"kind=client,outcome=delegated,tool=client 1",
		"kind=mcp,outcome=error,tool=files_read 1",
		"kind=server,outcome=ok,tool=calculator 1",
		"kind=server,outcome=unavailable,tool=unknown 1",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("tool calls:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
