package workflows

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/secops-agent/investigator/activities"
	"github.com/secops-agent/investigator/investigation"
	"github.com/secops-agent/investigator/plan"
	"github.com/secops-agent/investigator/toolcall"
)

// parallelPlan is a plan whose steps name their dependencies (deps[i] for
// step_i+1; nil keeps plan order).
func parallelPlan(deps ...[]string) activities.PlanOutput {
	out := activities.PlanOutput{Tools: toolNames, Plan: plan.Plan{Objective: "Decide"}}
	for i, d := range deps {
		id := fmt.Sprintf("step_%d", i+1)
		out.Plan.Steps = append(out.Plan.Steps, plan.Step{ID: id, Description: "work " + id, Tools: []string{"get_alert"}, DependsOn: d, Status: plan.Pending})
	}
	return out
}

// turnsPerStep answers each step after its given number of model turns
// (one by default), each turn before the last calling get_alert.
func turnsPerStep(n map[string]int) func(in activities.TurnInput) (activities.TurnOutput, error) {
	return func(in activities.TurnInput) (activities.TurnOutput, error) {
		turn := strings.Count(strings.Join(refKeys(in.Transcript), " "), "-i") / 2 // model turn and call keys both hold -i
		if turn+1 < max(n[in.Step.ID], 1) && !in.Final {
			return activities.TurnOutput{Calls: []toolcall.Call{{Name: "get_alert", Args: map[string]any{"id": fmt.Sprintf("%s-%d", in.Step.ID, turn)}}}}, nil
		}
		return activities.TurnOutput{Text: "found in " + in.Step.ID}, nil
	}
}

func refKeys(refs []activities.Ref) []string {
	keys := make([]string, len(refs))
	for i, r := range refs {
		keys[i] = r.Key
	}
	return keys
}

// stepEvents lists "kind step" for the step events, in order.
func stepEvents(evs []investigation.Event, kinds ...investigation.EventKind) []string {
	var out []string
	for _, e := range evs {
		for _, k := range kinds {
			if e.Kind == k {
				out = append(out, string(e.Kind)+" "+e.Step)
			}
		}
	}
	return out
}

// Ready steps start together, up to the limit; a step waits for the steps
// it depends on, and sees their answers.
func TestReadyStepsStartTogether(t *testing.T) {
	h := newHarness(t)
	h.onPlan(parallelPlan([]string{}, []string{}, []string{}, []string{"step_1", "step_2"}), nil)
	h.onSlowTurn(time.Minute, turnsPerStep(nil))
	h.onTool(okTool)
	h.onReflect(noChange)
	start := h.env.Now()
	res, err := h.run(t, investigation.Input{AlertID: "a1"})
	require.NoError(t, err)

	evs := stepEvents(h.events(t), investigation.EventStep, investigation.EventStepDone)
	require.Equal(t, []string{"step step_1", "step step_2", "step step_3"}, evs[:3], "the ready steps start together")
	require.Greater(t, slices.Index(evs, "step step_4"), max(slices.Index(evs, "step_done step_1"), slices.Index(evs, "step_done step_2")),
		"step_4 waits for the steps it depends on")
	require.Equal(t, 2*time.Minute, h.concludedAt[0].Sub(start), "two rounds of one-minute turns, not four")
	last := h.turns[len(h.turns)-1]
	require.Equal(t, "step_4", last.Step.ID)
	require.ElementsMatch(t, []string{"step_1", "step_2"}, stepIDs(last.Earlier), "step_4 sees the answers it waited for, and only those")
	for _, s := range res.Plan.Steps {
		require.Equal(t, plan.Done, s.Status)
	}
	require.Len(t, h.reflects, 4, "every step is reflected on")
}

// At most MaxParallelSteps run at once; a plan without depends_on runs in
// order, as before.
func TestParallelLimitAndPlanOrder(t *testing.T) {
	for _, c := range []struct {
		name  string
		limit int
		deps  [][]string
		took  time.Duration
	}{
		{"three independent, two at a time", 2, [][]string{{}, {}, {}}, 2 * time.Minute},
		{"no depends_on", 3, [][]string{nil, nil, nil}, 3 * time.Minute},
		{"limit of one", 1, [][]string{{}, {}, {}}, 3 * time.Minute},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			h.onPlan(parallelPlan(c.deps...), nil)
			h.onSlowTurn(time.Minute, turnsPerStep(nil))
			h.onReflect(noChange)
			start := h.env.Now()
			_, err := h.run(t, investigation.Input{AlertID: "a1", Limits: investigation.Limits{MaxParallelSteps: c.limit}})
			require.NoError(t, err)
			require.Equal(t, c.took, h.concludedAt[0].Sub(start))
		})
	}
}

// Reflections of steps that finish in the same workflow task apply in step
// order, whatever order their coroutines handed them back in (the test
// environment delivers each activity in a task of its own, so the batch is
// built here).
func TestReflectionsApplyInStepOrder(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(func(ctx workflow.Context) ([]investigation.Event, error) {
		r := &run{State: newState(investigation.Input{AlertID: "a1", Limits: investigation.Limits{}.WithDefaults()})}
		r.Plan = parallelPlan([]string{}, []string{}, []string{}, []string{}).Plan
		r.StepCap, r.Tools = 10, toolNames
		r.Plan.Steps[2].Status, r.Plan.Steps[3].Status = plan.Done, plan.Done
		add := func(from string) activities.Reflection {
			return activities.Reflection{Insights: []string{"from " + from}, PlanUpdates: []plan.Update{
				{Type: plan.AddStep, Step: &plan.Step{Description: "follow up " + from + " thoroughly", Tools: []string{"get_alert"}}}}}
		}
		x := &execution{running: 2}
		err := r.applyOutcomes(ctx, x, []*stepOutcome{
			{step: "step_4", reflected: true, reflection: add("step_4")},
			{step: "step_3", reflected: true, reflection: add("step_3")},
		})
		if x.running != 0 {
			return nil, fmt.Errorf("%d steps still counted as running", x.running)
		}
		return r.events, err
	}, workflow.RegisterOptions{Name: "apply"})
	env.ExecuteWorkflow("apply")
	require.NoError(t, env.GetWorkflowError())
	var evs []investigation.Event
	require.NoError(t, env.GetWorkflowResult(&evs))
	require.Equal(t, []string{"insight step_3", "plan_update step_3", "insight step_4", "plan_update step_4"},
		stepEvents(evs, investigation.EventInsight, investigation.EventPlanUpdate))
	require.Equal(t, []string{"add_step step_5: follow up step_3 thoroughly"}, evs[1].Updates, "step_3's step is added first")
	require.Equal(t, []string{"add_step step_6: follow up step_4 thoroughly"}, evs[3].Updates)
}

// Reflection sees the steps running alongside the one it judges.
func TestReflectionSeesRunningSteps(t *testing.T) {
	h := newHarness(t)
	h.onPlan(parallelPlan([]string{}, []string{}, []string{"step_1"}), nil)
	h.onSlowTurn(time.Minute, turnsPerStep(map[string]int{"step_2": 3}))
	h.onTool(okTool)
	h.onReflect(noChange)
	_, err := h.run(t, investigation.Input{AlertID: "a1"})
	require.NoError(t, err)
	require.Equal(t, "step_1", h.reflects[0].Step.ID)
	require.Equal(t, []string{"step_2"}, stepIDs2(h.reflects[0].Running))
	require.Equal(t, []string{"step_3"}, stepIDs2(h.reflects[0].Pending))
}

// Once reflection finds the objective achieved, nothing new starts: a
// running step finishes (its work is not thrown away, nor reflected on)
// and the steps not started are skipped.
func TestAchievedStartsNothingNew(t *testing.T) {
	h := newHarness(t)
	h.onPlan(parallelPlan([]string{}, []string{}, []string{"step_1"}), nil)
	h.onSlowTurn(time.Minute, turnsPerStep(map[string]int{"step_2": 3}))
	h.onTool(okTool)
	h.onReflect(func(in activities.ReflectInput) (activities.Reflection, error) {
		return activities.Reflection{Achieved: in.Step.ID == "step_1"}, nil
	})
	res, err := h.run(t, investigation.Input{AlertID: "a1"})
	require.NoError(t, err)
	require.Equal(t, plan.Done, res.Plan.Steps[0].Status)
	require.Equal(t, plan.Done, res.Plan.Steps[1].Status, "the running step finished")
	require.Equal(t, "found in step_2", res.Plan.Steps[1].Result)
	require.Equal(t, plan.Skipped, res.Plan.Steps[2].Status)
	require.Contains(t, res.Plan.Steps[2].Note, "objective achieved after step_1")
	for _, in := range h.turns {
		require.NotEqual(t, "step_3", in.Step.ID, "a step not started does not start")
	}
	require.Len(t, h.reflects, 1, "only step_1 was reflected on")
	require.Equal(t, "reflection found the objective achieved after step_1, so these planned steps did not run: step_3", h.conclude[0].EndedEarly, "the conclusion is told what was not checked")
}

// Steps running at once share the exchange's tool-call budget: calls that
// would exceed it are refused, whichever step asks.
func TestParallelStepsShareTheCallBudget(t *testing.T) {
	h := newHarness(t)
	h.onPlan(parallelPlan([]string{}, []string{}), nil)
	h.onSlowTurn(time.Minute, func(in activities.TurnInput) (activities.TurnOutput, error) {
		if len(in.Transcript) == 0 && !in.Final {
			return activities.TurnOutput{Calls: []toolcall.Call{
				{Name: "get_alert", Args: map[string]any{"id": in.Step.ID + "-a"}},
				{Name: "get_alert", Args: map[string]any{"id": in.Step.ID + "-b"}},
			}}, nil
		}
		return activities.TurnOutput{Text: "done"}, nil
	})
	h.onTool(okTool)
	h.onReflect(noChange)
	res, err := h.run(t, investigation.Input{AlertID: "a1", Limits: investigation.Limits{MaxToolCalls: 3}})
	require.NoError(t, err)
	require.Len(t, h.tools, 3, "three calls ran of the four asked for")
	require.Equal(t, 3, res.ToolCalls)
	refused := 0
	for _, in := range h.turns {
		for _, ref := range in.Transcript {
			if strings.Contains(ref.Error, "tool-call budget is spent") {
				refused++
			}
		}
	}
	require.Positive(t, refused, "the fourth call was refused")
}

func stepIDs(refs []activities.StepRef) []string {
	ids := make([]string, len(refs))
	for i, r := range refs {
		ids[i] = r.StepID
	}
	return ids
}

func stepIDs2(steps []plan.Step) []string {
	ids := make([]string, len(steps))
	for i, s := range steps {
		ids[i] = s.ID
	}
	return ids
}
