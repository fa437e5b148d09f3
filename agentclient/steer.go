package agentclient

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/secops-agent/investigator/investigation"
)

// UpdateTimeout bounds how long a steering update waits for the
// investigation to confirm its input.
const UpdateTimeout = 30 * time.Second

// updateAttemptTimeout bounds one attempt of an update; a stuck attempt is
// retried under the same update ID until UpdateTimeout.
const updateAttemptTimeout = 8 * time.Second

// maxTaskFailures is how often an update is sent again after the workflow
// task that took it failed.
const maxTaskFailures = 5

// Steer sends the update name (investigation.UpdateHint, UpdateAsk, ...)
// with its arguments and waits until the investigation recorded it; noun
// names the input in messages ("hint", "question"). Every attempt carries
// the same update ID, so the server records the input once however often
// it is retried (it admits only a few updates per workflow at a time, and
// a burst of them can leave one unconfirmed). Errors are one sentence.
func (c *Client) Steer(ctx context.Context, id, name, noun string, args ...any) (investigation.Ack, error) {
	uctx, cancel := context.WithTimeout(ctx, UpdateTimeout)
	defer cancel()
	updateID := fmt.Sprintf("%s-%d", name, time.Now().UnixNano())
	var ack investigation.Ack
	taskFailures := 0
	for {
		actx, acancel := context.WithTimeout(uctx, updateAttemptTimeout)
		h, err := c.tc.UpdateWorkflow(actx, client.UpdateWorkflowOptions{
			UpdateID:     updateID,
			WorkflowID:   id,
			UpdateName:   name,
			Args:         args,
			WaitForStage: client.WorkflowUpdateStageCompleted,
		})
		if err == nil {
			err = h.Get(actx, &ack)
		}
		stuck := actx.Err() != nil && uctx.Err() == nil
		acancel()
		if err == nil {
			return ack, nil
		}
		code := status.Code(err)
		// The workflow task that took the update failed: a task that met
		// new events (a cancelled activity reporting as the update closes
		// the run) is retried by the server, and so is the update; one
		// that keeps failing is reported.
		var notReady *serviceerror.WorkflowNotReady
		taskFailed := errors.As(err, &notReady) && taskFailures < maxTaskFailures
		if taskFailed {
			taskFailures++
		}
		if !stuck && !taskFailed && code != codes.ResourceExhausted && code != codes.Unavailable || uctx.Err() != nil {
			return ack, c.steerError(ctx, uctx, id, name, noun, err)
		}
		select {
		case <-uctx.Done():
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// steerError turns a failed update into one sentence.
func (c *Client) steerError(ctx, uctx context.Context, id, name, noun string, err error) error {
	var timeout *client.WorkflowUpdateServiceTimeoutOrCanceledError
	var appErr *temporal.ApplicationError
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("interrupted before investigation %s confirmed the %s (it may still take it)", id, noun)
	case uctx.Err() != nil || errors.As(err, &timeout):
		return fmt.Errorf("investigation %s did not confirm the %s within %s: is a worker running on task queue %q?", id, noun, UpdateTimeout, c.cfg.TaskQueue)
	case IsNotFound(err):
		dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		d, derr := c.tc.DescribeWorkflowExecution(dctx, id, "")
		if derr == nil {
			if st := d.GetWorkflowExecutionInfo().GetStatus(); st != enums.WORKFLOW_EXECUTION_STATUS_RUNNING {
				return fmt.Errorf("investigation %s has ended (%s) and takes no more input", id, statusWord(st))
			}
			return fmt.Errorf("investigation %s did not take the %s: %s", id, noun, err)
		}
		return fmt.Errorf("no investigation with ID %s", id)
	case errors.As(err, &appErr):
		msg := appErr.Message()
		if strings.Contains(msg, "unknown update") {
			return fmt.Errorf("investigation %s does not take %s updates: it runs an older version of the workflow", id, name)
		}
		return fmt.Errorf("investigation %s refused the %s: %s", id, noun, msg)
	}
	return fmt.Errorf("send the %s to investigation %s: %v", noun, id, err)
}
