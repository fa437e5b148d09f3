package mcp_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/secops-agent/investigator/tools"
	"github.com/secops-agent/investigator/tools/mcp"
)

// A stdio server for these tests, run by this test binary when
// LIVENESS_SERVE is set: "hold" waits until cancelled; "big" answers with
// LIVENESS_BIG bytes of text.
func init() {
	if os.Getenv("LIVENESS_SERVE") == "" {
		return
	}
	s := sdk.NewServer(&sdk.Implementation{Name: "live", Version: "1"}, nil)
	obj := map[string]any{"type": "object"}
	s.AddTool(&sdk.Tool{Name: "hold", InputSchema: obj}, func(ctx context.Context, _ *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		<-ctx.Done()
		return &sdk.CallToolResult{}, nil
	})
	s.AddTool(&sdk.Tool{Name: "big", InputSchema: obj}, func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		n := 0
		_ = json.Unmarshal([]byte(os.Getenv("LIVENESS_BIG")), &n)
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: strings.Repeat("a", n)}}}, nil
	})
	s.AddTool(&sdk.Tool{Name: "ping", InputSchema: obj}, func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "pong"}}}, nil
	})
	_ = s.Run(context.Background(), &sdk.StdioTransport{})
	os.Exit(0)
}

func stdioServer(t *testing.T) (*tools.Registry, *mcp.Servers) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("LIVENESS_ON", "1")
	if os.Getenv("LIVENESS_BIG") == "" {
		t.Setenv("LIVENESS_BIG", "0")
	}
	return connect(t, "servers:\n  live:\n    command: "+exe+"\n    env: {LIVENESS_SERVE: LIVENESS_ON, LIVENESS_BIG: LIVENESS_BIG}\n    read_only: [hold, big, ping]\n")
}

// wedgeable is an HTTP MCP server that, once wedged, reads each request
// and never answers it (a deadlocked process); open counts the requests
// it holds.
func wedgeable(t *testing.T) (url string, wedged *atomic.Bool, open *atomic.Int32) {
	srv := sdk.NewServer(&sdk.Implementation{Name: "x", Version: "1"}, nil)
	srv.AddTool(&sdk.Tool{Name: "read", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "ok"}}}, nil
		})
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil)
	wedged, open = &atomic.Bool{}, &atomic.Int32{}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !wedged.Load() {
			h.ServeHTTP(w, r)
			return
		}
		open.Add(1)
		defer open.Add(-1)
		_, _ = io.Copy(io.Discard, r.Body) // so that Go notices the client leaving
		select {
		case <-r.Context().Done():
		case <-time.After(20 * time.Second):
		}
	}))
	t.Cleanup(ts.Close)
	return ts.URL, wedged, open
}

// A server that stops answering is dropped once a call times out and a
// ping goes unanswered: it is no longer "connected", Watch connects it
// again, and the abandoned requests are closed, not left open at the
// server.
func TestAServerThatStopsAnsweringIsDropped(t *testing.T) {
	url, wedged, open := wedgeable(t)
	reg, servers := connect(t, "servers:\n  ext:\n    url: "+url+"\n    timeout: 500ms\n    read_only: [read]\n")
	tool, ok := reg.Lookup("ext.read")
	if !ok {
		t.Fatalf("statuses %+v", servers.Statuses())
	}
	wedged.Store(true)
	if _, err := tool.Call(context.Background(), nil); !tools.IsRejection(err) {
		t.Fatalf("a call to the wedged server: %v, want the timeout's rejection", err)
	}
	deadline := time.Now().Add(3 * time.Second)
	for servers.Statuses()[0].State == mcp.StateConnected && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	st := servers.Statuses()[0]
	if st.State == mcp.StateConnected || !strings.Contains(st.Error, "nor a ping") {
		t.Fatalf("after a timed-out call and an unanswered ping the server is %q (%s): nothing would reconnect it", st.State, st.Error)
	}
	// The call's request ended with it; the cancellation notice, which the
	// SDK gives 5 s, and the session's DELETE end with the session.
	for deadline := time.Now().Add(2 * time.Second); open.Load() > 0 && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	if n := open.Load(); n > 0 {
		t.Errorf("%d requests still open at the server", n)
	}

	// It answers again: Watch connects it again.
	old := mcp.RetryEvery
	mcp.RetryEvery = 50 * time.Millisecond
	t.Cleanup(func() { mcp.RetryEvery = old })
	wedged.Store(false)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go servers.Watch(ctx)
	for deadline := time.Now().Add(5 * time.Second); servers.Statuses()[0].State != mcp.StateConnected && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := tool.Call(context.Background(), nil); err != nil {
		t.Fatalf("after the reconnect: %v (status %+v)", err, servers.Statuses()[0])
	}
}

// Statuses (starter tools, mcpMissing) answer at once while a server is
// being connected, and a call waiting for that connect gives up with its
// own context.
func TestStatusesDoNotWaitForAConnect(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		select { // never answers the initialize
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	}))
	t.Cleanup(ts.Close)
	cfg, err := mcp.Parse([]byte("servers:\n  ext:\n    url: " + ts.URL + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	reg, _ := tools.NewRegistry()
	s := mcp.New(cfg, reg, slog.New(slog.DiscardHandler))
	t.Cleanup(s.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	go s.Connect(ctx)
	time.Sleep(200 * time.Millisecond)
	start := time.Now()
	st := s.Statuses()
	if took := time.Since(start); took > 100*time.Millisecond || st[0].State != mcp.StateConnecting {
		t.Fatalf("Statuses took %v and says %q: it waited for the dial", took.Round(10*time.Millisecond), st[0].State)
	}
}

// A caller that gives up (a stop, a budget) abandons its own call only:
// the session other calls share stays, and so does the stdio process.
func TestACallersCancellationKeepsTheSession(t *testing.T) {
	reg, servers := stdioServer(t)
	hold, ok := reg.Lookup("live.hold")
	if !ok {
		t.Fatalf("statuses %+v", servers.Statuses())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := hold.Call(ctx, nil); err == nil || tools.IsRejection(err) {
		t.Fatalf("a cancelled call: %v, want a plain error", err)
	}
	time.Sleep(100 * time.Millisecond)
	if st := servers.Statuses()[0]; st.State != mcp.StateConnected {
		t.Fatalf("a caller's cancellation dropped the shared session: %q (%s)", st.State, st.Error)
	}
}

// A stdio answer over 8 MiB is refused as an HTTP one is: a rejection of
// unknown outcome (the server ran the call), never retried, whether the
// SDK's own 16 MiB frame bound would have taken it or not.
func TestStdioAnswersOver8MiBAreRefused(t *testing.T) {
	for _, size := range []int{9 << 20, 17 << 20} {
		t.Setenv("LIVENESS_BIG", strings.TrimSpace(string(must(json.Marshal(size)))))
		reg, servers := stdioServer(t)
		servers.Stderr = io.Discard
		big, ok := reg.Lookup("live.big")
		if !ok {
			t.Fatalf("statuses %+v", servers.Statuses())
		}
		out, err := big.Call(context.Background(), nil)
		if !tools.IsRejection(err) || !tools.OutcomeUnknown(err) || !strings.Contains(err.Error(), "more than 8 MiB") {
			got := 0
			if m, ok := out.(map[string]any); ok {
				s, _ := m["content"].(string)
				got = len(s)
			}
			t.Fatalf("%d MiB over stdio: err %v, %d bytes read; want the 8 MiB refusal", size>>20, err, got)
		}
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// Only the team's configuration waives an action's approval: a server
// that marks its disable_user readOnlyHint (a new or buggy version) still
// has each call wait for the analyst, and the catalog shows what the
// server claimed.
func TestServerAnnotationsNeverWaiveApproval(t *testing.T) {
	srv := sdk.NewServer(&sdk.Implementation{Name: "x", Version: "1"}, nil)
	for _, name := range []string{"disable_user", "search"} {
		srv.AddTool(&sdk.Tool{Name: name, Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}, InputSchema: map[string]any{"type": "object"}},
			func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
				return &sdk.CallToolResult{}, nil
			})
	}
	ts := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil))
	t.Cleanup(ts.Close)
	reg, _ := connect(t, "servers:\n  ext:\n    url: "+ts.URL+"\n    read_only: [search]\n")
	acts := map[string]bool{}
	for _, st := range reg.Statuses() {
		acts[st.Name] = st.Acts
		if st.Name == "ext.disable_user" && !strings.Contains(st.Description, "server marks it read-only") {
			t.Errorf("the catalog does not show what the server claimed: %s", st.Description)
		}
	}
	if !acts["ext.disable_user"] {
		t.Error("ext.disable_user is offered as read-only on the server's word alone: its calls skip the approval")
	}
	if acts["ext.search"] {
		t.Error("ext.search, which the configuration names read_only, waits for approval")
	}
}

// Every setting that changes whether a tool acts or where a server is
// reached is in the worker fingerprint, so workers that disagree are
// found at start; a URL's query (which may hold a key) is not.
func TestFingerprintHoldsWhatDecidesActions(t *testing.T) {
	base := "servers:\n  ext:\n    url: https://a.example/mcp?key=s3cr3t-value\n"
	fp := func(yaml string) string {
		cfg, err := mcp.Parse([]byte(yaml))
		if err != nil {
			t.Fatal(err)
		}
		return string(must(json.Marshal(cfg.Fingerprint())))
	}
	plain := fp(base)
	if strings.Contains(plain, "s3cr3t") {
		t.Errorf("the fingerprint holds the URL's query: %s", plain)
	}
	for _, other := range []string{
		base + "    read_only: [search]\n",
		base + "    rate: 2\n",
		base + "    alert_text: [search]\n",
		strings.Replace(base, "a.example", "b.example", 1),
		"servers:\n  ext:\n    command: bin/x\n",
	} {
		if fp(other) == plain {
			t.Errorf("the fingerprint does not tell apart:\n%s", other)
		}
	}
	if fp("servers:\n  ext:\n    command: bin/x\n    args: [a]\n") == fp("servers:\n  ext:\n    command: bin/x\n    args: [b]\n") {
		t.Error("the fingerprint does not hold a command's arguments")
	}
}
