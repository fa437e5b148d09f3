package workflows

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/secops-agent/investigator/activities"
	"github.com/secops-agent/investigator/investigation"
	"github.com/secops-agent/investigator/plan"
	"github.com/secops-agent/investigator/toolcall"
)

// A step whose model turn the model refused (a safety block: the same
// conversation is refused again) answers from what it had and the
// investigation goes on to its conclusion, which reads that answer.
func TestRefusedTurnIsAFailedStepNotAFailedRun(t *testing.T) {
	h := newHarness(t)
	h.onPlan(twoStepPlan(), nil)
	h.onTurn(func(in activities.TurnInput) (activities.TurnOutput, error) {
		if in.Step.ID == "step_1" && len(in.Transcript) == 0 {
			return activities.TurnOutput{Calls: []toolcall.Call{{ID: "c1", Name: "get_alert", Args: map[string]any{"id": "a1"}}}}, nil
		}
		if in.Step.ID == "step_1" {
			return activities.TurnOutput{}, temporal.NewNonRetryableApplicationError("the model refused to answer (SAFETY)", activities.ErrModelRefused, nil)
		}
		return activities.TurnOutput{Text: "no related alerts"}, nil
	})
	h.onTool(okTool)
	h.onReflect(noChange)
	res, err := h.run(t, investigation.Input{AlertID: "a1", Language: "ja"})
	require.NoError(t, err, "a refused step does not fail the investigation")
	require.Equal(t, 2, res.Plan.Count(plan.Done), "step_2 still runs")
	require.Len(t, h.cuts, 1)
	require.Equal(t, "the model refused to answer (SAFETY)", h.cuts[0].Reason)
	require.Equal(t, "ja", h.cuts[0].Language, "the answer's own words follow the analyst's language")
	require.Equal(t, []activities.Ref{{Key: "t1-step_1-i1"}, {Key: "t1-step_1-i1-c1"}}, h.cuts[0].Transcript, "the answer is made from what the step had")
	require.Equal(t, "as it was: the model refused to answer (SAFETY)", res.Plan.Steps[0].Result)
	require.Len(t, h.conclude, 1)
	var noted bool
	for _, e := range h.events(t) {
		noted = noted || e.Kind == investigation.EventNote && e.Step == "step_1" && e.Text == "the model refused to answer (SAFETY)"
	}
	require.True(t, noted, "the progress says why the step has no model answer")
}

// A step whose model turn gave nothing usable three times (activities'
// ErrNoAnswer) ends like a refused one: a failed step the conclusion
// reads, not a failed investigation.
func TestTurnWithNoAnswerIsAFailedStepNotAFailedRun(t *testing.T) {
	h := newHarness(t)
	h.onPlan(twoStepPlan(), nil)
	const why = "the model answered with nothing usable, 3 times"
	h.onTurn(func(in activities.TurnInput) (activities.TurnOutput, error) {
		if in.Step.ID == "step_1" {
			return activities.TurnOutput{}, temporal.NewNonRetryableApplicationError(why, activities.ErrNoAnswer, nil)
		}
		return activities.TurnOutput{Text: "no related alerts"}, nil
	})
	h.onTool(okTool)
	h.onReflect(noChange)
	res, err := h.run(t, investigation.Input{AlertID: "a1"})
	require.NoError(t, err, "a step with no answer does not fail the investigation")
	require.Equal(t, 2, res.Plan.Count(plan.Done), "step_2 still runs")
	require.Len(t, h.cuts, 1)
	require.Equal(t, why, h.cuts[0].Reason)
	require.Len(t, h.conclude, 1)
}

// A model activity that failed for good is charged what its failure says
// it was billed for: a refused step turn to the steps, a failed reflection
// to the reflection, so Spend (and the admission's daily budget) count
// every attempt the provider billed.
func TestFailedModelActivitiesAreCharged(t *testing.T) {
	billed := investigation.Usage{Calls: 3, PromptTokens: 900, ThoughtTokens: 30, Model: "m"}
	h := newHarness(t)
	h.onPlan(twoStepPlan(), nil)
	h.onTurn(func(in activities.TurnInput) (activities.TurnOutput, error) {
		if in.Step.ID == "step_1" {
			return activities.TurnOutput{}, temporal.NewNonRetryableApplicationError("the model refused to answer (SAFETY)", activities.ErrModelRefused, nil, billed)
		}
		return activities.TurnOutput{Text: "no related alerts"}, nil
	})
	h.onTool(okTool)
	h.onReflect(func(activities.ReflectInput) (activities.Reflection, error) {
		return activities.Reflection{}, temporal.NewNonRetryableApplicationError("the model's reflection answer was unusable twice", activities.ErrMalformedOutput, nil, billed)
	})
	res, err := h.run(t, investigation.Input{AlertID: "a1"})
	require.NoError(t, err)
	require.Equal(t, billed.Add(investigation.Usage{Calls: 1}), res.ByPhase.Steps, "the refused turn's usage, and step_2's turn")
	require.Equal(t, billed.Add(billed), res.ByPhase.Reflection, "both failed reflections")
	require.Equal(t, res.Usage, res.ByPhase.Total())
}
