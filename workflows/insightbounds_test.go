package workflows

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"

	"github.com/secops-agent/investigator/activities"
	"github.com/secops-agent/investigator/internal/clip"
	"github.com/secops-agent/investigator/investigation"
	"github.com/secops-agent/investigator/plan"
)

// The attack: a log row gets step_1's reflection to write one insight of
// 40 KiB beside a short one, and 30 more (a result recorded before the
// activity bounded them). Each is clipped and at most
// MaxReflectionInsights kept, so the short one is not pushed out and no
// later prompt carries the whole 40 KiB.
func TestHugeInsightIsClippedAndKeepsTheOthers(t *testing.T) {
	h := newHarness(t)
	h.onPlan(twoStepPlan(), nil)
	h.onTurn(conclusionOnly)
	huge := strings.Repeat("A", 40<<10)
	h.onReflect(func(in activities.ReflectInput) (activities.Reflection, error) {
		if in.Step.ID != "step_1" {
			return activities.Reflection{Usage: investigation.Usage{Calls: 1}}, nil
		}
		out := []string{"198.51.100.23 failed 1,204 logins (step_1)", huge}
		for range 30 {
			out = append(out, "more")
		}
		return activities.Reflection{Insights: out, Usage: investigation.Usage{Calls: 1}}, nil
	})
	_, err := h.run(t, investigation.Input{AlertID: "a1"})
	require.NoError(t, err)
	require.Len(t, h.reflects, 2)
	kept := h.reflects[1].Insights
	require.Len(t, kept, activities.MaxReflectionInsights, "one reflection adds at most this many insights")
	require.Equal(t, "198.51.100.23 failed 1,204 logins (step_1)", kept[0].Text, "the huge insight pushed the others out")
	require.LessOrEqual(t, len(kept[1].Text), activities.MaxInsightBytes)
	require.True(t, clip.Clipped(kept[1].Text))
	require.LessOrEqual(t, len(h.conclude[0].Insights[1].Text), activities.MaxInsightBytes)
	noted := false
	for _, e := range h.events(t) {
		for _, in := range e.Insights {
			require.LessOrEqual(t, len(in), activities.MaxInsightBytes, "the insight event carries the whole insight")
		}
		noted = noted || strings.Contains(e.Text, "22 insights of this reflection were dropped")
	}
	require.True(t, noted, "the insights dropped are noted")
}

// followUpWithDuplicates is the plan a follow-up continues with in the
// insights-and-duplicates tests: step_3 repeats step_1 and step_5 repeats
// step_4, both dropped as duplicates, and step_6 depends on the two.
func followUpWithDuplicates() activities.PlanOutput {
	out := twoStepPlan()
	out.Continues = true
	out.Plan.Steps = []plan.Step{
		{ID: "step_3", Description: "Read the alert", Tools: []string{"get_alert"}, DependsOn: []string{}, Status: plan.Pending},
		{ID: "step_4", Description: "Check the bastion logins", Tools: []string{"get_alert"}, DependsOn: []string{}, Status: plan.Pending},
		{ID: "step_5", Description: "Check bastion logins", Tools: []string{"get_alert"}, DependsOn: []string{}, Status: plan.Pending},
		{ID: "step_6", Description: "Summarise what the logins show", Tools: []string{"get_alert"}, DependsOn: []string{"step_3", "step_5"}, Status: plan.Pending},
	}
	return out
}

// The attack: a follow-up continues the plan with a step that repeats one
// that ran (dropped as a duplicate), another pair of which the second
// repeats the first, and a step that depends on both repeats. It depends
// on the steps they repeat: it reads step_1's answer and waits for the
// new bastion step, instead of starting at once without either.
func TestFollowUpStepDependsOnWhatItsDroppedDuplicateRepeats(t *testing.T) {
	h := newHarness(t)
	h.env.OnActivity(a.GeneratePlan, mock.Anything, mock.Anything).Return(func(_ context.Context, in activities.PlanInput) (activities.PlanOutput, error) {
		if in.ActivePlan != nil || in.Context != "" {
			return followUpWithDuplicates(), nil
		}
		return twoStepPlan(), nil
	})
	h.env.OnActivity(a.DecideMode, mock.Anything, mock.Anything).Return(activities.Mode{Mode: investigation.ModePlan, Reason: "a new host"}, nil)
	h.onTurn(conclusionOnly)
	h.onReflect(noChange)
	ask := h.update(time.Minute, investigation.UpdateAsk, "And the bastion?")
	res, err := h.run(t, investigation.Input{AlertID: "a1"})
	require.NoError(t, err)
	require.NoError(t, ask.rejected)
	require.Len(t, res.Plan.Steps, 4, "two new steps were dropped as duplicates")
	require.Equal(t, "Summarise what the logins show", res.Plan.Steps[3].Description)
	require.Equal(t, []string{"step_1", "step_3"}, res.Plan.Steps[3].DependsOn, "the dependencies on the dropped duplicates were lost")
	var summary activities.TurnInput
	for _, in := range h.turns {
		if in.Step.ID == "step_4" && in.Step.Description == "Summarise what the logins show" {
			summary = in
		}
	}
	var earlier []string
	for _, e := range summary.Earlier {
		earlier = append(earlier, e.StepID)
	}
	require.Equal(t, []string{"step_1", "step_3"}, earlier, "the summary step reads the answers of the steps its duplicates repeat")
}
