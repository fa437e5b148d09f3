package mcp_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/secops-agent/investigator/tools"
)

// A call the server did not answer in time may have acted: its rejection
// says the outcome is unknown (tools.OutcomeUnknown), which an approved
// action reports. A call the server refused, or whose tool reported an
// error, did nothing: a plain rejection.
func TestCallOutcomes(t *testing.T) {
	srv := sdk.NewServer(&sdk.Implementation{Name: "acts", Version: "1"}, nil)
	add := func(name string, h sdk.ToolHandler) {
		srv.AddTool(&sdk.Tool{Name: name, InputSchema: map[string]any{"type": "object"}}, h)
	}
	add("slow", func(ctx context.Context, _ *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		select {
		case <-ctx.Done():
		case <-time.After(5 * time.Second):
		}
		return &sdk.CallToolResult{}, nil
	})
	add("refuse", func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return nil, errors.New("blocking is not allowed for this address")
	})
	add("fail", func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: "no such address"}}}, nil
	})
	ts := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil))
	t.Cleanup(ts.Close)
	reg, _ := connect(t, "servers:\n  ext:\n    url: "+ts.URL+"\n    timeout: 1s\n")
	for name, unknown := range map[string]bool{"slow": true, "refuse": false, "fail": false} {
		t.Run(name, func(t *testing.T) {
			tool, ok := reg.Lookup("ext." + name)
			if !ok {
				t.Fatalf("tools: %v", reg.Statuses())
			}
			_, err := tool.Call(context.Background(), nil)
			t.Logf("error: %v", err)
			if !tools.IsRejection(err) || tools.OutcomeUnknown(err) != unknown {
				t.Fatalf("error = %v (outcome unknown: %v), want a rejection whose outcome unknown is %v", err, tools.OutcomeUnknown(err), unknown)
			}
		})
	}
}
