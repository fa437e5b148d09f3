package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/secops-agent/investigator/agentclient"
	"github.com/secops-agent/investigator/internal/termtext"
)

func (a *app) treeCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "tree WORKFLOW_ID",
		Short: "Show an investigation's run tree: its BigQuery sub-agent runs with their requests, status and links",
		Long: `Shows a workflow and, below it, the child workflows (BigQuery sub-agent runs)
it started, with their requests, status, run IDs and Web UI links. When the
workflow continued as new, the children of every run are listed, first run
first, under the run that started them. After a reset, the run the reset
ended is left out: the run it made holds its history up to the reset point.`,
		Args: idArgs("a workflow ID", 0, 0, ""),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withClient(func(c *agentclient.Client) error {
				root, err := c.Tree(cmd.Context(), args[0])
				if err != nil {
					return err
				}
				printTree(cmd.OutOrStdout(), c, root, "", "")
				return nil
			})
		},
	}
}

// printTree prints a workflow (its first line after branch, the others after
// guide) and, below it, every child workflow that any of its runs started.
func printTree(w io.Writer, c *agentclient.Client, n agentclient.Node, branch, guide string) {
	latest := n.Runs[len(n.Runs)-1].ID
	fmt.Fprintf(w, "%s%s  %s  [%s]\n", branch, n.Type, n.ID, n.Status)
	if n.Request != "" {
		fmt.Fprintf(w, "%s   request: %s\n", guide, termtext.Line(n.Request))
	}
	if len(n.Runs) == 1 {
		fmt.Fprintf(w, "%s   run %s\n", guide, latest)
	} else {
		fmt.Fprintf(w, "%s   %d runs (continued as new), latest %s\n", guide, len(n.Runs), latest)
	}
	fmt.Fprintf(w, "%s   %s\n", guide, c.WorkflowURL(n.ID))
	if len(n.Runs) == 1 {
		printChildren(w, c, n.Runs[0].Children, guide)
		return
	}
	for i, run := range n.Runs {
		b, g := branches(i, len(n.Runs))
		fmt.Fprintf(w, "%s%srun %d of %d: %s\n", guide, b, i+1, len(n.Runs), run.ID)
		printChildren(w, c, run.Children, guide+g)
	}
}

// printChildren prints the tree of every child workflow one run started.
func printChildren(w io.Writer, c *agentclient.Client, children []agentclient.Node, guide string) {
	for i, ch := range children {
		b, g := branches(i, len(children))
		printTree(w, c, ch, guide+b, guide+g)
	}
}

// branches returns the tree drawing in front of item i of n: for its first
// line and for the lines below it.
func branches(i, n int) (branch, guide string) {
	if i == n-1 {
		return "└─ ", "   "
	}
	return "├─ ", "│  "
}
