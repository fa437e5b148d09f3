package workflows

import (
	"fmt"
	"strings"

	"go.temporal.io/sdk/workflow"

	"github.com/secops-agent/investigator/activities"
	"github.com/secops-agent/investigator/internal/clip"
	"github.com/secops-agent/investigator/investigation"
	"github.com/secops-agent/investigator/plan"
)

// executePlan runs pending steps until none is left, reflection says the
// objective is achieved, or the step cap is reached. It returns a reason
// when the exchange ended before the plan was finished.
func (r *run) executePlan(ctx workflow.Context) (string, error) {
	executed := 0
	r.Phase = investigation.PhaseExecuting
	for {
		i := r.Plan.Next()
		if i < 0 {
			return "", nil
		}
		if reason := r.exhausted(ctx, 0); reason != "" {
			r.Plan.SkipPending("not run: " + reason)
			r.emit(investigation.Event{Kind: investigation.EventStop, Text: reason})
			return reason, nil
		}
		if executed >= r.Input.Limits.MaxSteps {
			reason := fmt.Sprintf("the step cap of %d was reached", r.Input.Limits.MaxSteps)
			r.Plan.SkipPending(reason)
			r.emit(investigation.Event{Kind: investigation.EventNote, Text: "Stopping: " + reason})
			return reason, nil
		}
		executed++
		step := &r.Plan.Steps[i]
		step.Status = plan.Running
		r.emit(investigation.Event{Kind: investigation.EventStep, Step: step.ID, Text: step.Description, Expected: step.Expected})
		r.setDetails(ctx, "running "+step.ID)

		res, err := r.runStep(ctx, *step)
		if err != nil {
			return "", failure(step.ID+" failed", err)
		}
		step = &r.Plan.Steps[i]
		step.Status = plan.Done
		step.Result = clip.String(res.Text, r.Input.Limits.MaxStepResultBytes)
		step.ResultKey = res.Key
		r.Finished = append(r.Finished, activities.StepRef{StepID: step.ID, Description: step.Description, Key: res.Key})
		r.emit(investigation.Event{Kind: investigation.EventStepDone, Step: step.ID, Text: step.Result})
		if res.Cut != "" {
			// The step answered early because the exchange's budget ran
			// out (or the analyst stopped it): conclude now, and say why.
			r.Plan.SkipPending("not run: " + res.Cut)
			r.emit(investigation.Event{Kind: investigation.EventStop, Text: res.Cut})
			return res.Cut, nil
		}
		if achieved := r.reflect(ctx, *step); achieved {
			r.Plan.SkipPending("reflection found the objective achieved after " + step.ID)
			r.emit(investigation.Event{Kind: investigation.EventNote, Text: "Objective achieved: concluding early."})
			r.setDetails(ctx, "objective achieved")
			return "", nil
		}
		r.setDetails(ctx, "reflected on "+step.ID)
	}
}

// runStep runs a step's tool loop: the investigation is the loop's host.
func (r *run) runStep(ctx workflow.Context, step plan.Step) (loopResult, error) {
	l := &toolLoop{
		host:     &stepHost{r: r, step: step},
		session:  r.session,
		prefix:   fmt.Sprintf("t%d-%s", r.Turn, step.ID),
		label:    step.ID,
		maxIter:  r.Input.Limits.MaxIterations,
		maxBytes: r.Input.Limits.MaxToolResultBytes,
		results:  &r.Results,
	}
	res, err := l.run(ctx)
	r.ToolCalls += res.Calls
	r.Budget.TurnCalls += res.Calls
	r.Reused += res.Reused
	return res, err
}

// reflect asks the model to judge the finished step and applies its plan
// updates. A failed or malformed reflection never fails the investigation:
// the plan simply goes on unchanged.
func (r *run) reflect(ctx workflow.Context, step plan.Step) bool {
	var out activities.Reflection
	current, earlier := r.splitInsights()
	var completed []plan.Step
	for _, s := range r.Plan.WithStatus(plan.Done) {
		if s.ID != step.ID {
			completed = append(completed, s)
		}
	}
	err := workflow.ExecuteActivity(llmOptions(ctx, "reflect "+step.ID), a.Reflect, activities.ReflectInput{
		Session:   r.session,
		Objective: r.Plan.Objective,
		Step:      withoutResults([]plan.Step{step})[0],
		Completed: withoutResults(completed),
		Pending:   withoutResults(r.Plan.WithStatus(plan.Pending)),
		Insights:  current,
		Earlier:   earlier,
		Steps:     len(r.Plan.Steps),
		MaxSteps:  r.StepCap,
		Tools:     r.toolNames(),
		Hints:     r.Steering.Hints,
	}).Get(ctx, &out)
	if err != nil {
		r.emit(investigation.Event{Kind: investigation.EventNote, Step: step.ID, Text: "Reflection failed, continuing with the plan unchanged: " + message(err)})
		return false
	}
	r.charge(&r.ByPhase.Reflection, out.Usage)
	var fresh []string
	for _, in := range out.Insights {
		if in = strings.TrimSpace(in); in != "" {
			fresh = append(fresh, in)
			r.addInsight(investigation.Insight{Turn: r.Turn, Step: step.ID, Text: in})
		}
	}
	if len(fresh) > 0 {
		r.emit(investigation.Event{Kind: investigation.EventInsight, Step: step.ID, Insights: fresh})
	}
	if len(out.PlanUpdates) > 0 {
		var outcomes []plan.Outcome
		r.Plan, outcomes = plan.Apply(r.Plan, out.PlanUpdates, plan.Limits{MaxSteps: r.StepCap, Tools: r.toolNames()})
		updates := make([]string, 0, len(outcomes))
		for _, o := range outcomes {
			updates = append(updates, describeOutcome(o))
		}
		r.emit(investigation.Event{
			Kind:      investigation.EventPlanUpdate,
			Step:      step.ID,
			Updates:   updates,
			Completed: plan.IDs(r.Plan.WithStatus(plan.Done)),
			Pending:   plan.IDs(r.Plan.WithStatus(plan.Pending)),
		})
	}
	return out.Achieved
}

// splitInsights returns the insights of the current exchange and those
// carried from earlier ones.
func (r *run) splitInsights() (current, earlier []investigation.Insight) {
	for _, in := range r.Insights {
		if in.Turn == r.Turn {
			current = append(current, in)
		} else {
			earlier = append(earlier, in)
		}
	}
	return current, earlier
}

func describeOutcome(o plan.Outcome) string {
	target := o.StepID
	if target == "" {
		target = o.Update.StepID
	}
	s := string(o.Update.Type)
	if target != "" {
		s += " " + target
	}
	if o.Update.Step != nil && o.Update.Step.Description != "" {
		s += ": " + o.Update.Step.Description
	}
	if !o.Applied {
		return s + " (dropped: " + o.Why + ")"
	}
	if o.Update.Reason != "" {
		s += " (" + o.Update.Reason + ")"
	}
	return s
}
