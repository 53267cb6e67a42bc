package aap

// Option types.
const (
	OptionText   = "text"
	OptionSecret = "secret"
	OptionSelect = "select"
)

// AgentOption is a setting a client may choose per session.
type AgentOption struct {
	Type        string   `json:"type"`
	Name        string   `json:"name"`
	Title       string   `json:"title,omitempty"`
	Description string   `json:"description,omitempty"`
	Options     []string `json:"options,omitempty"` // select only
	Default     string   `json:"default"`
}

// Empty is the `{}` value of a capability flag.
type Empty struct{}

// Capabilities declares what an agent supports; a nil field is unsupported.
type Capabilities struct {
	History     *HistoryCapabilities     `json:"history,omitempty"`
	Stream      *StreamCapabilities      `json:"stream,omitempty"`
	Application *ApplicationCapabilities `json:"application,omitempty"`
	Image       *ImageCapabilities       `json:"image,omitempty"`
}

// HistoryCapabilities declares which histories GET /sessions/:id/history serves.
type HistoryCapabilities struct {
	Compacted *Empty `json:"compacted,omitempty"`
	Full      *Empty `json:"full,omitempty"`
}

// StreamCapabilities declares the supported stream modes.
type StreamCapabilities struct {
	Delta   *Empty `json:"delta,omitempty"`
	Message *Empty `json:"message,omitempty"`
	None    *Empty `json:"none,omitempty"`
}

// ApplicationCapabilities declares what the application may provide.
type ApplicationCapabilities struct {
	Tools *Empty `json:"tools,omitempty"`
}

// ImageCapabilities declares which image URLs the agent accepts.
type ImageCapabilities struct {
	HTTP *Empty `json:"http,omitempty"`
	Data *Empty `json:"data,omitempty"`
}

// AgentInfo describes an agent in GET /meta.
type AgentInfo struct {
	Name         string        `json:"name"`
	Title        string        `json:"title,omitempty"`
	Version      string        `json:"version"`
	Description  string        `json:"description,omitempty"`
	Tools        []ToolSpec    `json:"tools,omitempty"`
	Options      []AgentOption `json:"options,omitempty"`
	Capabilities *Capabilities `json:"capabilities,omitempty"`
}

// Option returns the declared option with the given name.
func (a AgentInfo) Option(name string) (AgentOption, bool) {
	for _, o := range a.Options {
		if o.Name == name {
			return o, true
		}
	}
	return AgentOption{}, false
}

// Tool returns the declared server tool with the given name.
func (a AgentInfo) Tool(name string) (ToolSpec, bool) {
	for _, t := range a.Tools {
		if t.Name == name {
			return t, true
		}
	}
	return ToolSpec{}, false
}

// SupportsStream reports whether the agent declares the stream mode. An agent
// without stream capabilities supports only "none", as the spec says.
func (a AgentInfo) SupportsStream(mode StreamMode) bool {
	c := a.Capabilities
	if c == nil || c.Stream == nil {
		return mode == StreamNone
	}
	switch mode {
	case StreamNone:
		return c.Stream.None != nil
	case StreamDelta:
		return c.Stream.Delta != nil
	case StreamMessage:
		return c.Stream.Message != nil
	}
	return false
}

// SupportsHistory reports whether the agent serves the history type.
func (a AgentInfo) SupportsHistory(t HistoryType) bool {
	c := a.Capabilities
	if c == nil || c.History == nil {
		return false
	}
	switch t {
	case HistoryFull:
		return c.History.Full != nil
	case HistoryCompacted:
		return c.History.Compacted != nil
	}
	return false
}

// AcceptsClientTools reports whether the agent takes application tools.
func (a AgentInfo) AcceptsClientTools() bool {
	return a.Capabilities != nil && a.Capabilities.Application != nil && a.Capabilities.Application.Tools != nil
}

// AcceptsImage reports whether the agent takes an image at url (https:// or
// data:), per its image capabilities.
func (a AgentInfo) AcceptsImage(url string) bool {
	c := a.Capabilities
	if c == nil || c.Image == nil {
		return false
	}
	switch imageScheme(url) {
	case "https":
		return c.Image.HTTP != nil
	case "data":
		return c.Image.Data != nil
	}
	return false
}

// AgentConfig selects and configures an agent for a session.
type AgentConfig struct {
	Name string `json:"name"`
	// Tools enables server tools; nil means none are enabled.
	Tools   []ServerToolRef   `json:"tools,omitempty"`
	Options map[string]string `json:"options,omitempty"`
}

// AgentOverrides are the session-level changes a turn request may carry.
type AgentOverrides struct {
	// Name is not allowed to change; it is read only to reject a change.
	Name    *string           `json:"name,omitempty"`
	Tools   []ServerToolRef   `json:"tools,omitempty"`
	Options map[string]string `json:"options,omitempty"`
}

// Meta is the body of GET /meta.
type Meta struct {
	Version int         `json:"version"`
	Agents  []AgentInfo `json:"agents"`
}
