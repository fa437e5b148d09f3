package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/secops-agent/investigator/investigation"
)

func (a *app) treeCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "tree WORKFLOW_ID",
		Short: "Show an investigation's run tree: its BigQuery sub-agent runs with their requests, status and links",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.temporal.Dial(a.logger())
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

// printTree prints a run (its first line after branch, the others after
// guide) and, below it, every child workflow it started.
func (a *app) printTree(ctx context.Context, c client.Client, w io.Writer, id, branch, guide, request string) error {
	desc, err := c.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		return fmt.Errorf("describe workflow %s: %w", id, err)
	}
	info := desc.WorkflowExecutionInfo
	status := strings.TrimPrefix(info.GetStatus().String(), "WORKFLOW_EXECUTION_STATUS_")
	fmt.Fprintf(w, "%s%s  %s  [%s]\n", branch, info.GetType().GetName(), id, status)
	if request != "" {
		fmt.Fprintf(w, "%s   request: %s\n", guide, request)
	}
	fmt.Fprintf(w, "%s   run %s\n%s   %s\n", guide, info.GetExecution().GetRunId(), guide, a.temporal.WorkflowURL(id))
	children, err := childrenOf(ctx, c, id)
	if err != nil {
		return err
	}
	for i, ch := range children {
		b, g := "├─ ", "│  "
		if i == len(children)-1 {
			b, g = "└─ ", "   "
		}
		if err := a.printTree(ctx, c, w, ch.id, guide+b, guide+g, ch.request); err != nil {
			return err
		}
	}
	return nil
}

// childrenOf reads the child workflows a run started from its history.
func childrenOf(ctx context.Context, c client.Client, id string) ([]child, error) {
	it := c.GetWorkflowHistory(ctx, id, "", false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var out []child
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			return nil, fmt.Errorf("read the history of %s: %w", id, err)
		}
		if at := e.GetStartChildWorkflowExecutionInitiatedEventAttributes(); at != nil {
			ch := child{id: at.GetWorkflowId()}
			var req investigation.BigQueryRequest
			if p := at.GetInput().GetPayloads(); len(p) > 0 && json.Unmarshal(p[0].GetData(), &req) == nil {
				ch.request = req.Request
			}
			out = append(out, ch)
		}
	}
	return out, nil
}
