package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/secops-agent/investigator/investigation"
)

// ToolCatalog returns the tools of the worker that picks it up, enabled or
// not, and the model endpoint it calls. It backs `starter tools` and
// `starter eval`.
func ToolCatalog(ctx workflow.Context) (investigation.Catalog, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 10 * time.Second,
		Summary:             "describe tools",
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 3},
	})
	var out investigation.Catalog
	err := workflow.ExecuteActivity(ctx, a.DescribeTools).Get(ctx, &out)
	return out, err
}
