package activities

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/secops-agent/investigator/internal/modeltest"
	"github.com/secops-agent/investigator/investigation"
	"github.com/secops-agent/investigator/plan"
	"github.com/secops-agent/investigator/toolcall"
	"github.com/secops-agent/investigator/tools"
)

type fakeServers []investigation.MCPServer

func (f fakeServers) Statuses() []investigation.MCPServer { return f }
func (f fakeServers) Configured(name string) bool {
	for _, s := range f {
		if s.Name == name {
			return true
		}
	}
	return false
}

// A step declares an MCP tool from the declaration the plan recorded, even
// when the worker's registry no longer has it (the server changed).
func TestStepDeclaresRecordedMCPTools(t *testing.T) {
	reg, err := tools.NewRegistry(tools.NewAskUser())
	require.NoError(t, err)
	a := &Activities{Tools: reg}
	rec := toolcall.Tool{Name: "srv.lookup", Declared: &toolcall.Declared{Description: "as the plan saw it",
		Parameters: json.RawMessage(`{"type":"OBJECT","properties":{"host":{"type":"STRING"}},"required":["host"]}`)}}
	other := toolcall.Tool{Name: "srv.other", Declared: &toolcall.Declared{Description: "not this step's"}}
	decls, err := a.stepDeclarations(TurnInput{Step: plan.Step{Tools: []string{"srv.lookup"}}, Declared: []toolcall.Tool{rec, other}})
	require.NoError(t, err)
	var names []string
	for _, d := range decls {
		names = append(names, d.Name)
		if d.Name == "srv.lookup" {
			require.Equal(t, "as the plan saw it", d.Description)
			require.Equal(t, []string{"host"}, d.Parameters.Required)
			require.Contains(t, d.Parameters.Properties, toolcall.RefIDArg)
		}
	}
	require.Equal(t, []string{"ask_user", "srv.lookup"}, names)
}

// A call to an MCP tool this worker cannot run fails with one sentence:
// non-retryable when the server is not configured here or no longer lists
// the tool, retried when the server is configured but not connected now.
func TestMCPToolMissing(t *testing.T) {
	reg, err := tools.NewRegistry(tools.NewAskUser())
	require.NoError(t, err)
	a := &Activities{Model: &Model{Transcript: modeltest.NewTranscript()}, Tools: reg}
	call := func() error {
		_, err := a.CallTool(context.Background(), ToolInput{Session: "s", Key: "k", Call: toolcall.Call{Name: "srv.lookup"}, MaxResultBytes: 1000, Recorded: true})
		return err
	}
	var app *temporal.ApplicationError
	err = call()
	require.True(t, errors.As(err, &app) && app.NonRetryable() && app.Type() == ErrMCPToolMissing, "%v", err)
	require.Contains(t, err.Error(), `this worker has no MCP server "srv" configured`)

	a.MCP = fakeServers{{Name: "srv", State: "failed", Error: "connect: exec: no such file"}}
	err = call()
	require.True(t, errors.As(err, &app) && !app.NonRetryable() && app.Type() == ErrMCPNotConnected, "retried: %v", err)
	require.True(t, strings.Contains(err.Error(), "not connected on this worker"), "%v", err)

	a.MCP = fakeServers{{Name: "srv", State: "connected"}}
	err = call()
	require.True(t, errors.As(err, &app) && app.NonRetryable(), "%v", err)
	require.Contains(t, err.Error(), "no longer offers srv.lookup")
}

// The conclusion ends with every action, written by code; arguments cannot
// format the report.
func TestActionsSection(t *testing.T) {
	s := actionsSection([]investigation.Action{
		{CallID: "t1-step_2-i1-c1", Tool: "response.block_ip", Args: "{\"ip\":\"1.2.3.4`**x**\"}", Step: "step_2", Status: investigation.ActionDenied, Note: "CEO's laptop"},
		{CallID: "t1-step_2-i2-c1", Tool: "response.block_ip", Args: `{"ip":"5.6.7.8"}`, Step: "step_2", Status: investigation.ActionApproved},
	})
	require.Contains(t, s, "## Actions requested")
	require.Contains(t, s, "**denied** (CEO's laptop)")
	require.Contains(t, s, "**approved**")
	require.NotContains(t, s, "4`", "a backtick in the arguments ends no code span")
	require.Empty(t, actionsSection(nil))
}
