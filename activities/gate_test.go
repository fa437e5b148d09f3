package activities

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/genai"

	"github.com/secops-agent/investigator/internal/modeltest"
	"github.com/secops-agent/investigator/toolcall"
	"github.com/secops-agent/investigator/tools"
)

// outsideTool is an MCP tool that records the calls that reached it.
type outsideTool struct {
	name string
	acts bool
	ran  int
}

func (t *outsideTool) Declaration() *genai.FunctionDeclaration {
	return &genai.FunctionDeclaration{Name: t.name}
}
func (t *outsideTool) Purpose() string { return "" }
func (t *outsideTool) Call(context.Context, map[string]any) (any, error) {
	t.ran++
	return map[string]any{"done": true}, nil
}
func (t *outsideTool) Recorded() toolcall.Declared { return toolcall.Declared{} }
func (t *outsideTool) Acts() bool                  { return t.acts }

// CallTool runs an outside tool only when the plan recorded it, and one
// that acts only with the analyst's approval of exactly its arguments:
// whatever the workflow sent, the call is refused as a result the model
// reads, and the tool never sees it.
func TestCallToolRunsOnlyApprovedActions(t *testing.T) {
	shown := `{"ip":"198.51.100.23"}`
	args := map[string]any{"ip": "198.51.100.23"}
	for _, c := range []struct {
		name     string
		acts     bool
		args     map[string]any
		recorded bool
		approved string
		refusal  string // "" if it runs
	}{
		{"approved", true, args, true, Approval(shown), ""},
		{"approved, ref_id aside", true, map[string]any{"ip": "198.51.100.23", toolcall.RefIDArg: "b"}, true, Approval(shown), ""},
		{"not approved", true, args, true, "", "the analyst did not approve this call"},
		{"other arguments", true, map[string]any{"ip": "198.51.100.23 10.0.0.1"}, true, Approval(shown), "not the ones the analyst approved"},
		{"another approval's form", true, args, true, shown, "not the ones the analyst approved"},
		{"unrecorded, approved", true, args, false, Approval(shown), "the plan did not offer it"},
		{"reads, unrecorded", false, args, false, "", "the plan did not offer it"},
		{"reads, recorded", false, args, true, "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			tool := &outsideTool{name: "response.block_ip", acts: c.acts}
			reg, err := tools.NewRegistry(tool)
			require.NoError(t, err)
			a := &Activities{Model: &Model{Transcript: modeltest.NewTranscript()}, Tools: reg}
			out, err := a.CallTool(context.Background(), ToolInput{Session: "s", Key: "k", MaxResultBytes: 1000,
				Call: toolcall.Call{ID: "c1", Name: "response.block_ip", Args: c.args}, Recorded: c.recorded, Approved: c.approved})
			require.NoError(t, err)
			if c.refusal == "" {
				require.True(t, out.OK, out.Error)
				require.Equal(t, 1, tool.ran)
				return
			}
			require.False(t, out.OK)
			require.Contains(t, out.Error, c.refusal)
			require.Equal(t, CallRefused, out.Outcome, "the worker's own refusal: the action did not run")
			require.Zero(t, tool.ran)
		})
	}
}

// A dotted name the plan did not record is refused at once, even when
// this worker has no such server (no retry until it connects).
func TestCallToolRefusesUnrecordedMCPName(t *testing.T) {
	reg, err := tools.NewRegistry(tools.NewAskUser())
	require.NoError(t, err)
	a := &Activities{Model: &Model{Transcript: modeltest.NewTranscript()}, Tools: reg, MCP: fakeServers{{Name: "srv", State: "failed"}}}
	out, err := a.CallTool(context.Background(), ToolInput{Session: "s", Key: "k", Call: toolcall.Call{Name: "srv.block"}, MaxResultBytes: 1000})
	require.NoError(t, err)
	require.False(t, out.OK)
	require.Contains(t, out.Error, "srv.block did not run: the plan did not offer it")
}

// slowTool is an approved action whose server never answered.
type slowTool struct{ outsideTool }

func (*slowTool) Call(context.Context, map[string]any) (any, error) {
	return nil, tools.RejectUnknown("the MCP server response did not answer within 30s")
}

// A call that may have reached the tool says so (CallUnknown), for the
// workflow to report the action as of unknown outcome, not as refused.
func TestCallToolSaysWhenTheOutcomeIsUnknown(t *testing.T) {
	shown := `{"ip":"198.51.100.23"}`
	reg, err := tools.NewRegistry(&slowTool{outsideTool{name: "response.block_ip", acts: true}})
	require.NoError(t, err)
	a := &Activities{Model: &Model{Transcript: modeltest.NewTranscript()}, Tools: reg}
	out, err := a.CallTool(context.Background(), ToolInput{Session: "s", Key: "k", MaxResultBytes: 1000, Recorded: true, Approved: Approval(shown),
		Call: toolcall.Call{ID: "c1", Name: "response.block_ip", Args: map[string]any{"ip": "198.51.100.23"}}})
	require.NoError(t, err)
	require.False(t, out.OK)
	require.Equal(t, CallUnknown, out.Outcome)
}
