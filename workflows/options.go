package workflows

import (
	"errors"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/secops-agent/investigator/internal/clip"
)

// llmOptions are the activity options of a model call: retried with backoff
// (activities turn 429/5xx into retryable errors that carry Retry-After as
// the next delay, and 400/401/403/404 into non-retryable ones), and retried
// on another worker within 30 s when its worker dies (heartbeats).
func llmOptions(ctx workflow.Context, summary string) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 3 * time.Minute,
		HeartbeatTimeout:    30 * time.Second, // model calls heartbeat while they wait
		Summary:             summary,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    2 * time.Second,
			BackoffCoefficient: 2,
			MaximumInterval:    time.Minute,
			MaximumAttempts:    8,
		},
	})
}

// toolOptions are the activity options of a tool call.
func toolOptions(ctx workflow.Context, summary string) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 2 * time.Minute,
		Summary:             clip.String(summary, 200),
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    time.Second,
			BackoffCoefficient: 2,
			MaximumInterval:    30 * time.Second,
			MaximumAttempts:    4,
		},
	})
}

// storeOptions are the activity options of a Firestore write.
func storeOptions(ctx workflow.Context, summary string) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute,
		Summary:             summary,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, MaximumInterval: 30 * time.Second, MaximumAttempts: 5},
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
