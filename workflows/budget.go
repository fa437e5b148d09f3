package workflows

import (
	"fmt"

	"go.temporal.io/sdk/workflow"
)

// exhausted says why the current exchange must answer now: the analyst's
// stop, the tool-call budget or the time budget (waiting for the analyst
// excluded); "" while it may go on.
func (r *run) exhausted(ctx workflow.Context, loopCalls int) string {
	switch lim := r.Input.Limits; {
	case r.Steering.StopReason != "":
		return r.Steering.StopReason
	case r.Budget.TurnCalls+loopCalls >= lim.MaxToolCalls:
		return fmt.Sprintf("the run used its %d tool calls", lim.MaxToolCalls)
	case workflow.Now(ctx).Sub(r.Budget.TurnStart)-r.Budget.Waited >= lim.TimeBudget.Duration():
		return fmt.Sprintf("the run used its time budget of %s", lim.TimeBudget)
	}
	return ""
}
