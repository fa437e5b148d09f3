package activities

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/secops-agent/investigator/internal/clip"
	"github.com/secops-agent/investigator/internal/prompt"
	"github.com/secops-agent/investigator/plan"
)

// Reflect judges a finished step from the objective, the step and its
// result, the completed steps with their (capped) results, the steps still
// running alongside and the pending ones, the insights so far and the step cap: never the conversation. The
// workflow applies the proposed plan updates.
func (a *Activities) Reflect(ctx context.Context, in ReflectInput) (Reflection, error) {
	if err := a.withContext(ctx, in.Session, in.Context, in.UseContext); err != nil {
		return Reflection{}, err
	}
	steps := append([]plan.Step{in.Step}, in.Completed...)
	results, err := a.stepResults(ctx, in.Session, steps)
	if err != nil {
		return Reflection{}, err
	}
	completed := make([]stepView, len(in.Completed))
	for i, s := range in.Completed {
		completed[i] = stepView{Step: s, Result: clip.String(results[i+1], maxCompletedInPrompt)}
	}
	p, err := renderPhase(prompt.NewTag(), "reflect", map[string]any{
		"Plan":            reflectPlan(in),
		"Step":            in.Step,
		"Result":          clip.String(results[0], maxResultInPrompt),
		"Completed":       completed,
		"Running":         in.Running,
		"Pending":         in.Pending,
		"Insights":        insightsText(in.Insights),
		"EarlierInsights": insightsText(in.Earlier),
		"Used":            in.Steps,
		"MaxSteps":        in.MaxSteps,
		"Room":            in.MaxSteps - in.Steps,
		"Tools":           in.Tools,
		"Hints":           in.Hints,
		"Example":         reflectExample,
		"SourceRules":     sourceRules(a.Tools),
	})
	if err != nil {
		return Reflection{}, err
	}
	// The schema's required fields are pointers, so that an answer
	// without them ({}, null) is told from one that leaves them empty.
	var raw struct {
		Insights    *[]string      `json:"insights"`
		PlanUpdates *[]plan.Update `json:"plan_updates"`
		Achieved    *bool          `json:"achieved"`
	}
	var out Reflection
	out.Usage, err = a.Model.GenerateJSON(ctx, "reflection on "+in.Step.ID, p.system, p.user, reflectSchema, &raw, func() error {
		var missing []string
		for name, absent := range map[string]bool{"insights": raw.Insights == nil, "plan_updates": raw.PlanUpdates == nil, "achieved": raw.Achieved == nil} {
			if absent {
				missing = append(missing, name)
			}
		}
		if len(missing) > 0 {
			slices.Sort(missing)
			return fmt.Errorf("the answer lacks the required field(s) %s", strings.Join(missing, ", "))
		}
		return nil
	})
	if err != nil {
		return out, err
	}
	out.Insights, out.PlanUpdates, out.Achieved = *raw.Insights, *raw.PlanUpdates, *raw.Achieved
	if n := len(out.Insights); n > MaxReflectionInsights {
		Logger(ctx).Warn("reflection insights past the bound dropped", "step", in.Step.ID, "insights", n, "kept", MaxReflectionInsights)
	}
	out.Insights = BoundedInsights(out.Insights)
	if n := len(out.PlanUpdates); n > MaxPlanUpdates {
		Logger(ctx).Warn("reflection plan updates past the bound dropped", "step", in.Step.ID, "updates", n, "kept", MaxPlanUpdates)
	}
	out.PlanUpdates = BoundedUpdates(out.PlanUpdates)
	return out, nil
}

// Bounds of a reflection's plan updates, kept by the activity: its result
// is a Temporal payload (at most 2 MB), and the updates ride into the plan,
// its events and every later prompt. A plan holds at most a few dozen
// steps, so more updates than MaxPlanUpdates in one reflection are noise.
const (
	MaxPlanUpdates = 20
	maxUpdateName  = 100 // a step ID, an update type, a tool or a dependency
	maxStepNames   = 16  // tools or dependencies of one step
)

// BoundedUpdates is updates as a reflection returns them: the first
// MaxPlanUpdates, each with only the fields an update may set, its text
// clipped to the plan's bounds (plan.MaxDescriptionBytes, ...) with the
// clip mark and its lists capped.
func BoundedUpdates(updates []plan.Update) []plan.Update {
	if updates == nil {
		return nil
	}
	out := make([]plan.Update, 0, min(len(updates), MaxPlanUpdates))
	for _, u := range updates[:min(len(updates), MaxPlanUpdates)] {
		b := plan.Update{
			Type:   plan.UpdateType(clip.String(string(u.Type), maxUpdateName)),
			StepID: clip.String(u.StepID, maxUpdateName),
			Reason: clip.String(u.Reason, plan.MaxNoteBytes),
		}
		if s := u.Step; s != nil {
			b.Step = &plan.Step{
				Description: clip.String(s.Description, plan.MaxDescriptionBytes),
				Expected:    clip.String(s.Expected, plan.MaxExpectedBytes),
				Tools:       boundedNames(s.Tools),
				DependsOn:   boundedNames(s.DependsOn),
			}
		}
		out = append(out, b)
	}
	return out
}

// boundedNames is the first maxStepNames names, each clipped; nil stays
// nil (depends_on: nil and [] mean different things).
func boundedNames(names []string) []string {
	if names == nil {
		return nil
	}
	out := make([]string, 0, min(len(names), maxStepNames))
	for _, n := range names[:min(len(names), maxStepNames)] {
		out = append(out, clip.String(n, maxUpdateName))
	}
	return out
}

// Bounds on what one reflection adds to the insights: each insight rides
// in the run's state, the stored context, its event and every later reflect
// and conclude prompt, and the workflow keeps 32 KiB of them in all, so one
// long insight must not push every other one out.
const (
	MaxInsightBytes       = 1 << 10
	MaxReflectionInsights = 10
)

// BoundedInsights is a reflection's insights as the investigation keeps
// them: trimmed, empty ones left out, the first MaxReflectionInsights, each
// clipped to MaxInsightBytes with the clip mark. Pure: the workflow applies
// it to a recorded result too.
func BoundedInsights(insights []string) []string {
	var out []string
	for _, in := range insights {
		if in = strings.TrimSpace(in); in != "" && len(out) < MaxReflectionInsights {
			out = append(out, clip.String(in, MaxInsightBytes))
		}
	}
	return out
}

// reflectPlan is the plan as reflection sees it, for a data block: the
// objective, the step just finished, the completed, running and pending
// steps, each with its description, tools and note.
func reflectPlan(in ReflectInput) string {
	var b strings.Builder
	b.WriteString("Objective: " + in.Objective + "\nJust finished:\n" + stepLines([]plan.Step{in.Step}, true))
	for _, g := range []struct {
		label string
		steps []plan.Step
	}{{"Completed", in.Completed}, {"Still running (results not in yet)", in.Running}, {"Pending", in.Pending}} {
		b.WriteString("\n" + g.label + ":\n")
		if len(g.steps) == 0 {
			b.WriteString("(none)")
		}
		b.WriteString(stepLines(g.steps, false))
	}
	return b.String()
}

// stepView is a step with the result a prompt shows of it.
type stepView struct {
	plan.Step
	Result string
}

// stepResults reads the stored answers of steps, in order; a step without
// a result key (not run) has none.
func (a *Activities) stepResults(ctx context.Context, session string, steps []plan.Step) ([]string, error) {
	var keys []string
	for _, s := range steps {
		if s.ResultKey != "" {
			keys = append(keys, s.ResultKey)
		}
	}
	texts, err := a.Model.answers(ctx, session, keys)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(steps))
	next := 0
	for i, s := range steps {
		if s.ResultKey != "" {
			out[i] = texts[next]
			next++
		}
	}
	return out, nil
}
