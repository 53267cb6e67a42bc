package aap_test

import (
	"testing"

	"github.com/aapd/aapd/aap"
)

// TestMissingCapabilitiesAreUnsupported checks the capability readers: a
// capability the agent does not declare is unsupported, except that an
// agent without stream capabilities supports "none".
func TestMissingCapabilitiesAreUnsupported(t *testing.T) {
	t.Parallel()
	agents := map[string]aap.AgentInfo{
		"bare":       bareAgent(),
		"full":       fullAgent(),
		"empty caps": withCaps(aap.Capabilities{}),
		"some": withCaps(aap.Capabilities{
			History: &aap.HistoryCapabilities{Full: empty},
			Stream:  &aap.StreamCapabilities{Message: empty},
			Image:   &aap.ImageCapabilities{Data: empty},
		}),
		"empty groups": withCaps(aap.Capabilities{
			History: &aap.HistoryCapabilities{}, Stream: &aap.StreamCapabilities{},
			Application: &aap.ApplicationCapabilities{}, Image: &aap.ImageCapabilities{},
		}),
	}
	type support struct {
		none, delta, message, unknownMode bool
		full, compacted, unknownHistory   bool
		clientTools                       bool
		httpsImage, dataImage, httpImage  bool
	}
	want := map[string]support{
		"bare":         {none: true},
		"full":         {none: true, delta: true, message: true, full: true, compacted: true, clientTools: true, httpsImage: true, dataImage: true},
		"empty caps":   {none: true},
		"some":         {message: true, full: true, dataImage: true},
		"empty groups": {},
	}
	for name, a := range agents {
		got := support{
			none: a.SupportsStream(aap.StreamNone), delta: a.SupportsStream(aap.StreamDelta), message: a.SupportsStream(aap.StreamMessage),
			unknownMode: a.SupportsStream("fast"),
			full:        a.SupportsHistory(aap.HistoryFull), compacted: a.SupportsHistory(aap.HistoryCompacted),
			unknownHistory: a.SupportsHistory("partial"),
			clientTools:    a.AcceptsClientTools(),
			httpsImage:     a.AcceptsImage("https://e.example/a.png"), dataImage: a.AcceptsImage("data:image/png;base64,AAAA"),
			httpImage: a.AcceptsImage("http://e.example/a.png"),
		}
		if got != want[name] {
			t.Errorf("%s: supports %+v, want %+v", name, got, want[name])
		}
	}
}

func TestAgentOptionAndToolLookup(t *testing.T) {
	t.Parallel()
	a := fullAgent()
	if o, ok := a.Option("style"); !ok || o.Type != aap.OptionSelect || len(o.Options) != 2 {
		t.Errorf("Option(style) = %+v, %v", o, ok)
	}
	if _, ok := a.Option("nope"); ok {
		t.Error("Option(nope) found")
	}
	if s, ok := a.Tool("calculator"); !ok || s.Name != "calculator" {
		t.Errorf("Tool(calculator) = %+v, %v", s, ok)
	}
	if _, ok := a.Tool("web_search"); ok {
		t.Error("Tool(web_search) found")
	}
	if aap.Version != 3 {
		t.Errorf("protocol version %d", aap.Version)
	}
}
