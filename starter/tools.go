package main

import (
	"context"
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"github.com/secops-agent/investigator/internal/termtext"
	"github.com/secops-agent/investigator/investigation"
	"github.com/secops-agent/investigator/tools"
)

func (a *app) toolsCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "tools",
		Short: "List the worker's tools, which are enabled, and why a tool is disabled",
		Long: `Asks a running worker (through a short ToolCatalog workflow) which tools it
offers. A threat-intelligence tool is enabled when its API key is set in the
worker's environment: OTX_API_KEY, URLSCAN_API_KEY, VIRUSTOTAL_API_KEY,
ABUSEIPDB_API_KEY.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.dial()
			if err != nil {
				return err
			}
			defer c.Close()
			ctx, cancel := context.WithTimeout(cmd.Context(), 20*time.Second)
			defer cancel()
			run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
				ID:                       "tool-catalog-" + time.Now().UTC().Format("20060102-150405.000"),
				TaskQueue:                a.temporal.TaskQueue,
				WorkflowExecutionTimeout: time.Minute,
				StaticSummary:            "list the worker's tools",
			}, investigation.CatalogWorkflowName)
			if err != nil {
				return fmt.Errorf("ask the worker for its tools: %w", err)
			}
			var statuses []tools.Status
			if err := run.Get(ctx, &statuses); err != nil {
				if errors.Is(ctx.Err(), context.DeadlineExceeded) {
					return fmt.Errorf("no worker answered on task queue %q within 20s: is the worker running?", a.temporal.TaskQueue)
				}
				return fmt.Errorf("list tools: %s", failureMessage(err))
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 2, 4, 2, ' ', 0)
			fmt.Fprintln(w, "TOOL\tSTATUS\tDETAILS")
			for _, s := range statuses {
				if s.Enabled {
					fmt.Fprintf(w, "%s\tenabled\t%s\n", termtext.Line(s.Name), clip(termtext.Line(s.Description), 90))
				} else {
					fmt.Fprintf(w, "%s\tdisabled\t%s\n", termtext.Line(s.Name), termtext.Line(s.Reason))
				}
			}
			return w.Flush()
		},
	}
}
