package workflows

import (
	"fmt"
	"slices"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/secops-agent/investigator/plan"
	"github.com/secops-agent/investigator/toolcall"
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

// scanLoan is the scan budget one running sub-agent may use.
type scanLoan struct {
	step  string
	bytes int64
}

// lendScan is the scan budget a sub-agent started by step may use, as
// tools.CallInfo.ScanBytesLeft has it: what is left and not lent to the
// sub-agents still running, shared evenly with those that may still ask
// for some: the siblings of this call in its turn, and the other running
// steps that may call bigquery_agent and have no sub-agent running. What
// runs together can then never scan more than the budget between them. It
// is returned, whatever was scanned, when the call finishes (returnScan).
func (r *run) lendScan(ctx workflow.Context, step, key string, siblings int) int64 {
	left := r.scanLeft()
	if left <= 0 {
		return left // no budget (0), or none left (-1)
	}
	sharers := 1 + siblings
	for _, s := range r.Plan.WithStatus(plan.Running) {
		if s.ID != step && r.borrowers[s.ID] == 0 && (s.Tools == nil || slices.Contains(s.Tools, toolcall.BigQueryAgent)) {
			sharers++
		}
	}
	loan := (left - r.lentTotal) / int64(sharers)
	if loan <= 0 {
		return -1
	}
	if r.lent == nil {
		r.lent, r.borrowers = map[string]scanLoan{}, map[string]int{}
	}
	r.lent[key] = scanLoan{step: step, bytes: loan}
	r.lentTotal += loan
	r.borrowers[step]++
	workflow.GetLogger(ctx).Debug("scan budget lent", "key", key, "bytes", loan, "sharers", sharers)
	return loan
}

// returnScan ends the loan of the call key, if it had one.
func (r *run) returnScan(key string) {
	if l, ok := r.lent[key]; ok {
		r.lentTotal -= l.bytes
		r.borrowers[l.step]--
		delete(r.lent, key)
	}
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
