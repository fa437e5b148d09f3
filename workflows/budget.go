package workflows

import (
	"errors"
	"slices"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/secops-agent/investigator/activities"
	"github.com/secops-agent/investigator/investigation"
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
		return activities.ToolCallsReason(lim.MaxToolCalls)
	case !workflow.Now(ctx).Before(r.budgetDeadline(ctx)):
		return activities.TimeBudgetReason(lim.TimeBudget)
	}
	return ""
}

// scanLeft is what the investigation may still scan in BigQuery, as
// tools.CallInfo.ScanBytesLeft has it: 0 for no limit, negative when none
// is left.
func (r *run) scanLeft() int64 {
	return bytesLeft(r.Input.Limits.MaxScanBytes, r.ScannedBytes)
}

// lendScan is the scan budget a sub-agent started by step may use, as
// tools.CallInfo.ScanBytesLeft has it: what is left and not lent to the
// sub-agents still running, shared evenly with those that may still ask
// for some: the later bigquery_agent calls of its turn (siblings), and the
// other running steps that may call bigquery_agent and have no sub-agent
// running. What runs together can then never scan more than the budget
// between them. The loan ends when the call finishes (stepHost.callDone).
func (r *run) lendScan(step, key string, siblings int) int64 {
	sharers := 1 + siblings
	for _, s := range r.Plan.WithStatus(plan.Running) {
		if s.ID != step && r.loans.of(s.ID) == 0 && (s.Tools == nil || slices.Contains(s.Tools, toolcall.BigQueryAgent)) {
			sharers++
		}
	}
	return r.loans.lend(key, step, r.scanLeft(), sharers)
}

// loans is the scan budget lent to calls still running (sub-agents, or a
// sub-agent's queries), by call key. It lives in one run: nothing is lent
// across continue-as-new, which happens between exchanges.
type loans struct {
	byKey  map[string]loan
	total  int64
	byStep map[string]int // loans out, by the step that took them
}

type loan struct {
	step  string
	bytes int64
}

// lend lends the call key its share of left (a budget as
// tools.CallInfo.ScanBytesLeft has it) less what is already lent, divided
// among sharers; it returns the loan, as ScanBytesLeft has it too: left
// itself when there is no budget (0) or none left (-1), and -1 when all
// that is left is lent.
func (l *loans) lend(key, step string, left int64, sharers int) int64 {
	if left <= 0 {
		return left
	}
	n := (left - l.total) / int64(max(sharers, 1))
	if n <= 0 {
		return -1
	}
	if l.byKey == nil {
		l.byKey, l.byStep = map[string]loan{}, map[string]int{}
	}
	l.byKey[key] = loan{step: step, bytes: n}
	l.total += n
	l.byStep[step]++
	return n
}

// end ends the loan of the call key, if it had one, and returns what was
// lent (0 if nothing).
func (l *loans) end(key string) int64 {
	ln, ok := l.byKey[key]
	if !ok {
		return 0
	}
	l.total -= ln.bytes
	l.byStep[ln.step]--
	delete(l.byKey, key)
	return ln.bytes
}

// billedUsage is what a model activity was billed for: its result's usage,
// or, when it failed for good, what every attempt was billed for, which the
// failure carries (the Heartbeats interceptor puts it in the last attempt's
// error details; a timed-out attempt's last heartbeat holds it).
//
// No gate: no investigation branch reads usage (the budgets count calls,
// bytes and time); it rides in results, queries, the stored progress and the
// admission's signals, whose payloads replay does not compare. The admission
// does price it, and a split by model only under a gate (Room.charge).
func billedUsage(u investigation.Usage, err error) investigation.Usage {
	if err == nil {
		return u
	}
	var failed investigation.Usage
	var to *temporal.TimeoutError
	if errors.As(err, &to) && to.HasLastHeartbeatDetails() && to.LastHeartbeatDetails(&failed) == nil {
		return failed
	}
	var app *temporal.ApplicationError
	if errors.As(err, &app) && app.HasDetails() && app.Details(&failed) == nil {
		return failed
	}
	return investigation.Usage{}
}

// chargesFailedChildren says a sub-agent that returned no result is charged
// its whole loan (stepHost.callDone). Asked only when such a sub-agent ends:
// histories recorded before charged it nothing, and a later bigquery_agent
// call they started would now be refused for the spent budget.
func chargesFailedChildren(ctx workflow.Context) bool {
	return workflow.GetVersion(ctx, "failed-child-charged", workflow.DefaultVersion, 1) == 1
}

// of counts the loans out to step.
func (l *loans) of(step string) int { return l.byStep[step] }

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
