package activities

import (
	"context"
	"fmt"

	"github.com/secops-agent/investigator/internal/clip"
	"github.com/secops-agent/investigator/internal/prompt"
	"github.com/secops-agent/investigator/investigation"
)

// DecideMode chooses, for a follow-up question, between Plan & Execute and a
// direct answer with tools.
func (a *Activities) DecideMode(ctx context.Context, in ModeInput) (Mode, error) {
	if err := a.withContext(ctx, in.Session, in.Context, in.UseContext); err != nil {
		return Mode{}, err
	}
	al, err := a.loadAlert(ctx, in.AlertID)
	if err != nil {
		return Mode{}, err
	}
	tag := prompt.NewTag()
	alert, err := alertSection(tag, al)
	if err != nil {
		return Mode{}, err
	}
	p, err := renderPhase(tag, "mode", map[string]any{
		"Alert": alert, "History": conversationText(in.History), "ActivePlan": planText(in.ActivePlan), "Question": in.Question, "Asker": string(in.Asker),
	})
	if err != nil {
		return Mode{}, err
	}
	var out Mode
	out.Usage, err = a.Model.GenerateJSON(ctx, "mode decision", p.system, p.user, modeSchema, &out, func() error {
		if out.Mode != investigation.ModePlan && out.Mode != investigation.ModeDirect {
			return fmt.Errorf("mode must be %q or %q, got %q", investigation.ModePlan, investigation.ModeDirect, out.Mode)
		}
		return nil
	})
	out.Reason = clip.String(out.Reason, MaxModeReasonBytes)
	return out, err
}

// MaxModeReasonBytes bounds a mode decision's reason: it rides in the
// activity's result (under Temporal's payload limit however long an
// answer the endpoint sends) and in a progress event.
const MaxModeReasonBytes = 1 << 10
