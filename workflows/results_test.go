package workflows

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/workflow"

	"github.com/secops-agent/investigator/activities"
	"github.com/secops-agent/investigator/investigation"
	"github.com/secops-agent/investigator/plan"
)

// finding is a step's answer, told apart from every other by its key.
func finding(key string) string {
	return "finding of " + key + ": " + strings.Repeat("x", 1000)
}

// carriedJSON is the continue-as-new input as history holds it.
func carriedJSON(t *testing.T, can *workflow.ContinueAsNewError) string {
	t.Helper()
	var b strings.Builder
	for _, p := range can.Input.GetPayloads() {
		b.Write(p.Data)
	}
	return b.String()
}

// Each step's result is held once in state, so in the continue-as-new
// input: the exchange's plan holds it, the active plan only its key; a
// follow-up that continues the plan still shows the results it builds on.
func TestStepResultsAreHeldOnce(t *testing.T) {
	h := newHarness(t)
	h.env.OnActivity(a.GeneratePlan, mock.Anything, mock.Anything).Return(func(_ context.Context, in activities.PlanInput) (activities.PlanOutput, error) {
		out := twoStepPlan()
		if in.ActivePlan != nil {
			out.Continues = true
			out.Plan.Steps = []plan.Step{{ID: "step_3", Description: "Check the bastion", Tools: []string{"search_alerts"}, DependsOn: []string{"step_1"}, Status: plan.Pending}}
		}
		return out, nil
	})
	h.env.OnActivity(a.DecideMode, mock.Anything, mock.Anything).Return(activities.Mode{Mode: investigation.ModePlan}, nil)
	h.onTurn(func(in activities.TurnInput) (activities.TurnOutput, error) {
		return activities.TurnOutput{Text: finding(in.Key)}, nil
	})
	h.onReflect(noChange)
	h.update(time.Minute, investigation.UpdateAsk, "Did deploy log in to the bastion too?")
	var st investigation.Status
	h.env.RegisterDelayedCallback(func() { st = h.status(t) }, 90*time.Second)
	h.env.RegisterDelayedCallback(func() { h.env.SetCurrentHistoryLength(100) }, 2*time.Minute)
	h.update(2*time.Minute+time.Second, investigation.UpdateAsk, "Anything else?")
	h.env.ExecuteWorkflow(investigation.WorkflowName, investigation.Input{AlertID: "a1", Question: "Q1", Limits: investigation.Limits{MaxHistoryEvents: 60}})
	require.True(t, h.env.IsWorkflowCompleted())
	var can *workflow.ContinueAsNewError
	require.True(t, errors.As(h.env.GetWorkflowError(), &can), "the run continues as new: %v", h.env.GetWorkflowError())

	keys := []string{"t1-step_1-i1", "t1-step_2-i1", "t2-step_3-i1"}
	raw := carriedJSON(t, can)
	t.Logf("REPORT continue-as-new input of three 1 KB step results: %d bytes", len(raw))
	for _, k := range keys {
		require.Equal(t, 1, strings.Count(raw, "finding of "+k), "the continue-as-new input holds the result of %s once", k)
	}
	next := carriedState(t, can)
	require.Len(t, next.ActivePlan.Steps, 3)
	for i, s := range next.Plan.Steps {
		require.Equal(t, keys[i], s.ResultKey)
		require.NotEmpty(t, s.Result, "the exchange's plan keeps the results")
		require.Equal(t, keys[i], next.ActivePlan.Steps[i].ResultKey, "the active plan keeps the keys")
	}
	require.Len(t, st.Plan.Steps, 3)
	for i, s := range st.Plan.Steps {
		require.Equal(t, finding(keys[i]), s.Result, "the status shows every result of the continued plan")
	}
	for _, e := range h.events(t) {
		if e.Kind == investigation.EventPlan && strings.Contains(strings.Join(e.Notes, ";"), "continues the active plan") {
			require.Equal(t, finding(keys[0]), e.Plan.Steps[0].Result, "the continued plan shows what it builds on")
		}
	}
}

// State carried from a run before results were held once has them in both
// plans: the new run keeps them once, and still shows them.
func TestCarriedResultsHeldTwiceAreHeldOnce(t *testing.T) {
	h := newHarness(t)
	h.env.OnActivity(a.DecideMode, mock.Anything, mock.Anything).Return(activities.Mode{Mode: investigation.ModeDirect}, nil)
	h.onTurn(conclusionOnly)
	done := twoStepPlan().Plan
	for i := range done.Steps {
		s := &done.Steps[i]
		s.Status, s.ResultKey = plan.Done, "t1-"+s.ID+"-i1"
		s.Result = finding(s.ResultKey)
	}
	active := done.Clone()
	h.env.SetCurrentHistoryLength(100)
	h.env.ExecuteWorkflow(investigation.WorkflowName, investigation.Input{AlertID: "a1", Question: "Q1", Limits: investigation.Limits{MaxHistoryEvents: 60}},
		&State{Turn: 2, History: []investigation.Message{{Role: "user", Text: "Q1"}, {Role: "assistant", Text: "A1"}},
			Plan: done, ActivePlan: &active, Steering: Steering{FollowUps: []string{"Q2", "Q3"}}})
	require.True(t, h.env.IsWorkflowCompleted())
	var can *workflow.ContinueAsNewError
	require.True(t, errors.As(h.env.GetWorkflowError(), &can), "the run continues as new: %v", h.env.GetWorkflowError())
	require.Equal(t, "Q2", h.turns[0].Question, "the run answered a question first")
	raw := carriedJSON(t, can)
	next := carriedState(t, can)
	for i, s := range done.Steps {
		require.Equal(t, 1, strings.Count(raw, "finding of "+s.ResultKey), "the result of %s is carried once", s.ID)
		require.Equal(t, s.Result, next.Plan.Steps[i].Result)
		require.Equal(t, s.ResultKey, next.ActivePlan.Steps[i].ResultKey)
	}
	p := withResultsFrom(*next.ActivePlan, next.Plan)
	require.Equal(t, done, p, "a plan that continues it gets the results back")
}
