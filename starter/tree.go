package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/secops-agent/investigator/internal/termtext"
)

func (a *app) treeCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "tree WORKFLOW_ID",
		Short: "Show an investigation's run tree: its BigQuery sub-agent runs with their requests, status and links",
		Long: `Shows a workflow and, below it, the child workflows (BigQuery sub-agent runs)
it started, with their requests, status, run IDs and Web UI links. When the
workflow continued as new, the children of every run are listed, first run
first, under the run that started them.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.dial()
			if err != nil {
				return err
			}
			defer c.Close()
			return a.printTree(cmd.Context(), c, cmd.OutOrStdout(), args[0], "", "", "")
		},
	}
}

// child is one child workflow started by a run, as its history records it.
type child struct {
	id, request string
}

// printTree prints a workflow (its first line after branch, the others after
// guide) and, below it, every child workflow that any of its runs started.
func (a *app) printTree(ctx context.Context, c client.Client, w io.Writer, id, branch, guide, request string) error {
	var desc *workflowservice.DescribeWorkflowExecutionResponse
	err := a.temporalCall(ctx, func(ctx context.Context) (err error) {
		desc, err = c.DescribeWorkflowExecution(ctx, id, "")
		return err
	})
	if isUnavailable(err) {
		return err
	}
	if err != nil {
		return fmt.Errorf("describe workflow %s: %w", id, err)
	}
	info := desc.WorkflowExecutionInfo
	latest := info.GetExecution().GetRunId()
	first := info.GetFirstRunId()
	if first == "" {
		first = latest
	}
	runs, err := extendRuns(ctx, temporalStream{c}, id, []string{first}, latest)
	if err != nil {
		return fmt.Errorf("find the runs of %s: %w", id, err)
	}
	status := strings.TrimPrefix(info.GetStatus().String(), "WORKFLOW_EXECUTION_STATUS_")
	fmt.Fprintf(w, "%s%s  %s  [%s]\n", branch, info.GetType().GetName(), id, status)
	if request != "" {
		fmt.Fprintf(w, "%s   request: %s\n", guide, termtext.Line(request))
	}
	if len(runs) == 1 {
		fmt.Fprintf(w, "%s   run %s\n", guide, latest)
	} else {
		fmt.Fprintf(w, "%s   %d runs (continued as new), latest %s\n", guide, len(runs), latest)
	}
	fmt.Fprintf(w, "%s   %s\n", guide, a.temporal.WorkflowURL(id))
	if len(runs) == 1 {
		return a.printChildren(ctx, c, w, id, latest, guide)
	}
	for i, run := range runs {
		b, g := branches(i, len(runs))
		fmt.Fprintf(w, "%s%srun %d of %d: %s\n", guide, b, i+1, len(runs), run)
		if err := a.printChildren(ctx, c, w, id, run, guide+g); err != nil {
			return err
		}
	}
	return nil
}

// printChildren prints the tree of every child workflow one run started.
func (a *app) printChildren(ctx context.Context, c client.Client, w io.Writer, id, runID, guide string) error {
	var children []child
	if err := a.temporalCall(ctx, func(ctx context.Context) (err error) {
		children, err = childrenOf(ctx, c, id, runID)
		return err
	}); err != nil {
		return err
	}
	for i, ch := range children {
		b, g := branches(i, len(children))
		if err := a.printTree(ctx, c, w, ch.id, guide+b, guide+g, ch.request); err != nil {
			return err
		}
	}
	return nil
}

// branches returns the tree drawing in front of item i of n: for its first
// line and for the lines below it.
func branches(i, n int) (branch, guide string) {
	if i == n-1 {
		return "└─ ", "   "
	}
	return "├─ ", "│  "
}

// childrenOf reads the child workflows a run started from its history.
func childrenOf(ctx context.Context, c client.Client, id, runID string) ([]child, error) {
	it := c.GetWorkflowHistory(ctx, id, runID, false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var out []child
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			return nil, fmt.Errorf("read the history of %s (run %s): %w", id, runID, err)
		}
		if at := e.GetStartChildWorkflowExecutionInitiatedEventAttributes(); at != nil {
			ch := child{id: at.GetWorkflowId()}
			var req struct {
				Request string `json:"request"`
			}
			if p := at.GetInput().GetPayloads(); len(p) > 0 && json.Unmarshal(p[0].GetData(), &req) == nil {
				ch.request = req.Request
			}
			out = append(out, ch)
		}
	}
	return out, nil
}
