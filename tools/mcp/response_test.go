package mcp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/secops-agent/investigator/tools"
	"github.com/secops-agent/investigator/tools/mcp"
)

// buildResponseServer builds the example response server (cmd/response-server).
func buildResponseServer(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "response-server")
	out, err := exec.Command("go", "build", "-o", bin, "../../cmd/response-server").CombinedOutput()
	if err != nil {
		t.Fatalf("build the response server: %v\n%s", err, out)
	}
	return bin
}

// checkResponse checks the response server's tools as the worker offers
// them: the read tools read, the actions act, and block_ip writes its file.
func checkResponse(t *testing.T, reg *tools.Registry, servers *mcp.Servers, stateDir string) {
	t.Helper()
	if st := servers.Statuses(); st[0].State != mcp.StateConnected || st[0].Tools != 4 {
		t.Fatalf("statuses = %+v, want connected with 4 tools", st)
	}
	acts := map[string]bool{}
	for _, tl := range reg.Tools() {
		acts[tl.Name] = tl.Acts
	}
	want := map[string]bool{"response.lookup_host": false, "response.list_blocked": false, "response.block_ip": true, "response.disable_user": true}
	for n, a := range want {
		if got, ok := acts[n]; !ok || got != a {
			t.Errorf("%s: offered %v, acts %v; want acts %v", n, ok, got, a)
		}
	}
	lookup, _ := reg.Lookup("response.lookup_host")
	out, err := lookup.Call(context.Background(), map[string]any{"host": "web-server-prod-01"})
	raw, _ := json.Marshal(out)
	if err != nil || !strings.Contains(string(raw), "web-platform") {
		t.Errorf("lookup_host = %s, %v", raw, err)
	}
	block, _ := reg.Lookup("response.block_ip")
	if _, err := block.Call(context.Background(), map[string]any{"ip": "198.51.100.23", "reason": "test"}); err != nil {
		t.Fatal(err)
	}
	file, err := os.ReadFile(filepath.Join(stateDir, "blocked-ips.txt"))
	if err != nil || !strings.Contains(string(file), "198.51.100.23") {
		t.Errorf("blocked-ips.txt = %q, %v", file, err)
	}
	if _, err := block.Call(context.Background(), map[string]any{"ip": "not an ip", "reason": "test"}); !tools.IsRejection(err) {
		t.Errorf("a bad IP: err = %v, want a rejection the model reads", err)
	}
}

// The example response server over stdio, as examples/mcp/mcp.yaml runs it
// for the local stack: a relative command from the file's directory.
func TestResponseServerStdio(t *testing.T) {
	bin := buildResponseServer(t)
	dir := t.TempDir()
	inv, err := filepath.Abs("../../examples/mcp/inventory.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(bin, filepath.Join(dir, "response-server")); err != nil {
		t.Fatal(err)
	}
	cfgFile := filepath.Join(dir, "mcp.yaml")
	cfg := fmt.Sprintf("servers:\n  response:\n    command: ./response-server\n    args: [--inventory, %s, --state-dir, state]\n    read_only: [lookup_host, list_blocked]\n", inv)
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := mcp.Load(cfgFile)
	if err != nil {
		t.Fatal(err)
	}
	reg, _ := tools.NewRegistry()
	servers := mcp.New(c, reg, slog.New(slog.DiscardHandler))
	servers.Connect(context.Background())
	t.Cleanup(servers.Close)
	checkResponse(t, reg, servers, filepath.Join(dir, "state"))
}

// The example response server over streamable HTTP.
func TestResponseServerHTTP(t *testing.T) {
	bin := buildResponseServer(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	state := t.TempDir()
	cmd := exec.Command(bin, "--http", addr, "--inventory", "../../examples/mcp/inventory.json", "--state-dir", state)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			break
		}
	}
	reg, servers := connect(t, "servers:\n  response:\n    url: http://"+addr+"/mcp\n    read_only: [lookup_host, list_blocked]\n")
	checkResponse(t, reg, servers, state)
}
