// Package mcp offers the tools of Model Context Protocol servers to the
// investigation: the configuration file (which servers, how to reach them,
// which tools, how fast and how long), the client that connects with the
// official Go SDK and lists each server's tools at start and on reconnect,
// and each tool as a tools.Tool named "<server>.<tool>". It knows nothing of
// Temporal: the CallTool activity runs its calls like any other tool's.
package mcp

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/secops-agent/investigator/internal/smallfile"
	"github.com/secops-agent/investigator/internal/yamltext"
)

// Config is the MCP configuration file (--mcp-config, MCP_CONFIG).
//
//	servers:
//	  response:
//	    command: bin/response-server
//	    args: [--state-dir, .data/response]
//	    env: {RESPONSE_TOKEN: RESPONSE_TOKEN}   # variable in the server: variable in the worker
//	    tools: [lookup_host, block_ip]          # optional allow list
//	    timeout: 30s                            # one call's limit
//	    rate: 2                                 # calls per second (0: no limit)
//	    approval: {lookup_host: required}       # per tool; actions always need one
//	    read_only: [search_hosts]               # the tools the team vouches only read: no approval
//	  siem:
//	    url: https://siem.example.com/mcp
//	    alert_text: [search_findings]           # tools whose results are alerts' own text
//	  intel:
//	    url: https://mcp.example.com/mcp
//	    headers: {Authorization: INTEL_MCP_AUTH} # header: variable holding its value
type Config struct {
	Servers map[string]Server `yaml:"servers"`
	// Dir is the file's directory: a stdio server runs there, and a
	// relative command is found from there ("" for Parse: the worker's).
	Dir string `yaml:"-"`
}

// Server is one MCP server: a command the worker runs (stdio) or a
// streamable-HTTP URL. Secrets are never written here: env and headers name
// the worker's environment variables that hold them (a URL with a user name
// or password is refused).
type Server struct {
	Command string            `yaml:"command"`
	Args    []string          `yaml:"args"`
	Env     map[string]string `yaml:"env"`
	URL     string            `yaml:"url"`
	Headers map[string]string `yaml:"headers"`
	// Tools is the allow list; empty offers every tool the server lists.
	Tools []string `yaml:"tools"`
	// Timeout bounds one call (default DefaultTimeout).
	Timeout time.Duration `yaml:"timeout"`
	// Rate is the most calls per second this worker makes to the server
	// (0: no limit).
	Rate float64 `yaml:"rate"`
	// Approval marks tools whose calls wait for the analyst's approval
	// whatever their annotations say ("required").
	Approval map[string]string `yaml:"approval"`
	// ReadOnly names the tools the team vouches only read: the only way a
	// tool's calls skip the analyst's approval (a server's readOnlyHint is
	// shown, never obeyed). A tool the server itself marks destructive
	// still waits. Tools are named one by one, so a tool a new server
	// version adds waits until the team names it.
	ReadOnly []string `yaml:"read_only"`
	// AlertText names tools whose results are alerts' text (a SIEM's alert
	// search), which whoever can send an alert writes: a verdict weighs
	// what they show as the alert's own words, never as a tool's finding.
	AlertText []string `yaml:"alert_text"`
	// dir is the configuration file's directory (Config.Dir).
	dir string
}

// DefaultTimeout bounds one call when the configuration does not.
const DefaultTimeout = 60 * time.Second

// MaxTimeout is the longest per-call timeout accepted: the activity's own
// attempt timeout is derived from it.
const MaxTimeout = 110 * time.Second

// ApprovalRequired is the one value Server.Approval takes.
const ApprovalRequired = "required"

// serverName is what a server may be called: it becomes the prefix of its
// tools' function names, which Gemini restricts.
var serverName = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,23}$`)

// Transport says how the server is reached.
func (s Server) Transport() string {
	if s.URL != "" {
		return "http"
	}
	return "stdio"
}

// Load reads and checks an MCP configuration file. Unknown keys are errors,
// so a misspelt setting is not silently ignored.
func Load(path string) (*Config, error) {
	raw, err := smallfile.Read(path, smallfile.DefaultMax)
	if err != nil {
		return nil, fmt.Errorf("cannot read the MCP configuration %s: %w", path, err)
	}
	c, err := Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if c.Dir, err = filepath.Abs(filepath.Dir(path)); err != nil {
		return nil, err
	}
	return c, nil
}

// Parse checks an MCP configuration.
func Parse(raw []byte) (*Config, error) {
	var c Config
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		if errors.Is(err, io.EOF) { // no document at all
			return nil, errors.New("the MCP configuration is empty: it names no server (servers: {name: {command: ...} or {url: ...}})")
		}
		return nil, fmt.Errorf("the MCP configuration is not valid YAML for its schema: %s", yamltext.Error(err))
	}
	if len(c.Servers) == 0 {
		return nil, errors.New("the MCP configuration names no server (servers: {name: {command: ...} or {url: ...}})")
	}
	if len(c.Servers) > maxServers {
		return nil, fmt.Errorf("the MCP configuration names %d servers; at most %d are supported", len(c.Servers), maxServers)
	}
	for _, name := range c.Names() {
		if err := c.Servers[name].check(name); err != nil {
			return nil, err
		}
	}
	return &c, nil
}

const maxServers = 16

// Names returns the server names, sorted.
func (c *Config) Names() []string {
	out := make([]string, 0, len(c.Servers))
	for n := range c.Servers {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

func (s Server) check(name string) error {
	switch {
	case !serverName.MatchString(name):
		return fmt.Errorf("MCP server name %q must be 1 to 24 lower-case letters, digits, _ or -, starting with a letter (it prefixes its tools' names)", name)
	case s.Command == "" && s.URL == "":
		return fmt.Errorf("MCP server %s needs a command (stdio) or a url (streamable HTTP)", name)
	case s.Command != "" && s.URL != "":
		return fmt.Errorf("MCP server %s has both a command and a url; give one", name)
	case s.URL != "" && (len(s.Args) > 0 || len(s.Env) > 0):
		return fmt.Errorf("MCP server %s: args and env are for a command; an HTTP server takes headers", name)
	case s.Command != "" && len(s.Headers) > 0:
		return fmt.Errorf("MCP server %s: headers are for a url; a command takes env", name)
	case s.Timeout < 0 || s.Timeout > MaxTimeout:
		return fmt.Errorf("MCP server %s: timeout must be between 0 (default %s) and %s", name, DefaultTimeout, MaxTimeout)
	case s.Rate < 0:
		return fmt.Errorf("MCP server %s: rate must not be negative", name)
	}
	if s.URL != "" {
		u, err := url.Parse(s.URL)
		switch {
		case err != nil || !regexp.MustCompile(`^https?://[^\s]+$`).MatchString(s.URL) || u.Host == "":
			return fmt.Errorf("MCP server %s: url must be an http:// or https:// URL", name)
		case u.User != nil:
			// Errors quote the URL (status, log, history): a credential in
			// it would travel with them.
			return fmt.Errorf("MCP server %s: the url holds a user name or password; credentials belong in headers, which name the worker's variable holding them", name)
		case u.Fragment != "" || strings.HasSuffix(s.URL, "#"):
			return fmt.Errorf("MCP server %s: the url has a #fragment, which is never sent to the server; remove it", name)
		}
	}
	for tool, v := range s.Approval {
		if v != ApprovalRequired {
			return fmt.Errorf("MCP server %s: approval of %s must be %q (actions always wait for approval)", name, tool, ApprovalRequired)
		}
	}
	for _, tool := range s.ReadOnly {
		if s.Approval[tool] == ApprovalRequired {
			return fmt.Errorf("MCP server %s: %s is both read_only and approval: required", name, tool)
		}
	}
	for k, v := range s.Env {
		if !envName.MatchString(k) || !envName.MatchString(v) {
			return fmt.Errorf("MCP server %s: env maps a variable name to the worker's variable that holds its value (%q: %q is not)", name, k, v)
		}
	}
	for k, v := range s.Headers {
		if k == "" || !envName.MatchString(v) {
			return fmt.Errorf("MCP server %s: headers map a header to the worker's variable that holds its value (%q: %q is not)", name, k, v)
		}
	}
	return nil
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// timeout is the server's per-call limit.
func (s Server) timeout() time.Duration {
	if s.Timeout == 0 {
		return DefaultTimeout
	}
	return s.Timeout
}

// Fingerprint describes the configuration for the worker's settings
// fingerprint: what every worker of a queue must agree on, with no secret
// (variable names only): where each server is (a URL without its query,
// which may hold a key; a command and its arguments as written), what
// decides that a tool acts (approval, read_only), whose results are
// alerts' text, and its limits.
func (c *Config) Fingerprint() map[string]any {
	out := map[string]any{}
	for _, n := range c.Names() {
		s := c.Servers[n]
		fp := map[string]any{"transport": s.Transport(), "tools": s.Tools, "approval": s.Approval, "timeout": s.timeout().String(),
			"read_only": s.ReadOnly, "alert_text": s.AlertText, "rate": s.Rate}
		if s.URL != "" {
			u, _ := url.Parse(s.URL) // checked by Parse
			fp["url"] = u.Scheme + "://" + strings.ToLower(u.Host) + u.Path
		} else {
			fp["command"] = append([]string{s.Command}, s.Args...)
		}
		out[n] = fp
	}
	return out
}
