package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/workflow"
)

// exhausted says why the current exchange must answer now: the analyst's
// stop, the tool-call budget or the time budget (waiting for the analyst
// excluded); "" while it may go on.
func (r *run) exhausted(ctx workflow.Context) string {
	switch lim := r.Input.Limits; {
	case r.Steering.StopReason != "":
		return r.Steering.StopReason
	case r.Budget.TurnCalls >= lim.MaxToolCalls:
		return fmt.Sprintf("this exchange used its %d tool calls", lim.MaxToolCalls)
	case !workflow.Now(ctx).Before(r.budgetDeadline(ctx)):
		return fmt.Sprintf("this exchange used its time budget of %s", lim.TimeBudget)
	}
	return ""
}

// scanLeft is what the investigation may still scan in BigQuery, as
// tools.CallInfo.ScanBytesLeft has it: 0 for no limit, negative when none
// is left.
func (r *run) scanLeft() int64 {
	return bytesLeft(r.Input.Limits.MaxScanBytes, r.ScannedBytes)
}

// bytesLeft is what a scan budget of limit has left after used, as
// tools.CallInfo.ScanBytesLeft has it.
func bytesLeft(limit, used int64) int64 {
	switch {
	case limit <= 0:
		return 0
	case used >= limit:
		return -1
	}
	return limit - used
}

// budgetDeadline is when the exchange's time budget runs out if nothing
// more waits for the analyst; a wait that starts later moves it.
func (r *run) budgetDeadline(ctx workflow.Context) time.Time {
	waited := r.Budget.Waited
	if r.Budget.Waiting > 0 {
		waited += workflow.Now(ctx).Sub(r.Budget.WaitStart)
	}
	return r.Budget.TurnStart.Add(r.Input.Limits.TimeBudget.Duration() + waited)
}
