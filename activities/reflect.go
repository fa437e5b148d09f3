package activities

import (
	"context"
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
		"AlertTools":      alertToolList(a.Tools),
	})
	if err != nil {
		return Reflection{}, err
	}
	var out Reflection
	out.Usage, err = a.Model.GenerateJSON(ctx, "reflection on "+in.Step.ID, p.system, p.user, reflectSchema, &out, func() error { return nil })
	if n := len(out.Insights); n > MaxReflectionInsights {
		Logger(ctx).Warn("reflection insights past the bound dropped", "step", in.Step.ID, "insights", n, "kept", MaxReflectionInsights)
	}
	out.Insights = BoundedInsights(out.Insights)
	return out, err
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
