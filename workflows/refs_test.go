package workflows

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/workflow"
	"google.golang.org/genai"

	"github.com/secops-agent/investigator/activities"
	"github.com/secops-agent/investigator/activities/bigquery"
	"github.com/secops-agent/investigator/internal/modeltest"
	"github.com/secops-agent/investigator/investigation"
	"github.com/secops-agent/investigator/plan"
	"github.com/secops-agent/investigator/toolcall"
	"github.com/secops-agent/investigator/tools"
)

// echoNamed is a tool of the given name that returns its arguments.
type echoNamed struct{ name string }

func (e echoNamed) Purpose() string { return "test tool" }
func (e echoNamed) Declaration() *genai.FunctionDeclaration {
	return &genai.FunctionDeclaration{Name: e.name}
}
func (e echoNamed) Call(_ context.Context, args map[string]any) (any, error) {
	return map[string]any{"got": args}, nil
}

// askThenUse asks the analyst (c1) and, in the same turn, calls get_alert
// with the answer (ref:c1.answer).
func askThenUse(in activities.TurnInput) (activities.TurnOutput, error) {
	if in.Step.ID == "step_1" && len(in.Transcript) == 0 {
		return activities.TurnOutput{Calls: []toolcall.Call{
			{ID: "c1", Name: "ask_user", Args: map[string]any{"question": "Which host?"}},
			{ID: "c2", Name: "get_alert", Args: map[string]any{"id": "ref:c1.answer"}},
		}}, nil
	}
	return activities.TurnOutput{Text: "ok"}, nil
}

// secondTurn is the first turn of step that saw tool results.
func secondTurn(t *testing.T, h *harness, step string) activities.TurnInput {
	t.Helper()
	for _, in := range h.turns {
		if in.Step.ID == step && len(in.Transcript) > 0 {
			return in
		}
	}
	t.Fatalf("no second turn of %s", step)
	return activities.TurnInput{}
}

// A ref to the analyst's answer, which has no transcript key (the workflow
// keeps it inline), reaches the tool as the answer: CallTool gets it in
// InlineRefs, never as a ref to the empty key, which no store holds.
func TestRefToAnAnswerUsesTheAnswer(t *testing.T) {
	h := newHarness(t)
	h.onPlan(twoStepPlan(), nil)
	h.onTurn(askThenUse)
	reg, err := tools.NewRegistry(echoNamed{"get_alert"})
	require.NoError(t, err)
	store := modeltest.NewTranscript()
	worker := &activities.Activities{Model: &activities.Model{Transcript: store}, Tools: reg}
	h.onTool(func(in activities.ToolInput) (activities.ToolOutput, error) {
		return worker.CallTool(context.Background(), in)
	})
	h.onReflect(noChange)
	h.update(2*time.Minute, investigation.UpdateAnswer, investigation.Answer{Text: "web-01"})
	_, err = h.run(t, investigation.Input{AlertID: "a1", Limits: investigation.Limits{AnswerTimeout: investigation.Duration(10 * time.Minute)}})
	require.NoError(t, err)
	require.Len(t, h.tools, 1)
	require.Empty(t, h.tools[0].Refs, "no ref to a key")
	require.Equal(t, map[string]string{"c1": `{"answer":"web-01"}`}, h.tools[0].InlineRefs)
	require.Empty(t, secondTurn(t, h, "step_1").Transcript[2].Error)
	require.JSONEq(t, `{"got":{"id":"web-01"}}`, store.M[h.tools[0].Session+"/"+h.tools[0].Key].Response)
}

// So does a ref to an action that did not run (its outcome is inline too).
func TestRefToAnExpiredActionUsesItsOutcome(t *testing.T) {
	h := newHarness(t)
	h.onPlan(mcpPlan(), nil)
	h.onTurn(func(in activities.TurnInput) (activities.TurnOutput, error) {
		if len(in.Transcript) == 0 {
			return activities.TurnOutput{Calls: []toolcall.Call{
				{ID: "c1", Name: "response.block_ip", Args: map[string]any{"ip": "198.51.100.23"}},
				{ID: "c2", Name: "response.lookup_host", Args: map[string]any{"host": "web-1", "blocked": "ref:c1.outcome"}},
			}}, nil
		}
		return activities.TurnOutput{Text: "done"}, nil
	})
	h.onTool(okTool)
	h.onReflect(noChange)
	_, err := h.run(t, investigation.Input{AlertID: "a1", Limits: investigation.Limits{ApprovalTimeout: investigation.Duration(time.Hour)}})
	require.NoError(t, err)
	require.Len(t, h.tools, 1)
	require.Equal(t, "response.lookup_host", h.tools[0].Call.Name)
	require.Empty(t, h.tools[0].Refs)
	require.Contains(t, h.tools[0].InlineRefs["c1"], `"outcome":"expired"`)
}

// Inline results a call refers to are bounded together, so its input
// stays bounded: two answers at the bound (8 KiB of '<', each escaped to
// 48 KiB) are more than one call may carry; the call is refused and says so.
func TestInlineRefsAreBounded(t *testing.T) {
	h := newHarness(t)
	h.onPlan(twoStepPlan(), nil)
	h.onTurn(func(in activities.TurnInput) (activities.TurnOutput, error) {
		if in.Step.ID == "step_1" && len(in.Transcript) == 0 {
			return activities.TurnOutput{Calls: []toolcall.Call{
				{ID: "c1", Name: "ask_user", Args: map[string]any{"question": "Which host?"}},
				{ID: "c2", Name: "ask_user", Args: map[string]any{"question": "Which user?"}},
				{ID: "c3", Name: "get_alert", Args: map[string]any{"id": "ref:c1.answer", "user": "ref:c2.answer"}},
			}}, nil
		}
		return activities.TurnOutput{Text: "ok"}, nil
	})
	h.onTool(okTool)
	h.onReflect(noChange)
	long := strings.Repeat("<", maxInputBytes)
	h.update(time.Minute, investigation.UpdateAnswer, investigation.Answer{QuestionID: "q-1", Text: long})
	h.update(2*time.Minute, investigation.UpdateAnswer, investigation.Answer{QuestionID: "q-2", Text: long})
	_, err := h.run(t, investigation.Input{AlertID: "a1", Limits: investigation.Limits{AnswerTimeout: investigation.Duration(10 * time.Minute)}})
	require.NoError(t, err)
	require.Empty(t, h.tools, "the call did not run")
	require.Contains(t, secondTurn(t, h, "step_1").Transcript[3].Error, "the analyst's answers")
}

// A ref in the arguments of a call that is no activity (a question to the
// analyst, the BigQuery sub-agent) would reach them as the literal
// "ref:…": such a call is refused at once, and so is a call that uses its
// result. The model is told to write the value itself.
func TestSpecialToolsRefuseRefs(t *testing.T) {
	h := newHarness(t)
	tools := append([]toolcall.Tool{{Name: "bigquery_agent", Kind: toolcall.ChildWorkflow, Workflow: investigation.BigQueryWorkflowName}}, toolNames...)
	h.onPlan(activities.PlanOutput{Tools: tools, Plan: plan.Plan{Objective: "o", Steps: []plan.Step{
		{ID: "step_1", Description: "ask logs", Tools: []string{"get_alert", "bigquery_agent", "ask_user"}, Status: plan.Pending}}}}, nil)
	h.onTurn(func(in activities.TurnInput) (activities.TurnOutput, error) {
		if len(in.Transcript) == 0 {
			return activities.TurnOutput{Calls: []toolcall.Call{
				{ID: "c1", Name: "get_alert", Args: map[string]any{"id": "a1"}},
				{ID: "c2", Name: "bigquery_agent", Args: map[string]any{"request": "logins from ref:c1.ip", "host": "ref:c1.host"}},
				{ID: "c3", Name: "ask_user", Args: map[string]any{"question": "ref:c1.user"}},
				{ID: "c4", Name: "get_alert", Args: map[string]any{"id": "ref:c2.answer"}},
			}}, nil
		}
		return activities.TurnOutput{Text: "no logs"}, nil
	})
	h.onTool(okTool)
	h.onReflect(noChange)
	var requests []string // what a sub-agent was asked
	h.env.RegisterWorkflowWithOptions(func(ctx workflow.Context, in bigquery.Request) (activities.ToolOutput, error) {
		requests = append(requests, in.Request)
		return activities.ToolOutput{Key: "k-child", OK: true}, nil
	}, workflow.RegisterOptions{Name: investigation.BigQueryWorkflowName})
	_, err := h.run(t, investigation.Input{AlertID: "a1"})
	require.NoError(t, err)
	require.Empty(t, requests, "no sub-agent started")
	require.Len(t, h.tools, 1, "only c1 ran")
	for _, e := range h.events(t) {
		require.NotEqual(t, investigation.EventQuestion, e.Kind, "no question was asked")
	}
	got := h.turns[1].Transcript[1:]
	require.Equal(t, "the call did not run: bigquery_agent takes no ref: arguments (ref:c1.host); call it again with the value written out once the call it comes from has answered", got[1].Error)
	require.Contains(t, got[2].Error, "ask_user takes no ref: arguments (ref:c1.user)")
	require.Contains(t, got[3].Error, "uses the result of c2, which cannot run")
}
