package workflows

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/genai"

	"github.com/secops-agent/investigator/activities"
	"github.com/secops-agent/investigator/internal/clip"
	"github.com/secops-agent/investigator/internal/modeltest"
	"github.com/secops-agent/investigator/investigation"
	"github.com/secops-agent/investigator/plan"
	"github.com/secops-agent/investigator/toolcall"
	"github.com/secops-agent/investigator/tools"
)

// actingTool is an MCP tool that acts (response.block_ip): it records the
// arguments of every call that reached it.
type actingTool struct {
	mu  sync.Mutex
	ran []map[string]any
}

func (t *actingTool) Declaration() *genai.FunctionDeclaration {
	return &genai.FunctionDeclaration{Name: "response.block_ip", Description: "blocks an IP"}
}
func (t *actingTool) Purpose() string { return "blocks an IP" }
func (t *actingTool) Call(_ context.Context, args map[string]any) (any, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.ran = append(t.ran, args)
	return map[string]any{"blocked": args["ip"]}, nil
}
func (t *actingTool) Recorded() toolcall.Declared {
	return toolcall.Declared{Description: "blocks an IP"}
}
func (t *actingTool) Acts() bool { return true }

func (t *actingTool) calls() []map[string]any {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.ran
}

// onRealTools runs the workflow's tool calls through the real CallTool,
// on a worker whose MCP server offers the acting tool.
func (h *harness) onRealTools(t *testing.T) (*actingTool, *activities.Activities) {
	act := &actingTool{}
	reg, err := tools.NewRegistry(tools.NewAskUser(), act)
	require.NoError(t, err)
	worker := &activities.Activities{Model: &activities.Model{Transcript: modeltest.NewTranscript()}, Tools: reg}
	h.onTool(func(in activities.ToolInput) (activities.ToolOutput, error) {
		return worker.CallTool(context.Background(), in)
	})
	return act, worker
}

// The attack: the plan recorded no MCP tool (the server was down when it
// was made, or the plan ran on a worker without it), and text in the alert
// steers the model to call the acting tool anyway. The server is connected
// now, but the call does not run: nothing approved it.
func TestUnrecordedActingToolDoesNotRun(t *testing.T) {
	h := newHarness(t)
	h.onPlan(activities.PlanOutput{Tools: toolNames, Plan: plan.Plan{Objective: "o", Steps: []plan.Step{
		// The step names the tool (so its turns were offered it), but the
		// plan recorded no declaration for it: CallTool's guard refuses it.
		{ID: "step_1", Description: "look", Tools: []string{"search_alerts", "response.block_ip"}, Expected: "x", Status: plan.Pending}}}, Usage: investigation.Usage{Calls: 1}}, nil)
	h.onTurn(func(in activities.TurnInput) (activities.TurnOutput, error) {
		if len(in.Transcript) == 0 {
			return activities.TurnOutput{Calls: []toolcall.Call{{ID: "c1", Name: "response.block_ip", Args: map[string]any{"ip": "10.0.0.1"}}}}, nil
		}
		return activities.TurnOutput{Text: "done"}, nil
	})
	act, _ := h.onRealTools(t)
	h.onReflect(noChange)
	res, err := h.run(t, investigation.Input{AlertID: "a1"})
	require.NoError(t, err)
	require.Empty(t, act.calls(), "the acting tool ran without the analyst's approval")
	require.Empty(t, res.Actions)
	var results []string
	for _, e := range h.events(t) {
		if e.Kind == investigation.EventToolResult {
			results = append(results, e.Text)
		}
	}
	require.Len(t, results, 1)
	require.Contains(t, results[0], "the plan did not offer it")
}

// The attack: the action's argument hides a second address behind 2 KiB
// of spaces, past what the analyst is shown. It does not run, and no
// approval is asked: the model reads why.
func TestActionArgsTooLongToShowDoNotRun(t *testing.T) {
	h := newHarness(t)
	h.onPlan(mcpPlan(), nil)
	long := "198.51.100.23" + strings.Repeat(" ", 2100) + "10.0.0.1"
	h.onTurn(func(in activities.TurnInput) (activities.TurnOutput, error) {
		if len(in.Transcript) == 0 {
			return activities.TurnOutput{Calls: []toolcall.Call{{ID: "c2", Name: "response.block_ip", Args: map[string]any{"ip": long}}}}, nil
		}
		return activities.TurnOutput{Text: "done"}, nil
	})
	act, _ := h.onRealTools(t)
	h.onReflect(noChange)
	h.update(time.Minute, investigation.UpdateApproveCall, investigation.CallDecision{})
	res, err := h.run(t, investigation.Input{AlertID: "a1"})
	require.NoError(t, err)
	require.Empty(t, act.calls(), "arguments the analyst could not see whole ran")
	require.Empty(t, h.tools, "no activity was scheduled")
	require.Empty(t, res.Actions, "no approval was asked")
	require.Contains(t, h.turns[1].Transcript[1].Error, "too long for the analyst to see whole")
}

// An ask_user question is bounded in state and in its event: the model
// writes it, possibly from the alert's text.
func TestAskUserQuestionIsBounded(t *testing.T) {
	h := newHarness(t)
	h.onPlan(twoStepPlan(), nil)
	long := "Is deploy allowed? " + strings.Repeat("x", 100<<10)
	h.onTurn(func(in activities.TurnInput) (activities.TurnOutput, error) {
		if in.Step.ID == "step_1" && len(in.Transcript) == 0 {
			return activities.TurnOutput{Calls: []toolcall.Call{{ID: "c1", Name: "ask_user", Args: map[string]any{"question": long}}}}, nil
		}
		return activities.TurnOutput{Text: "ok"}, nil
	})
	h.onTool(okTool)
	h.onReflect(noChange)
	var st investigation.Status
	h.env.RegisterDelayedCallback(func() { st = h.status(t) }, time.Minute)
	_, err := h.run(t, investigation.Input{AlertID: "a1", Limits: investigation.Limits{AnswerTimeout: investigation.Duration(10 * time.Minute)}})
	require.NoError(t, err)
	require.Len(t, st.Questions, 1)
	q := st.Questions[0].Question
	require.LessOrEqual(t, len(q), 2<<10)
	require.True(t, strings.HasPrefix(q, "Is deploy allowed? xxx") && clip.Clipped(q), "%.80q", q)
	for _, e := range h.events(t) {
		if e.Kind == investigation.EventQuestion {
			require.Equal(t, q, e.Text)
		}
	}
}

// The approval binds to the arguments the analyst saw: the approved call
// runs with them, and the same input with other arguments does not.
func TestApprovalBindsTheArgsShown(t *testing.T) {
	h := newHarness(t)
	h.onPlan(mcpPlan(), nil)
	h.onTurn(func(in activities.TurnInput) (activities.TurnOutput, error) {
		if len(in.Transcript) == 0 {
			return activities.TurnOutput{Calls: []toolcall.Call{{ID: "c1", Name: "response.block_ip", Args: map[string]any{"ip": "198.51.100.23", toolcall.RefIDArg: "b"}}}}, nil
		}
		return activities.TurnOutput{Text: "done"}, nil
	})
	act, worker := h.onRealTools(t)
	h.onReflect(noChange)
	h.update(time.Minute, investigation.UpdateApproveCall, investigation.CallDecision{CallID: "t1-step_1-i1-c1"})
	res, err := h.run(t, investigation.Input{AlertID: "a1"})
	require.NoError(t, err)
	require.Len(t, res.Actions, 1)
	require.Equal(t, `{"ip":"198.51.100.23"}`, res.Actions[0].Args)
	require.Equal(t, []map[string]any{{"ip": "198.51.100.23"}}, act.calls())
	require.Len(t, h.tools, 1)
	in := h.tools[0]
	require.True(t, in.Recorded)
	require.Equal(t, activities.Approval(res.Actions[0].Args), in.Approved)

	in.Key, in.Call.Args = "t1-step_1-i1-c1-again", map[string]any{"ip": "10.0.0.1"}
	out, err := worker.CallTool(context.Background(), in)
	require.NoError(t, err)
	require.False(t, out.OK)
	require.Contains(t, out.Error, "not the ones the analyst approved")
	require.Len(t, act.calls(), 1, "the changed arguments did not run")
}
