package workflows

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/workflow"

	"github.com/secops-agent/investigator/activities"
	"github.com/secops-agent/investigator/investigation"
)

// countPlans answers GeneratePlan with out and records when each call came.
func (h *harness) countPlans(out activities.PlanOutput) *[]time.Time {
	var at []time.Time
	var mu sync.Mutex
	h.env.OnActivity(a.GeneratePlan, mock.Anything, mock.Anything).Return(func(context.Context, activities.PlanInput) (activities.PlanOutput, error) {
		mu.Lock()
		defer mu.Unlock()
		at = append(at, h.env.Now())
		return out, nil
	})
	return &at
}

// A stop while a follow-up's mode is decided: the decision in flight
// finishes, then the follow-up asks the model for nothing but its
// conclusion (no plan, no step), which says it was stopped, and the run
// closes.
func TestStopDuringDecideModeDoesNotPlan(t *testing.T) {
	h := newHarness(t)
	plans := h.countPlans(oneStepPlan())
	h.onTurn(conclusionOnly)
	h.onReflect(noChange)
	h.env.OnActivity(a.DecideMode, mock.Anything, mock.Anything).After(time.Minute).Return(activities.Mode{Mode: investigation.ModePlan}, nil)
	h.update(10*time.Minute, investigation.UpdateAsk, "And host-8?")
	stop := h.update(10*time.Minute+30*time.Second, investigation.UpdateStop, "enough")
	res, err := h.run(t, investigation.Input{AlertID: "a1"})
	require.NoError(t, err)
	require.NoError(t, stop.rejected)
	require.Len(t, *plans, 1, "only the first exchange plans: no plan is asked for after the stop")
	require.Len(t, h.turns, 1, "no step runs after the stop")
	require.Len(t, h.conclude, 2, "the follow-up concludes")
	require.Equal(t, "stopped by the analyst: enough", h.conclude[1].EndedEarly)
	require.Equal(t, "And host-8?", h.conclude[1].Request)
	require.Len(t, h.conclude[1].Steps, 1, "the follow-up continues the active plan with no new step")
	require.Equal(t, "step_1", h.conclude[1].Steps[0].ID)
	require.Len(t, res.History, 4, "the follow-up and its conclusion join the conversation")
	evs := h.events(t)
	k := kinds(evs)
	require.NotContains(t, k[strings.LastIndex(k, "turn"):], "idle", "the run closes after the follow-up's conclusion")
	require.Contains(t, strings.Join(notes(evs), "\n"), "no plan is made: stopped by the analyst: enough")
}

// A revise and a stop taken in the same workflow task (the reviewer's
// variant): the stop wins, nothing is planned again and no step runs. (Both
// signals are taken before the main loop runs again: the first is sent
// without a workflow task of its own.)
func TestReviseAndStopTogetherDoNotReplan(t *testing.T) {
	h := newHarness(t)
	plans := h.countPlans(twoStepPlan())
	h.onTurn(conclusionOnly)
	h.onReflect(noChange)
	h.env.RegisterDelayedCallback(func() {
		h.env.SignalWorkflowSkippingWorkflowTask(investigation.UpdateRevise, "also check the bastion")
		h.env.SignalWorkflow(investigation.UpdateStop, "enough")
	}, time.Minute)
	_, err := h.run(t, investigation.Input{AlertID: "a1", ApprovePlan: true})
	require.NoError(t, err)
	evs := h.events(t)
	require.Contains(t, kinds(evs), "approval,approval,stop", "awaiting, revise and stop, taken together")
	require.Len(t, *plans, 1, "no plan is made again after the stop")
	require.Empty(t, h.turns, "no step runs")
	require.Len(t, h.conclude, 1)
	require.Equal(t, "stopped by the analyst: enough", h.conclude[0].EndedEarly)
	require.Contains(t, strings.Join(notes(evs), "\n"), "the revision is not applied: stopped by the analyst: enough")
}

// Once stopped, a revise is refused with the reason: as an update (whether
// the plan still waits, in the workflow task of the stop, or not), and as
// a signal.
func TestReviseIsRefusedOnceStopped(t *testing.T) {
	const refused = "the investigation is stopping: the plan is not revised, it concludes from what it has"
	waiting := &run{State: &State{Phase: investigation.PhaseAwaitingApproval}}
	require.NoError(t, waiting.checkRevision("also check the bastion"))
	waiting.Steering.StopReason = "stopped by the analyst"
	require.EqualError(t, waiting.checkRevision("also check the bastion"), refused)

	h := newHarness(t)
	h.env.RegisterWorkflow(func(ctx workflow.Context) (string, error) {
		return fmt.Sprint(waiting.checkRevisionSignal(ctx)("also check the bastion")), nil
	})
	h.env.ExecuteWorkflow("func1")
	var got string
	require.NoError(t, h.env.GetWorkflowResult(&got))
	require.Equal(t, refused, got)

	h = newHarness(t)
	h.onPlan(twoStepPlan(), nil)
	h.onTurn(conclusionOnly)
	h.onReflect(noChange)
	h.update(time.Minute, investigation.UpdateStop, "enough")
	revise := h.update(time.Minute, investigation.UpdateRevise, "also check the bastion")
	_, err := h.run(t, investigation.Input{AlertID: "a1", ApprovePlan: true})
	require.NoError(t, err)
	require.EqualError(t, revise.rejected, refused)
}
