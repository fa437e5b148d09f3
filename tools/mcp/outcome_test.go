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
// action reports. So may an acting tool that reported an error or whose
// handler failed (an internal error): it ran, and may have acted before it
// failed (arguments its SDK found invalid are such an error too). A
// request the server refused unread (a tool it no longer has) did nothing, and a reading tool's error is a plain rejection.
func TestCallOutcomes(t *testing.T) {
	srv := sdk.NewServer(&sdk.Implementation{Name: "acts", Version: "1"}, nil)
	add := func(name string, ann *sdk.ToolAnnotations, h sdk.ToolHandler) {
		srv.AddTool(&sdk.Tool{Name: name, Annotations: ann, InputSchema: map[string]any{"type": "object"}}, h)
	}
	reads := &sdk.ToolAnnotations{ReadOnlyHint: true}
	add("slow", nil, func(ctx context.Context, _ *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		select {
		case <-ctx.Done():
		case <-time.After(5 * time.Second):
		}
		return &sdk.CallToolResult{}, nil
	})
	failed := func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return nil, errors.New("blocking failed after the firewall rule was written")
	}
	reported := func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: "no such address"}}}, nil
	}
	add("fail", nil, failed)
	add("report", nil, reported)
	add("read_fail", reads, failed)
	add("read_report", reads, reported)
	add("gone", nil, reported)
	ts := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil))
	t.Cleanup(ts.Close)
	reg, _ := connect(t, "servers:\n  ext:\n    url: "+ts.URL+"\n    timeout: 1s\n    read_only: [read_fail, read_report]\n")
	srv.RemoveTools("gone") // listed, then gone: the server refuses the call unread
	for _, c := range []struct {
		name    string
		args    map[string]any
		unknown bool
	}{
		{"slow", nil, true},
		{"fail", nil, true},
		{"report", nil, true},
		{"read_fail", nil, false},
		{"read_report", nil, false},
		{"gone", nil, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			tool, ok := reg.Lookup("ext." + c.name)
			if !ok {
				t.Fatalf("tools: %v", reg.Statuses())
			}
			_, err := tool.Call(context.Background(), c.args)
			t.Logf("error: %v", err)
			if !tools.IsRejection(err) || tools.OutcomeUnknown(err) != c.unknown {
				t.Fatalf("error = %v (outcome unknown: %v), want a rejection whose outcome unknown is %v", err, tools.OutcomeUnknown(err), c.unknown)
			}
		})
	}
}
