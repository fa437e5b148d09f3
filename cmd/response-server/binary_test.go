package main

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

var (
	binDir   string
	buildBin = sync.OnceValues(func() (string, error) {
		var err error
		if binDir, err = os.MkdirTemp("", "response-server-test-"); err != nil {
			return "", err
		}
		bin := filepath.Join(binDir, "response-server")
		out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
		if err != nil {
			return "", errors.New(string(out))
		}
		return bin, nil
	})
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// binary builds the real command once for the tests that run it.
func binary(t *testing.T) string {
	t.Helper()
	bin, err := buildBin()
	if err != nil {
		t.Fatalf("build response-server: %v", err)
	}
	return bin
}

func inventoryPath(t *testing.T) string {
	t.Helper()
	p, err := filepath.Abs(shippedInventory)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// exercise runs the read tools and an idempotent block over any transport.
func exercise(t *testing.T, cs *mcp.ClientSession, dir string) {
	t.Helper()
	tools, err := cs.ListTools(t.Context(), nil)
	if err != nil || len(tools.Tools) != 4 {
		t.Fatalf("tools/list: %v, %v", tools, err)
	}
	if out := mustOK(t, cs, "lookup_host", map[string]any{"host": "i-0abc1234def567890"}); out["found"] != true {
		t.Errorf("lookup_host: %v", out)
	}
	if out := mustOK(t, cs, "block_ip", map[string]any{"ip": "198.51.100.23", "reason": "SSH brute force"}); out["status"] != "blocked" {
		t.Errorf("block_ip: %v", out)
	}
	if out := mustOK(t, cs, "block_ip", map[string]any{"ip": "198.51.100.23", "reason": "again"}); out["status"] != "already_blocked" {
		t.Errorf("block_ip again: %v", out)
	}
	mustRefuse(t, cs, "block_ip", map[string]any{"ip": "127.0.0.1", "reason": "x"}, "--allow-private")
	mustRefuse(t, cs, "disable_user", map[string]any{"user": "a\nb", "reason": "x"}, "letters, digits")
	out := mustOK(t, cs, "list_blocked", nil)
	if out["blocked_ips_total"] != 1.0 {
		t.Errorf("list_blocked: %v", out)
	}
	lines := readLines(t, filepath.Join(dir, blockedFile))
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "198.51.100.23\t") || !strings.HasSuffix(lines[0], "\tSSH brute force") {
		t.Errorf("%s: %q", blockedFile, lines)
	}
}

func TestBinaryOverStdio(t *testing.T) {
	bin := binary(t)
	dir := t.TempDir()
	var stderr bytes.Buffer
	cmd := exec.Command(bin, "--inventory", inventoryPath(t), "--state-dir", dir)
	cmd.Stderr, cmd.Env = &stderr, cleanEnv()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(t.Context(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	exercise(t, cs, dir)
	// Closing standard input ends the server.
	if err := cs.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	if cmd.ProcessState == nil || !cmd.ProcessState.Success() {
		t.Errorf("the server did not exit cleanly: %v\n%s", cmd.ProcessState, stderr.String())
	}
	if !strings.Contains(stderr.String(), `msg="blocked IP"`) {
		t.Errorf("no action logged on stderr: %s", stderr.String())
	}
}

// httpServer is the binary serving streamable HTTP.
type httpServer struct {
	cmd      *exec.Cmd
	endpoint string
	exited   chan error
	mu       sync.Mutex
	stderr   bytes.Buffer // after the first line
}

func (h *httpServer) log() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.stderr.String()
}

// startHTTP starts the binary with --http on a free loopback port and reads
// the address it prints first.
func startHTTP(t *testing.T, dir string, env ...string) *httpServer {
	t.Helper()
	h := &httpServer{exited: make(chan error, 1)}
	h.cmd = exec.Command(binary(t), "--http", "127.0.0.1:0", "--inventory", inventoryPath(t), "--state-dir", dir)
	h.cmd.Env = append(cleanEnv(), env...)
	stderr, err := h.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := h.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if h.cmd.ProcessState == nil {
			_ = h.cmd.Process.Kill()
			<-h.exited
		}
	})
	first := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		if sc.Scan() {
			first <- sc.Text()
		}
		close(first)
		for sc.Scan() {
			h.mu.Lock()
			h.stderr.WriteString(sc.Text() + "\n")
			h.mu.Unlock()
		}
		h.exited <- h.cmd.Wait()
	}()
	select {
	case line := <-first:
		const prefix = "response-server: serving MCP at "
		if !strings.HasPrefix(line, prefix) || !strings.HasSuffix(line, "/mcp") {
			t.Fatalf("first line on stderr: %q", line)
		}
		h.endpoint = strings.TrimPrefix(line, prefix)
	case <-time.After(time.Minute): // a guard against a hang, not a measured limit
		t.Fatal("the server did not say where it listens")
	}
	return h
}

// cleanEnv is the test's environment without the server's own variables.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "RESPONSE_SERVER_") {
			env = append(env, kv)
		}
	}
	return env
}

// post sends a raw tools/list and returns the status.
func post(t *testing.T, endpoint, host, auth string) int {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, endpoint, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	if host != "" {
		req.Host = host
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

func TestBinaryOverStreamableHTTP(t *testing.T) {
	dir := t.TempDir()
	h := startHTTP(t, dir)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: h.endpoint}, nil)
	if err != nil {
		t.Fatal(err)
	}
	exercise(t, cs, dir)

	// A page another site loads in the analyst's browser (DNS rebinding)
	// must not reach the tools.
	if code := post(t, h.endpoint, "attacker.example", ""); code != http.StatusForbidden {
		t.Errorf("a foreign Host header got %d", code)
	}

	// SIGTERM with a session (and its event stream) still open stops it cleanly.
	if err := h.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-h.exited:
		if err != nil {
			t.Errorf("exit after SIGTERM: %v\n%s", err, h.log())
		}
		if !strings.Contains(h.log(), "response-server: stopped") {
			t.Errorf("stderr after SIGTERM: %s", h.log())
		}
	case <-time.After(time.Minute): // a guard against a hang, not a measured limit
		t.Fatal("the server did not stop after SIGTERM")
	}
	_ = cs.Close()
}

// bearer adds an Authorization header to every request.
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

func TestBinaryOverHTTPWithAToken(t *testing.T) {
	dir := t.TempDir()
	const token = "s3cret-test-token"
	h := startHTTP(t, dir, "RESPONSE_SERVER_TOKEN="+token)
	for _, auth := range []string{"", "Bearer wrong", "Bearer " + token + "x", token} {
		if code := post(t, h.endpoint, "", auth); code != http.StatusUnauthorized {
			t.Errorf("Authorization %q got %d", auth, code)
		}
	}
	transport := &mcp.StreamableClientTransport{Endpoint: h.endpoint, HTTPClient: &http.Client{Transport: bearer{token}}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(t.Context(), transport, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	exercise(t, cs, dir)
	if strings.Contains(h.log(), token) {
		t.Errorf("the token is in the server's log: %s", h.log())
	}
}

func TestBinaryRefusesABadStart(t *testing.T) {
	bin := binary(t)
	bad := filepath.Join(t.TempDir(), "inventory.json")
	if err := os.WriteFile(bad, []byte(`{"hosts":[{"hostname":"a","ips":["300.1.1.1"]}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, args := range map[string][]string{
		"missing inventory":  {"--inventory", filepath.Join(t.TempDir(), "none.json")},
		"invalid inventory":  {"--inventory", bad},
		"unusable address":   {"--inventory", inventoryPath(t), "--http", "256.0.0.1:1"},
		"open without token": {"--inventory", inventoryPath(t), "--http", "0.0.0.0:0"},
	} {
		var stdout, stderr bytes.Buffer
		cmd := exec.Command(bin, append(args, "--state-dir", t.TempDir())...)
		cmd.Stdout, cmd.Stderr, cmd.Env = &stdout, &stderr, cleanEnv()
		err := cmd.Run()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 1 {
			t.Errorf("%s: exit %v", name, err)
		}
		if msg := stderr.String(); !strings.HasPrefix(msg, "Error: ") || strings.Count(msg, "\n") != 1 {
			t.Errorf("%s: stderr is not one sentence: %q", name, msg)
		}
		if stdout.Len() != 0 {
			t.Errorf("%s: wrote to stdout: %q", name, stdout.String())
		}
	}
}
