package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/secops-agent/investigator/investigation"
)

// pollInterval is how often a follower asks for new events (tests shorten it).
var pollInterval = 400 * time.Millisecond

// oldRunPatience is how many failed queries in a row a closed (continued as
// new) run gets before the watcher gives up on its remaining events.
const oldRunPatience = 25

func (a *app) watchCommand() *cobra.Command {
	var from int
	cmd := &cobra.Command{
		Use:   "watch ID",
		Short: "Follow an investigation's progress live, from its first event, across follow-ups and runs",
		Long: `Prints an investigation's progress events from the first one (or --from N)
as they happen: plan, steps, tool calls, insights, questions, hints,
conclusions, follow-up turns, and the events of its BigQuery sub-agent runs
(indented, prefixed [bigquery]). Attach at any time, from any terminal, as
often as you like: nothing is missed or printed twice, also when the
investigation continues as new. Stops when the investigation closes; Ctrl-C
stops watching, not the investigation, and prints the --from N that resumes
after the last event shown.`,
		Example: `  starter watch investigation-guardduty-3f9a1c0d2b4e-20250101-120000.000
  starter watch investigation-guardduty-3f9a1c0d2b4e-20250101-120000.000 --from 42`,
		Args: idArgs("an investigation ID", 0, 0, ""),
		RunE: func(cmd *cobra.Command, args []string) error {
			if from < 1 {
				return fmt.Errorf("--from must be 1 or more (the first event is 1), not %d", from)
			}
			c, err := a.dial()
			if err != nil {
				return err
			}
			defer c.Close()
			return a.watch(cmd.Context(), temporalStream{c}, cmd.OutOrStdout(), args[0], from)
		},
	}
	cmd.Flags().IntVar(&from, "from", 1, "first event to print (event numbers continue across runs)")
	return cmd
}

func (a *app) watch(ctx context.Context, src stream, out io.Writer, id string, from int) error {
	f := a.newFollower(src, id, out)
	f.seq = from - 1
	if err := f.start(ctx, false); err != nil {
		return err
	}
	fmt.Fprintf(out, "Watching investigation %s (Ctrl-C stops watching, not the investigation)\nWeb UI: %s\n\n", id, a.temporal.WorkflowURL(id))
	end, err := f.run(ctx)
	if err != nil {
		return err
	}
	switch end.how {
	case endInterrupted:
		f.stopped()
		return nil
	default:
		return closedLine(ctx, src, out, id, end)
	}
}

// closedLine prints the final status line of a closed investigation, or
// returns its failure as one sentence.
func closedLine(ctx context.Context, src stream, out io.Writer, id string, end followEnd) error {
	if end.status != enums.WORKFLOW_EXECUTION_STATUS_COMPLETED {
		_, err := src.outcome(ctx, id, end.runID)
		if err == nil {
			err = errors.New("it " + statusWord(end.status))
		}
		return fmt.Errorf("investigation %s failed: %s", id, failureMessage(err))
	}
	res, err := src.outcome(ctx, id, end.runID)
	if err != nil {
		fmt.Fprintf(out, "\ninvestigation %s completed\n", id)
		return nil
	}
	fmt.Fprintf(out, "\ninvestigation %s completed after %d tool calls and %d model calls (%d prompt + %d output tokens)\n",
		id, res.ToolCalls, res.Usage.Calls, res.Usage.PromptTokens, res.Usage.OutputTokens)
	return nil
}

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
}

// execution is a workflow run as DescribeWorkflowExecution reports it.
type execution struct {
	runID, firstRunID string
	status            enums.WorkflowExecutionStatus
}

// closed says the run ended for good: a run that continued as new lives on
// in its next run.
func (e execution) closed() bool {
	switch e.status {
	case enums.WORKFLOW_EXECUTION_STATUS_RUNNING, enums.WORKFLOW_EXECUTION_STATUS_UNSPECIFIED, enums.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW:
		return false
	}
	return true
}

// temporalStream is the stream of a real Temporal client.
type temporalStream struct{ c client.Client }

func (t temporalStream) describe(ctx context.Context, id, runID string) (execution, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := t.c.DescribeWorkflowExecution(ctx, id, runID)
	if err != nil {
		return execution{}, err
	}
	info := resp.GetWorkflowExecutionInfo()
	return execution{runID: info.GetExecution().GetRunId(), firstRunID: info.GetFirstRunId(), status: info.GetStatus()}, nil
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

func isNotFound(err error) bool {
	var nf *serviceerror.NotFound
	return errors.As(err, &nf)
}
