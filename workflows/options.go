package workflows

import (
	"errors"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/secops-agent/investigator/internal/termtext"
)

// Activity time budgets. Retries are bounded by time (ScheduleToClose), not
// by a small attempt count, so a store or model outage shorter than the
// budget costs only the wait; non-retryable errors (a 401, bad input) still
// end at once. Every activity heartbeats, so a killed worker's attempt is
// retried within heartbeatTimeout.
const (
	heartbeatTimeout = 10 * time.Second // five heartbeats (activities.HeartbeatInterval)
	llmRetryBudget   = 20 * time.Minute
	toolRetryBudget  = time.Minute
	storeRetryBudget = 10 * time.Minute
	bestEffortBudget = 4 * time.Minute
)

// llmOptions are the activity options of a model call: activities turn
// 429/5xx into retryable errors that carry Retry-After as the next delay,
// and 400/401/403/404 into non-retryable ones.
func llmOptions(ctx workflow.Context, summary string) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		ScheduleToCloseTimeout: llmRetryBudget,
		// Two calls of up to the HTTP timeout (2 minutes) each: a structured
		// phase's re-ask (activities.callWindow). A dead worker is found by
		// the heartbeat, not by this bound.
		StartToCloseTimeout: 5 * time.Minute,
		HeartbeatTimeout:    heartbeatTimeout,
		Summary:             summary,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    2 * time.Second,
			BackoffCoefficient: 2,
			MaximumInterval:    time.Minute,
		},
	})
}

// bestEffortOptions are the activity options of a model call whose failure
// only costs what it would add (memory recall, introspection): a short
// budget, so a persistent failure never holds up the answer.
func bestEffortOptions(ctx workflow.Context, summary string) workflow.Context {
	ctx = llmOptions(ctx, summary)
	opts := workflow.GetActivityOptions(ctx)
	opts.ScheduleToCloseTimeout = bestEffortBudget
	// An attempt gets half the budget, so a failed one is retried once
	// (an attempt bound over the budget would never be retried).
	opts.StartToCloseTimeout = bestEffortBudget / 2
	return workflow.WithActivityOptions(ctx, opts)
}

// toolOptions are the activity options of a tool call that may run for up
// to attempt. A call that still fails when its budget is spent becomes an
// error result for the model.
func toolOptions(ctx workflow.Context, summary string, attempt time.Duration) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		ScheduleToCloseTimeout: toolRetryBudget + attempt,
		StartToCloseTimeout:    attempt,
		HeartbeatTimeout:       heartbeatTimeout,
		Summary:                termtext.NoLinksClipped(summary, 200),
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    time.Second,
			BackoffCoefficient: 2,
			MaximumInterval:    30 * time.Second,
		},
	})
}

// providerToolOptions are toolOptions for a call on a provider's queue
// (toolcall.Tool.TaskQueue), whose rate limit Temporal holds: in a burst a
// call waits there before it starts (VirusTotal's 4 a minute: the 13th
// call of a burst waits 3 minutes), and the wait counts against
// ScheduleToClose. So the call may take until the exchange's deadline
// (left, when that is later than toolOptions' bound): an attempt keeps its
// bound, and retries are bounded by count (providerAttempts) instead of by
// time. An activity's options are no part of the command replay matches
// (its ID and type are), so no recorded history needs a gate.
func providerToolOptions(ctx workflow.Context, summary string, attempt, left time.Duration) workflow.Context {
	ctx = toolOptions(ctx, summary, attempt)
	opts := workflow.GetActivityOptions(ctx)
	if left <= opts.ScheduleToCloseTimeout {
		return ctx // the deadline is nearer: the watch's timer cuts the call
	}
	retry := *opts.RetryPolicy
	retry.MaximumAttempts = providerAttempts
	opts.ScheduleToCloseTimeout, opts.RetryPolicy = left, &retry
	return workflow.WithActivityOptions(ctx, opts)
}

// providerAttempts bounds the attempts of a provider call that may wait
// for the deadline: a provider that keeps failing is given up after about
// what toolRetryBudget allowed (backoff 1+2+4+8 s, the intel client's 30 s
// per request), not when the exchange's time runs out.
const providerAttempts = 5

// once makes the context's activity a single attempt: an action (a call of
// an acting tool) runs at most once per approval, since a retry after the
// server acted, or after a lost worker, would act again unapproved. An
// activity's options are no part of the command replay matches: no gate.
func once(ctx workflow.Context) workflow.Context {
	opts := workflow.GetActivityOptions(ctx)
	retry := temporal.RetryPolicy{}
	if opts.RetryPolicy != nil {
		retry = *opts.RetryPolicy
	}
	retry.MaximumAttempts = 1
	opts.RetryPolicy = &retry
	return workflow.WithActivityOptions(ctx, opts)
}

// localToolOptions are toolOptions for a quick tool (toolcall.LocalActivity),
// run as a local activity: the same time budget, attempt bound and retries.
func localToolOptions(ctx workflow.Context, summary string, attempt time.Duration) workflow.Context {
	return workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		ScheduleToCloseTimeout: toolRetryBudget + attempt,
		StartToCloseTimeout:    attempt,
		Summary:                termtext.NoLinksClipped(summary, 200),
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    time.Second,
			BackoffCoefficient: 2,
			MaximumInterval:    30 * time.Second,
		},
	})
}

// localToolAttempt bounds one attempt of a local tool: a read of the
// product's own store, which answers in milliseconds; a longer one would
// hold the workflow task.
const localToolAttempt = 10 * time.Second

// onQueue runs the context's activities on taskQueue ("" keeps the
// workflow's own).
func onQueue(ctx workflow.Context, taskQueue string) workflow.Context {
	if taskQueue == "" {
		return ctx
	}
	opts := workflow.GetActivityOptions(ctx)
	opts.TaskQueue = taskQueue
	return workflow.WithActivityOptions(ctx, opts)
}

// storeOptions are the activity options of a Firestore write.
func storeOptions(ctx workflow.Context, summary string) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		ScheduleToCloseTimeout: storeRetryBudget,
		StartToCloseTimeout:    time.Minute,
		HeartbeatTimeout:       heartbeatTimeout,
		Summary:                summary,
		RetryPolicy:            &temporal.RetryPolicy{InitialInterval: time.Second, MaximumInterval: 30 * time.Second},
	})
}

// failure ends the investigation with one clear sentence built from the
// innermost application error.
func failure(what string, err error) error {
	return temporal.NewNonRetryableApplicationError(what+": "+message(err), ErrInvestigationFailed, nil)
}

// message returns the most specific human message in an activity error chain.
func message(err error) string {
	var app *temporal.ApplicationError
	if errors.As(err, &app) && app.Message() != "" {
		return app.Message()
	}
	var to *temporal.TimeoutError
	if errors.As(err, &to) {
		return "timed out (" + to.TimeoutType().String() + ")"
	}
	return err.Error()
}

// wait blocks until cond holds, the timeout passes or ctx is cancelled. Its
// timer carries summary (the Web UI shows what the workflow waits for) and
// is cancelled as soon as the wait ends, so no timer outlives its wait. It
// reports whether cond held.
func wait(ctx workflow.Context, timeout time.Duration, summary string, cond func() bool) (bool, error) {
	if cond() {
		return true, nil
	}
	timerCtx, cancel := workflow.WithCancel(ctx)
	defer cancel()
	timer := workflow.NewTimerWithOptions(timerCtx, timeout, workflow.TimerOptions{Summary: summary})
	if err := workflow.Await(ctx, func() bool { return cond() || timer.IsReady() }); err != nil {
		return false, err
	}
	return cond(), nil
}
