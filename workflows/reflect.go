package workflows

import (
	"fmt"
	"slices"
	"strings"

	"go.temporal.io/sdk/workflow"

	"github.com/secops-agent/investigator/activities"
	"github.com/secops-agent/investigator/internal/clip"
	"github.com/secops-agent/investigator/investigation"
	"github.com/secops-agent/investigator/plan"
)

// reflection asks the model to judge a finished step, given the plan as it
// stands (steps still running included).
func (r *run) reflection(ctx workflow.Context, step plan.Step) (activities.Reflection, error) {
	var out activities.Reflection
	current, earlier := r.splitInsights()
	var completed []plan.Step
	for _, s := range r.Plan.WithStatus(plan.Done) {
		if s.ID != step.ID {
			completed = append(completed, s)
		}
	}
	in := activities.ReflectInput{
		Session:   r.session,
		Objective: r.Plan.Objective,
		Step:      withoutResults([]plan.Step{step})[0],
		Completed: withoutResults(completed),
		Running:   withoutResults(r.Plan.WithStatus(plan.Running)),
		Pending:   withoutResults(r.Plan.WithStatus(plan.Pending)),
		Insights:  current,
		Earlier:   earlier,
		Steps:     len(r.Plan.Steps),
		MaxSteps:  r.StepCap,
		Tools:     r.toolNames(),
		Hints:     r.Steering.Hints,
	}
	if in.Context = r.context(ctx); in.Context != "" {
		in.Earlier, in.Hints, in.Insights, in.Completed, in.Running, in.Pending = nil, nil, nil, nil, nil, nil
	}
	err := workflow.ExecuteActivity(llmOptions(ctx, "reflect "+step.ID), a.Reflect, in).Get(ctx, &out)
	return out, err
}

// applyReflection records a step's reflection: its insights and plan
// updates. It says whether the objective is achieved. A failed or
// malformed reflection never fails the investigation: the plan simply goes
// on unchanged.
func (r *run) applyReflection(ctx workflow.Context, step string, out activities.Reflection, err error) bool {
	r.charge(&r.ByPhase.Reflection, billedUsage(out.Usage, err))
	if err != nil {
		r.emit(investigation.Event{Kind: investigation.EventNote, Step: step, Text: "Reflection failed, continuing with the plan unchanged: " + message(err)})
		return false
	}
	var fresh []string
	for _, in := range out.Insights {
		if in = strings.TrimSpace(in); in != "" {
			fresh = append(fresh, in)
		}
	}
	// The activity bounds them (activities.BoundedInsights); a result
	// recorded before it did is bounded here, behind the gate.
	if bounded := activities.BoundedInsights(fresh); !slices.Equal(bounded, fresh) && insightsAndDuplicates(ctx) {
		if n := len(fresh) - len(bounded); n > 0 {
			r.emit(investigation.Event{Kind: investigation.EventNote, Step: step, Text: fmt.Sprintf(
				"%d insights of this reflection were dropped: one reflection adds at most %d", n, activities.MaxReflectionInsights)})
		}
		fresh = bounded
	}
	for _, in := range fresh {
		r.addInsight(investigation.Insight{Turn: r.Turn, Step: step, Text: in})
	}
	if len(fresh) > 0 {
		r.emit(investigation.Event{Kind: investigation.EventInsight, Step: step, Insights: fresh})
	}
	if len(out.PlanUpdates) > 0 {
		var outcomes []plan.Outcome
		r.Plan, outcomes = plan.Apply(r.Plan, out.PlanUpdates, plan.Limits{MaxSteps: r.StepCap, Tools: r.toolNames(),
			Bound: boundsPlanText(ctx, plan.UpdatesWithinBounds(out.PlanUpdates))})
		updates := make([]string, 0, len(outcomes))
		for _, o := range outcomes {
			updates = append(updates, describeOutcome(o))
		}
		r.emit(investigation.Event{
			Kind:      investigation.EventPlanUpdate,
			Step:      step,
			Updates:   updates,
			Completed: plan.IDs(r.Plan.WithStatus(plan.Done)),
			Pending:   plan.IDs(r.Plan.WithStatus(plan.Pending)),
		})
	}
	return out.Achieved
}

// insightsAndDuplicates gates two rules that change the plan or the
// insights a run carries, and so the stored context, whose size decides
// whether a StoreContext marker is recorded (inlineContext): a reflection's
// insights are bounded in workflow code (activities.BoundedInsights) as the
// activity bounds them, and a follow-up's new step that depends on a new
// step dropped as a duplicate depends on the step it repeats (makePlan),
// which may also hold it back until that step is done. Asked only where
// either rule changes something; histories recorded before kept every
// insight whole and dropped the dependency.
func insightsAndDuplicates(ctx workflow.Context) bool {
	return workflow.GetVersion(ctx, "insights-and-duplicates", workflow.DefaultVersion, 1) == 1
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
	// The update is the model's, as written: its text is clipped as the
	// plan clips it (an event, no decision).
	if o.Update.Step != nil && o.Update.Step.Description != "" {
		s += ": " + clip.String(o.Update.Step.Description, plan.MaxDescriptionBytes)
	}
	if !o.Applied {
		return s + " (dropped: " + clip.String(o.Why, plan.MaxNoteBytes) + ")"
	}
	if o.Update.Reason != "" {
		s += " (" + clip.String(o.Update.Reason, plan.MaxNoteBytes) + ")"
	}
	return s
}
