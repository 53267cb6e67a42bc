// Package mcp makes the tools of MCP servers (Model Context Protocol) an
// agent's server tools, through the official Go SDK. A server is a stdio
// command aapd starts, or a streamable HTTP endpoint it reaches; its tools
// then follow AAP's trust and permission flow like any other server tool.
package mcp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/aapd/aapd/agents"
)

// ServerConfig says how to reach one MCP server.
type ServerConfig struct {
	// Name labels the server in errors and logs.
	Name string
	// Command is the argv of a stdio server; URL a streamable HTTP endpoint.
	// Exactly one is set.
	Command []string
	// Env adds to the stdio server's environment.
	Env map[string]string
	URL string
	// Headers go with every HTTP request (e.g. Authorization).
	Headers map[string]string
	// ToolPrefix is put before every tool name, to keep the names of two
	// servers apart.
	ToolPrefix string
	// Include, when not empty, lists the server's tools to offer (names
	// before the prefix); the others are left out.
	Include []string
	// Timeout bounds a tool call (DefaultTimeout if zero) and the start.
	Timeout time.Duration
}

// DefaultTimeout bounds tool calls and the connection when a server sets
// no timeout.
const DefaultTimeout = 60 * time.Second

// Server is a connected MCP server. If its connection breaks (the process
// died, the endpoint restarted), the call that found out fails and the next
// call connects again; a call is never sent twice.
type Server struct {
	cfg    ServerConfig
	tools  []agents.Tool
	stderr *tail

	mu      sync.Mutex
	session *sdk.ClientSession
	closed  bool
}

// Connect starts or reaches the server, initializes the session and lists
// its tools. A server that cannot start is reported with its name, the cause
// and, for a command, the end of what it wrote on stderr.
func Connect(ctx context.Context, cfg ServerConfig) (*Server, error) {
	if (len(cfg.Command) == 0) == (cfg.URL == "") {
		return nil, fmt.Errorf("mcp server %q: set exactly one of command and url", cfg.Name)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	s := &Server{cfg: cfg, stderr: &tail{max: 2048}}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	session, err := s.connect(ctx)
	if err != nil {
		return nil, err
	}
	s.session = session
	if s.tools, err = s.listTools(ctx, session); err != nil {
		_ = session.Close()
		return nil, err
	}
	return s, nil
}

// Tools returns the server's tools as agent server tools.
func (s *Server) Tools() []agents.Tool { return s.tools }

// Close ends the session and stops a stdio server's process.
func (s *Server) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	if s.session == nil {
		return nil
	}
	err := s.session.Close()
	s.session = nil
	return err
}

func (s *Server) connect(ctx context.Context) (*sdk.ClientSession, error) {
	var transport sdk.Transport
	if len(s.cfg.Command) > 0 {
		// The process must outlive ctx (the connect deadline): Close stops it.
		cmd := exec.Command(s.cfg.Command[0], s.cfg.Command[1:]...)
		cmd.Env = os.Environ()
		for k, v := range s.cfg.Env {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		cmd.Stderr = s.stderr
		transport = &sdk.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}
	} else {
		transport = &sdk.StreamableClientTransport{
			Endpoint:             s.cfg.URL,
			HTTPClient:           &http.Client{Transport: headerTransport{headers: s.cfg.Headers}},
			MaxRetries:           -1,
			DisableStandaloneSSE: true,
		}
	}
	client := sdk.NewClient(&sdk.Implementation{Name: "aapd", Version: "1"}, nil)
	session, err := client.Connect(ctx, transport, nil)
	if err != nil {
		return nil, s.startError(err)
	}
	return session, nil
}

// startError describes why the server could not be used, with what a
// command said on stderr.
func (s *Server) startError(err error) error {
	msg := fmt.Sprintf("mcp server %q could not be started: %v", s.cfg.Name, err)
	if t := s.stderr.String(); t != "" {
		msg += fmt.Sprintf("; its stderr ends with: %q", t)
	}
	return errors.New(msg)
}

// current returns a live session, connecting again if the last one broke.
func (s *Server) current(ctx context.Context) (*sdk.ClientSession, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, fmt.Errorf("mcp server %q is closed", s.cfg.Name)
	}
	if s.session != nil {
		return s.session, nil
	}
	session, err := s.connect(ctx)
	if err != nil {
		return nil, err
	}
	slog.Info("mcp: reconnected", "server", s.cfg.Name)
	s.session = session
	return session, nil
}

// broken forgets a session whose connection failed, so the next call
// connects again.
func (s *Server) broken(session *sdk.ClientSession) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.session == session {
		_ = session.Close()
		s.session = nil
	}
}

// headerTransport adds the configured headers to every request.
type headerTransport struct{ headers map[string]string }

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h.headers {
		r.Header.Set(k, v)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// tail keeps the last max bytes written to it.
type tail struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = t.b[len(t.b)-t.max:]
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}
