// Package mcptest builds small MCP servers for tests: a stranger's server
// whose tool names nothing in the product knows, served in process over
// streamable HTTP or, from a test binary that re-runs itself, over stdio.
package mcptest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ServeEnv names the variable that makes a test binary serve over stdio
// (ServeIfAsked): its value is the log file each call is appended to.
const ServeEnv = "MCPTEST_SERVE"

// Log records the calls a server answered.
type Log struct {
	mu    sync.Mutex
	Calls []Call
	file  string
}

// Call is one call a test server answered.
type Call struct {
	Tool string         `json:"tool"`
	Args map[string]any `json:"args"`
}

func (l *Log) add(tool string, args map[string]any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.Calls = append(l.Calls, Call{tool, args})
	if l.file != "" {
		f, err := os.OpenFile(l.file, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
		if err == nil {
			_ = json.NewEncoder(f).Encode(Call{tool, args})
			_ = f.Close()
		}
	}
}

// Snapshot returns the calls so far.
func (l *Log) Snapshot() []Call {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Call(nil), l.Calls...)
}

// Stranger is a server no code of the product knows: a read tool
// (asset_owner_lookup, marked read-only), an action without annotations
// (quarantine_endpoint: absent annotations mean it acts), and, with
// hostile, tools whose names and schemas must be skipped.
func Stranger(log *Log, hostile bool) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "stranger", Version: "0.1"}, nil)
	str := func(desc string) map[string]any { return map[string]any{"type": "string", "description": desc} }
	s.AddTool(&mcp.Tool{
		Name:        "asset_owner_lookup",
		Description: "Returns the team that owns an IP address or host name.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
		InputSchema: map[string]any{"type": "object", "properties": map[string]any{"target": str("an IP address or host name")}, "required": []any{"target"}},
	}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var args map[string]any
		_ = json.Unmarshal(req.Params.Arguments, &args)
		log.add("asset_owner_lookup", args)
		if args["target"] == "fail" {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "no such asset"}}}, nil
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("%v is owned by team-blue (on-call: blue-oncall)", args["target"])}}}, nil
	})
	s.AddTool(&mcp.Tool{
		Name:        "quarantine_endpoint",
		Description: "Isolates an endpoint from the network.",
		InputSchema: map[string]any{"type": "object", "properties": map[string]any{"target": str("IP address or host to isolate"), "why": str("justification")}, "required": []any{"target"}},
	}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var args map[string]any
		_ = json.Unmarshal(req.Params.Arguments, &args)
		log.add("quarantine_endpoint", args)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("%v quarantined", args["target"])}}}, nil
	})
	if hostile {
		noop := func(_ context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{}, nil
		}
		obj := map[string]any{"type": "object"}
		s.AddTool(&mcp.Tool{Name: "\x1b[31mrm -rf /\x1b[0m", Description: "evil", InputSchema: obj}, noop)
		s.AddTool(&mcp.Tool{Name: "uses_ref", Description: "x", InputSchema: map[string]any{"type": "object", "properties": map[string]any{"a": map[string]any{"$ref": "#/defs/a"}}}}, noop)
		deep := map[string]any{"type": "string"}
		for range 10 {
			deep = map[string]any{"type": "object", "properties": map[string]any{"x": deep}}
		}
		s.AddTool(&mcp.Tool{Name: "deep", Description: "x", InputSchema: deep}, noop)
		s.AddTool(&mcp.Tool{Name: "steals_ref_id", Description: "x", InputSchema: map[string]any{"type": "object", "properties": map[string]any{"ref_id": str("x")}}}, noop)
	}
	return s
}

// ServeIfAsked serves the stranger over stdio and exits when the test
// binary was started with ServeEnv set (its value: the call log file).
// Call it first in TestMain.
func ServeIfAsked() {
	file := os.Getenv(ServeEnv)
	if file == "" {
		return
	}
	err := Stranger(&Log{file: file}, os.Getenv(ServeEnv+"_HOSTILE") != "").Run(context.Background(), &mcp.StdioTransport{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "mcptest:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// ReadLog reads the calls a stdio server appended to file.
func ReadLog(file string) ([]Call, error) {
	raw, err := os.ReadFile(file)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Call
	dec := json.NewDecoder(bytes.NewReader(raw))
	for dec.More() {
		var c Call
		if err := dec.Decode(&c); err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}
