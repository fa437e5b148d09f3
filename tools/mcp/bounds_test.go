package mcp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/secops-agent/investigator/tools/mcp"
)

// bigServer lists n read-only tools whose schemas have props array
// properties without items: under 8 KiB as sent, they grow in conversion
// (a default items schema each, the property ordering).
func bigServer(t *testing.T, n, props int) string {
	t.Helper()
	srv := sdk.NewServer(&sdk.Implementation{Name: "big", Version: "1"}, nil)
	for i := range n {
		p := map[string]any{}
		for j := range props {
			p[fmt.Sprintf("p%02d_%s", j, strings.Repeat("x", 38))] = map[string]any{"type": "array", "description": strings.Repeat("d", 60)}
		}
		schema := map[string]any{"type": "object", "properties": p}
		if raw, _ := json.Marshal(schema); len(raw) > 8<<10 {
			t.Fatalf("the schema as sent is %d bytes, over the 8 KiB the client checks first", len(raw))
		}
		srv.AddTool(&sdk.Tool{Name: fmt.Sprintf("t%02d", i), Description: strings.Repeat("w ", 500),
			Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}, InputSchema: schema},
			func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
				return &sdk.CallToolResult{}, nil
			})
	}
	ts := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil))
	t.Cleanup(ts.Close)
	return ts.URL
}

// A schema under 8 KiB as sent that converts to more is skipped, saying so:
// the bound holds for what is recorded.
func TestConvertedSchemaIsBounded(t *testing.T) {
	reg, servers := connect(t, "servers:\n  big:\n    url: "+bigServer(t, 2, 58)+"\n")
	if st := servers.Statuses()[0]; st.State != mcp.StateConnected || st.Tools != 0 || st.Skipped != 2 {
		t.Fatalf("status = %+v, want connected with both tools skipped", st)
	}
	if why := statusReason(reg, `big."t00"`); !strings.Contains(why, "once converted") {
		t.Errorf("big.t00: %q, want skipped for its converted size", why)
	}
}

// Servers each within every per-server bound do not together make the
// recorded tool list (a plan's output, the state, the continue-as-new
// input, a direct answer's turn input) larger than 256 KiB: the tools past
// it are skipped, each saying how many of its server's are left out, and
// counted in the server's status.
func TestRecordedToolsAreBoundedAcrossServers(t *testing.T) {
	a, b := bigServer(t, 64, 30), bigServer(t, 64, 30)
	reg, servers := connect(t, "servers:\n  one:\n    url: "+a+"\n  two:\n    url: "+b+"\n")
	raw, _ := json.Marshal(reg.Tools())
	if len(raw) > 256<<10 {
		t.Fatalf("the recorded tools are %d bytes, over 256 KiB", len(raw))
	}
	offered, skipped := 0, 0
	for _, st := range servers.Statuses() {
		if st.State != mcp.StateConnected {
			t.Fatalf("status = %+v, want connected", st)
		}
		offered, skipped = offered+st.Tools, skipped+st.Skipped
	}
	if offered < 20 || offered+skipped != 128 {
		t.Fatalf("offered %d, skipped %d; want the tools that fit offered and the rest of the 128 skipped", offered, skipped)
	}
	found := false
	for _, st := range reg.Statuses() {
		if !st.Enabled && strings.Contains(st.Reason, "left out for the cap") && strings.Contains(st.Reason, "tools are left out") {
			found = true
		}
	}
	if !found {
		t.Errorf("no skipped tool says why: %+v", reg.Statuses())
	}
	t.Logf("%d bytes recorded: %d tools offered, %d skipped", len(raw), offered, skipped)
}

// Identically configured workers offer the same tools, whichever server
// connects first and whether another failed: each server's share of the
// 256 KiB is fixed by the configuration (an equal share for each server
// configured), never taken from or given back by another. A plan made on
// one worker so never records a tool another left out.
func TestAdmissionIsDeterministic(t *testing.T) {
	a, b := bigServer(t, 64, 30), bigServer(t, 64, 30)
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()
	offered := func(reg *mcp.Servers, name string) int {
		for _, st := range reg.Statuses() {
			if st.Name == name {
				return st.Tools
			}
		}
		return -1
	}
	var counts []int
	for range 3 {
		_, both := connect(t, "servers:\n  one:\n    url: "+a+"\n  two:\n    url: "+b+"\n")
		counts = append(counts, offered(both, "one"), offered(both, "two"))
	}
	_, failed := connect(t, "servers:\n  one:\n    url: "+a+"\n  two:\n    url: "+down.URL+"\n")
	if st := failed.Statuses()[1]; st.State != mcp.StateFailed {
		t.Fatalf("status = %+v, want failed", st)
	}
	counts = append(counts, offered(failed, "one"))
	for _, n := range counts {
		if n != counts[0] || n == 0 || n == 64 {
			t.Fatalf("tools offered by identical servers on identical workers: %v; want one count, the same share each", counts)
		}
	}
	reg, _ := connect(t, "servers:\n  one:\n    url: "+a+"\n  two:\n    url: "+down.URL+"\n")
	if why := statusReason(reg, "one.t63"); !strings.Contains(why, "left out for the cap") || !strings.Contains(why, "128 KiB for each of the 2 servers") {
		t.Errorf("one.t63: %q, want left out for the cap", why)
	}
}
