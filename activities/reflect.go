package activities

import (
	"context"

	"github.com/secops-agent/investigator/investigation"
)

// Reflect judges a finished step from the objective, the step and its result,
// and the completed and pending steps only (never the conversation). The
// workflow applies the proposed plan updates.
func (a *Activities) Reflect(ctx context.Context, in investigation.ReflectInput) (investigation.Reflection, error) {
	prompt, err := render("reflect", in)
	if err != nil {
		return investigation.Reflection{}, err
	}
	var out investigation.Reflection
	out.Usage, err = a.generateJSON(ctx, "reflection on "+in.Step.ID, prompt, reflectSchema, &out, func() error { return nil })
	return out, err
}
