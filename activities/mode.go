package activities

import (
	"context"
	"fmt"

	"github.com/secops-agent/investigator/alerts"
	"github.com/secops-agent/investigator/investigation"
)

var modeSchema = schema("mode")

// DecideMode chooses, for a follow-up question, between Plan & Execute and a
// direct answer with tools.
func (a *Activities) DecideMode(ctx context.Context, in investigation.ModeInput) (investigation.Mode, error) {
	al, err := a.loadAlert(ctx, in.AlertID)
	if err != nil {
		return investigation.Mode{}, err
	}
	prompt, err := render("mode", map[string]any{
		"AlertID": al.ID, "Alert": alerts.Describe(al, 20), "History": in.History, "ActivePlan": in.ActivePlan, "Question": in.Question,
	})
	if err != nil {
		return investigation.Mode{}, err
	}
	var out investigation.Mode
	out.Usage, err = a.generateJSON(ctx, "mode decision", prompt, modeSchema, &out, func() error {
		if out.Mode != investigation.ModePlan && out.Mode != investigation.ModeDirect {
			return fmt.Errorf("mode must be %q or %q, got %q", investigation.ModePlan, investigation.ModeDirect, out.Mode)
		}
		return nil
	})
	return out, err
}
