package agentclient

import (
	"context"
	"fmt"

	"go.temporal.io/api/enums/v1"
)

// Cancel asks Temporal to cancel an investigation: unlike a stop, which
// concludes from what was found, the investigation records what it has,
// cancels its sub-agents and ends as Canceled, without a conclusion.
func (c *Client) Cancel(ctx context.Context, id string) error {
	var st enums.WorkflowExecutionStatus
	err := c.call(ctx, func(ctx context.Context) error {
		d, err := c.tc.DescribeWorkflowExecution(ctx, id, "")
		if err == nil {
			st = d.GetWorkflowExecutionInfo().GetStatus()
		}
		return err
	})
	switch {
	case IsNotFound(err):
		return fmt.Errorf("no investigation with ID %s", id)
	case err != nil:
		return fmt.Errorf("cancel investigation %s: %v", id, err)
	case st != enums.WORKFLOW_EXECUTION_STATUS_RUNNING:
		return fmt.Errorf("investigation %s has already ended (%s)", id, statusWord(st))
	}
	if err := c.call(ctx, func(ctx context.Context) error { return c.tc.CancelWorkflow(ctx, id, "") }); err != nil {
		return fmt.Errorf("cancel investigation %s: %v", id, err)
	}
	return nil
}
