package mcp_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/secops-agent/investigator/tools"
	"github.com/secops-agent/investigator/tools/mcp"
	"github.com/secops-agent/investigator/tools/mcp/mcptest"
)

func TestMain(m *testing.M) {
	mcptest.ServeIfAsked() // this binary is also the stdio test server
	os.Exit(m.Run())
}

func httpServer(t *testing.T, hostile bool) (string, *mcptest.Log) {
	log := &mcptest.Log{}
	srv := mcptest.Stranger(log, hostile)
	ts := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil))
	t.Cleanup(ts.Close)
	return ts.URL, log
}

func connect(t *testing.T, yaml string) (*tools.Registry, *mcp.Servers) {
	t.Helper()
	cfg, err := mcp.Parse([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	reg, err := tools.NewRegistry(tools.NewAskUser())
	if err != nil {
		t.Fatal(err)
	}
	s := mcp.New(cfg, reg, slog.New(slog.DiscardHandler))
	s.Connect(context.Background())
	t.Cleanup(s.Close)
	return reg, s
}

// Over streamable HTTP: the stranger's tools are offered as server.tool
// with their schemas, the unannotated one acts, hostile names and schemas
// are skipped with a reason, a call reaches the server and a tool error is
// a rejection the model reads.
func TestHTTPServer(t *testing.T) {
	url, log := httpServer(t, true)
	reg, servers := connect(t, "servers:\n  ext:\n    url: "+url+"\n    timeout: 5s\n    rate: 50\n    read_only: [asset_owner_lookup]\n")
	st := servers.Statuses()
	if len(st) != 1 || st[0].State != mcp.StateConnected || st[0].Tools != 2 || st[0].Skipped != 4 {
		t.Fatalf("statuses = %+v, want ext connected with 2 tools and 4 skipped", st)
	}
	byName := map[string]toolsStatus{}
	for _, s := range reg.Statuses() {
		byName[strings.ReplaceAll(s.Name, `"`, "")] = toolsStatus{s.Enabled, s.Acts, s.Reason}
	}
	if s := byName["ext.asset_owner_lookup"]; !s.enabled || s.acts {
		t.Errorf("ext.asset_owner_lookup = %+v, want enabled, read-only", s)
	}
	if s := byName["ext.quarantine_endpoint"]; !s.enabled || !s.acts {
		t.Errorf("ext.quarantine_endpoint = %+v, want enabled and acting (no annotations)", s)
	}
	for name, why := range map[string]string{"ext.uses_ref": "$ref", "ext.deep": "deeper", "ext.steals_ref_id": "ref_id"} {
		if s := byName[name]; s.enabled || !strings.Contains(s.reason, why) {
			t.Errorf("%s = %+v, want skipped because of %s", name, s, why)
		}
	}
	for name, s := range byName {
		if s.enabled && strings.ContainsAny(name, "\x1b /") || strings.Contains(name, "\x1b") {
			t.Errorf("a hostile name reached the registry: %q", name)
		}
	}
	tl := reg.Tools()
	var decl *string
	for _, x := range tl {
		if x.Name == "ext.quarantine_endpoint" {
			if !x.Acts || x.Declared == nil {
				t.Fatalf("tool = %+v, want recorded declaration and acts", x)
			}
			s := string(x.Declared.Parameters)
			decl = &s
		}
	}
	if decl == nil || !strings.Contains(*decl, `"target"`) || !strings.Contains(*decl, `"required":["target"]`) {
		t.Errorf("recorded parameters = %v", decl)
	}
	if !strings.Contains(reg.Catalog(), "`ext.quarantine_endpoint`: a tool of the MCP server ext that ACTS") {
		t.Errorf("catalog:\n%s", reg.Catalog())
	}
	tool, _ := reg.Lookup("ext.asset_owner_lookup")
	out, err := tool.Call(context.Background(), map[string]any{"target": "10.0.0.5"})
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(out)
	if !strings.Contains(string(raw), "10.0.0.5 is owned by team-blue") {
		t.Errorf("result = %s", raw)
	}
	if _, err := tool.Call(context.Background(), map[string]any{"target": "fail"}); !tools.IsRejection(err) || !strings.Contains(err.Error(), "no such asset") {
		t.Errorf("tool error = %v, want a rejection with the server's text", err)
	}
	if calls := log.Snapshot(); len(calls) != 2 || calls[0].Args["target"] != "10.0.0.5" {
		t.Errorf("server saw %+v", calls)
	}
}

type toolsStatus struct {
	enabled, acts bool
	reason        string
}

// Over stdio: the worker runs the server, passing only the variables the
// configuration names; a server that exits is reconnected on the next
// call; a server that cannot start is failed, with why.
func TestStdioServer(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	logFile := filepath.Join(t.TempDir(), "calls.jsonl")
	t.Setenv("STRANGER_LOG", logFile)
	reg, servers := connect(t, "servers:\n  stranger:\n    command: "+exe+"\n    env: {"+mcptest.ServeEnv+": STRANGER_LOG}\n    tools: [quarantine_endpoint, not_there]\n    approval: {quarantine_endpoint: required}\n"+
		"  broken:\n    command: /nonexistent/server\n")
	st := servers.Statuses()
	if st[0].Name != "broken" || st[0].State != mcp.StateFailed || !strings.Contains(st[0].Error, "/nonexistent/server") {
		t.Errorf("broken = %+v, want failed with why", st[0])
	}
	if st[1].State != mcp.StateConnected || st[1].Tools != 1 {
		t.Fatalf("stranger = %+v, want connected with the one allowed tool", st[1])
	}
	if names := reg.Names(); strings.Join(names, ",") != "ask_user,stranger.quarantine_endpoint" {
		t.Errorf("names = %v", names)
	}
	if !strings.Contains(statusReason(reg, "stranger.not_there"), "does not list it") {
		t.Errorf("not_there: %q", statusReason(reg, "stranger.not_there"))
	}
	tool, _ := reg.Lookup("stranger.quarantine_endpoint")
	if _, err := tool.Call(context.Background(), map[string]any{"target": "web-1"}); err != nil {
		t.Fatal(err)
	}
	calls, err := mcptest.ReadLog(logFile)
	if err != nil || len(calls) != 1 || calls[0].Args["target"] != "web-1" {
		t.Fatalf("calls = %+v, %v", calls, err)
	}
}

func statusReason(reg *tools.Registry, name string) string {
	for _, s := range reg.Statuses() {
		if s.Name == name {
			return s.Reason
		}
	}
	return ""
}

func TestConfigErrors(t *testing.T) {
	for yaml, want := range map[string]string{
		"servers: {}":                                      "names no server",
		"servers:\n  Bad.Name: {command: x}":               "must be 1 to 24",
		"servers:\n  a: {}":                                "needs a command",
		"servers:\n  a: {command: x, url: http://h}":       "both",
		"servers:\n  a: {url: ftp://h}":                    "http://",
		"servers:\n  a: {command: x, env: {K: 'a b'}}":     "worker's variable",
		"servers:\n  a: {command: x, approval: {t: none}}": "must be",
		"servers:\n  a: {command: x, timeout: 1h}":         "timeout",
		"servers:\n  a: {command: x, tokens: 3}":           `line 2: unknown field "tokens"`,
	} {
		if _, err := mcp.Parse([]byte(yaml)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: err = %v, want %q", yaml, err, want)
		}
	}
}

// TestConfigErrorsAreOneLineWithoutValues: a value in the wrong place is
// said by its line, not quoted (it may be the start of a pasted secret);
// the errors are one line; a file with no document at all is said empty.
func TestConfigErrorsAreOneLineWithoutValues(t *testing.T) {
	for yaml, want := range map[string]string{
		"servers:\n  a: {command: x, timeout: sk-live-0123456789}\n  b: {command: x, bogus: 1}\n": `the MCP configuration is not valid YAML for its schema: line 2: a !!str value where time.Duration belongs; line 3: unknown field "bogus"`,
		"":                "the MCP configuration is empty: it names no server (servers: {name: {command: ...} or {url: ...}})",
		"# nothing yet\n": "the MCP configuration is empty: it names no server (servers: {name: {command: ...} or {url: ...}})",
	} {
		_, err := mcp.Parse([]byte(yaml))
		if err == nil || err.Error() != want {
			t.Errorf("%q: err = %v, want %q", yaml, err, want)
		}
	}
}

func TestFunctionName(t *testing.T) {
	for in, want := range map[string]string{
		"lookup_host": "s.lookup_host", "get ip": "s.get_ip", "a/b-c:d": "s.a_b-c:d",
		"\x1b[31m": "", "": "", "日本語": "", strings.Repeat("x", 70): "",
	} {
		got, ok := mcp.FunctionName("s", in)
		if got != want || ok != (want != "") {
			t.Errorf("FunctionName(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
}

// A tool the operator names in alert_text (a SIEM's alert search) returns
// alerts' text, which whoever sends an alert writes: the verdict weighs it
// as the alert (tools.Registry.ReturnsAlertText); the server's other tools
// stay findings, and every worker of a queue must agree on it.
func TestAlertTextToolsAreNamedByTheOperator(t *testing.T) {
	url, _ := httpServer(t, false)
	yaml := "servers:\n  ext:\n    url: " + url + "\n    alert_text: [asset_owner_lookup]\n"
	reg, _ := connect(t, yaml)
	if !reg.ReturnsAlertText("ext.asset_owner_lookup") {
		t.Error("ext.asset_owner_lookup is named in alert_text but does not weigh as alerts' text")
	}
	if reg.ReturnsAlertText("ext.quarantine_endpoint") {
		t.Error("ext.quarantine_endpoint weighs as alerts' text though alert_text does not name it")
	}
	cfg, err := mcp.Parse([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	plain, err := mcp.Parse([]byte("servers:\n  ext:\n    url: " + url + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(cfg.Fingerprint())
	b, _ := json.Marshal(plain.Fingerprint())
	if string(a) == string(b) || !strings.Contains(string(a), "asset_owner_lookup") {
		t.Errorf("alert_text is not in the fingerprint: %s", a)
	}
}
