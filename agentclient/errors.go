package agentclient

import (
	"errors"
	"strings"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/temporal"
)

// IsNotFound says Temporal knows no such workflow or run.
func IsNotFound(err error) bool {
	var nf *serviceerror.NotFound
	return errors.As(err, &nf)
}

// FailureMessage returns the one-sentence reason of a failed workflow.
func FailureMessage(err error) string {
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		return app.Message()
	}
	var te *temporal.TimeoutError
	if errors.As(err, &te) {
		return "it timed out"
	}
	var ce *temporal.CanceledError
	if errors.As(err, &ce) {
		return "it was cancelled"
	}
	var term *temporal.TerminatedError
	if errors.As(err, &term) {
		return "it was terminated"
	}
	return err.Error()
}

// statusWords name workflow statuses for people.
var statusWords = map[enums.WorkflowExecutionStatus]string{
	enums.WORKFLOW_EXECUTION_STATUS_RUNNING:          "running",
	enums.WORKFLOW_EXECUTION_STATUS_COMPLETED:        "completed",
	enums.WORKFLOW_EXECUTION_STATUS_FAILED:           "failed",
	enums.WORKFLOW_EXECUTION_STATUS_CANCELED:         "cancelled",
	enums.WORKFLOW_EXECUTION_STATUS_TERMINATED:       "terminated",
	enums.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW: "continued as new",
	enums.WORKFLOW_EXECUTION_STATUS_TIMED_OUT:        "timed out",
	enums.WORKFLOW_EXECUTION_STATUS_PAUSED:           "paused",
}

// statusWord is a workflow status in lower case: "completed", "timed out".
func statusWord(st enums.WorkflowExecutionStatus) string {
	if w, ok := statusWords[st]; ok {
		return w
	}
	return strings.ToLower(st.String())
}
