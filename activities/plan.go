package activities

import (
	"context"

	"github.com/secops-agent/investigator/internal/prompt"
	"github.com/secops-agent/investigator/plan"
)

// GeneratePlan asks the model for a plan (structured output, tools given as
// text, no function calling) and repairs or rejects it: steps naming unknown
// tools never reach execution. The planning exchange is not kept anywhere.
func (a *Activities) GeneratePlan(ctx context.Context, in PlanInput) (PlanOutput, error) {
	if err := a.withContext(ctx, in.Session, in.Context, in.UseContext); err != nil {
		return PlanOutput{}, err
	}
	al, err := a.loadAlert(ctx, in.AlertID)
	if err != nil {
		return PlanOutput{}, err
	}
	tag := prompt.NewTag()
	alert, err := alertSection(tag, al)
	if err != nil {
		return PlanOutput{}, err
	}
	// One view of the tools for the whole activity: what the catalog shows
	// is what the plan is checked against and what it records.
	reg := a.Tools.Snapshot()
	var earlier []string // steps of the plan in progress a new step may depend on
	if in.ActivePlan != nil {
		for _, s := range in.ActivePlan.Steps {
			earlier = append(earlier, s.ID)
		}
	}
	p, err := renderPhase(tag, "plan", map[string]any{
		"Request":     in.Request,
		"Asker":       string(in.Asker),
		"Alert":       alert,
		"History":     conversationText(in.History),
		"Tools":       reg.Catalog(),
		"Outside":     reg.OutsideDescriptions(),
		"MaxSteps":    in.MaxSteps,
		"Example":     planExample,
		"Hints":       in.Hints,
		"Arrivals":    arrivalsSection(in.Arrivals), // arrivals.go
		"ActivePlan":  planText(in.ActivePlan),
		"Feedback":    in.Feedback,
		"Previous":    planText(in.Previous),
		"NextStep":    plan.After(earlier),
		"SourceRules": sourceRules(reg),
	})
	if err != nil {
		return PlanOutput{}, err
	}
	names := reg.Names()
	var raw struct {
		plan.Plan
		Continues bool `json:"continues_active_plan"`
	}
	out := PlanOutput{Tools: reg.Tools()}
	out.Usage, err = a.Model.GenerateJSON(ctx, "plan", p.system, p.user, planSchema, &raw, func() error {
		var rerr error
		if raw.Continues && in.ActivePlan != nil {
			// New steps follow the plan in progress and may build on its steps.
			out.Plan, out.Notes, rerr = plan.RepairAfter(raw.Plan, earlier, names, in.MaxSteps)
		} else {
			out.Plan, out.Notes, rerr = plan.Repair(raw.Plan, names, in.MaxSteps)
		}
		return rerr
	})
	out.Continues = raw.Continues && in.ActivePlan != nil
	return out, err
}
