package agentclient

import (
	"context"
	"fmt"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/secops-agent/investigator/investigation"
)

// stream is what following an investigation needs from Temporal; the
// follower only talks to it, so tests give it a fake.
type stream interface {
	// describe returns a workflow's run: the latest one when runID is "".
	describe(ctx context.Context, workflowID, runID string) (execution, error)
	// events returns the progress events of one run after event number after.
	events(ctx context.Context, workflowID, runID string, after int) ([]investigation.Event, error)
	// nextRun returns the run that a closed run continued as.
	nextRun(ctx context.Context, workflowID, runID string) (string, error)
	// outcome returns a closed run's result or its failure.
	outcome(ctx context.Context, workflowID, runID string) (investigation.Result, error)
	// status queries the investigation's status (latest run).
	status(ctx context.Context, workflowID string) (investigation.Status, error)
	// taskFailure returns the message of the run's last failed workflow
	// task when no task completed after it, or "".
	taskFailure(ctx context.Context, workflowID, runID string) (string, error)
}

// execution is a workflow run as DescribeWorkflowExecution reports it.
type execution struct {
	runID, firstRunID string
	status            enums.WorkflowExecutionStatus
	// historyLength grows as the run records anything, its progress
	// writes included (a follower's hint that its listener missed some).
	historyLength int64
	// memoSession is the session the memo names (memoSession), unchecked.
	memoSession string
}

// session is where the investigation's progress is stored: the session its
// memo names when it is this workflow's (investigation.SessionOf), else the
// workflow ID, as for every investigation not started by the intake.
func (e execution) session(id string) string { return investigation.SessionOf(id, e.memoSession) }

// closed says the run ended for good: a run that continued as new lives on
// in its next run.
func (e execution) closed() bool {
	switch e.status {
	case enums.WORKFLOW_EXECUTION_STATUS_RUNNING, enums.WORKFLOW_EXECUTION_STATUS_UNSPECIFIED, enums.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW:
		return false
	}
	return true
}

// temporalStream is the stream of a real Temporal client; dc decodes memos.
type temporalStream struct {
	c  client.Client
	dc converter.DataConverter
}

func (t temporalStream) describe(ctx context.Context, id, runID string) (execution, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := t.c.DescribeWorkflowExecution(ctx, id, runID)
	if err != nil {
		return execution{}, err
	}
	info := resp.GetWorkflowExecutionInfo()
	var session string
	if p := info.GetMemo().GetFields()[memoSession]; p != nil && t.dc != nil {
		_ = t.dc.FromPayload(p, &session) // unreadable: the workflow ID
	}
	return execution{runID: info.GetExecution().GetRunId(), firstRunID: info.GetFirstRunId(), status: info.GetStatus(), historyLength: info.GetHistoryLength(),
		memoSession: session}, nil
}

func (t temporalStream) events(ctx context.Context, id, runID string, after int) ([]investigation.Event, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	v, err := t.c.QueryWorkflow(ctx, id, runID, investigation.ProgressQuery, after)
	if err != nil {
		return nil, err
	}
	var events []investigation.Event
	if err := v.Get(&events); err != nil {
		return nil, err
	}
	return events, nil
}

func (t temporalStream) nextRun(ctx context.Context, id, runID string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	it := t.c.GetWorkflowHistory(ctx, id, runID, false, enums.HISTORY_EVENT_FILTER_TYPE_CLOSE_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			return "", err
		}
		if next := e.GetWorkflowExecutionContinuedAsNewEventAttributes().GetNewExecutionRunId(); next != "" {
			return next, nil
		}
	}
	return "", fmt.Errorf("run %s of %s did not continue as new", runID, id)
}

func (t temporalStream) outcome(ctx context.Context, id, runID string) (investigation.Result, error) {
	var res investigation.Result
	err := t.c.GetWorkflow(ctx, id, runID).Get(ctx, &res)
	return res, err
}

func (t temporalStream) status(ctx context.Context, id string) (investigation.Status, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var st investigation.Status
	v, err := t.c.QueryWorkflow(ctx, id, "", investigation.StatusQuery)
	if err != nil {
		return st, err
	}
	return st, v.Get(&st)
}

func (t temporalStream) taskFailure(ctx context.Context, id, runID string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	it := t.c.GetWorkflowHistory(ctx, id, runID, false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	msg := ""
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			return "", err
		}
		switch {
		case e.GetWorkflowTaskFailedEventAttributes() != nil:
			msg = e.GetWorkflowTaskFailedEventAttributes().GetFailure().GetMessage()
		case e.GetWorkflowTaskCompletedEventAttributes() != nil:
			msg = ""
		}
	}
	return msg, nil
}
