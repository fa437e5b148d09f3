package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/secops-agent/investigator/tools"
)

// ToolCatalog returns the tools of the worker that picks it up, enabled or
// not. It backs `starter tools`.
func ToolCatalog(ctx workflow.Context) ([]tools.Status, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 10 * time.Second,
		Summary:             "describe tools",
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 3},
	})
	var out []tools.Status
	err := workflow.ExecuteActivity(ctx, a.DescribeTools).Get(ctx, &out)
	return out, err
}
