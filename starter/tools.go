package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"github.com/secops-agent/investigator/internal/clip"
	"github.com/secops-agent/investigator/internal/termtext"
	"github.com/secops-agent/investigator/investigation"
)

func (a *app) toolsCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "tools",
		Short: "List the worker's tools, which are enabled, and why a tool is disabled",
		Long: `Asks a running worker (through a short ToolCatalog workflow) which tools it
offers and which model it calls. A threat-intelligence tool is enabled when
its API key is set in the worker's environment: OTX_API_KEY, URLSCAN_API_KEY,
VIRUSTOTAL_API_KEY, ABUSEIPDB_API_KEY.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.dial()
			if err != nil {
				return err
			}
			defer c.Close()
			cat, err := a.catalog(cmd.Context(), c)
			if err != nil {
				return err
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 2, 4, 2, ' ', 0)
			fmt.Fprintln(w, "TOOL\tSTATUS\tDETAILS")
			for _, s := range cat.Tools {
				if s.Enabled {
					fmt.Fprintf(w, "%s\tenabled\t%s\n", termtext.Line(s.Name), clip.String(termtext.Line(s.Description), 90))
				} else {
					fmt.Fprintf(w, "%s\tdisabled\t%s\n", termtext.Line(s.Name), termtext.Line(s.Reason))
				}
			}
			if err := w.Flush(); err != nil {
				return err
			}
			if line := modelLine(cat.Model); line != "" {
				fmt.Fprintf(cmd.OutOrStdout(), "\n%s\n", line)
			}
			return nil
		},
	}
}

// catalogTimeout bounds the ToolCatalog round trip: a worker answers it at once.
const catalogTimeout = 20 * time.Second

// catalog asks a worker for its tools and model through the ToolCatalog
// workflow. A worker from before the model was reported answers with the
// tools only (a JSON list); its Model is then empty.
func (a *app) catalog(ctx context.Context, c client.Client) (investigation.Catalog, error) {
	ctx, cancel := context.WithTimeout(ctx, catalogTimeout)
	defer cancel()
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                       "tool-catalog-" + time.Now().UTC().Format("20060102-150405.000000"),
		TaskQueue:                a.temporal.TaskQueue,
		WorkflowExecutionTimeout: time.Minute,
		StaticSummary:            "list the worker's tools",
	}, investigation.CatalogWorkflowName)
	if err != nil {
		return investigation.Catalog{}, fmt.Errorf("ask the worker for its tools: %w", err)
	}
	var raw json.RawMessage
	if err := run.Get(ctx, &raw); err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return investigation.Catalog{}, fmt.Errorf("no worker answered on task queue %q within %s: is the worker running?", a.temporal.TaskQueue, catalogTimeout)
		}
		return investigation.Catalog{}, fmt.Errorf("list tools: %s", failureMessage(err))
	}
	var cat investigation.Catalog
	if len(raw) > 0 && raw[0] == '[' {
		err = json.Unmarshal(raw, &cat.Tools)
	} else {
		err = json.Unmarshal(raw, &cat)
	}
	if err != nil {
		return investigation.Catalog{}, fmt.Errorf("the worker's tool catalog could not be read: %v", err)
	}
	return cat, nil
}

// modelLine says which model the worker calls, and warns when it is a local
// server such as the offline stand-in; "" when the worker did not say.
func modelLine(m investigation.ModelEndpoint) string {
	if m.Model == "" && m.BaseURL == "" {
		return ""
	}
	line := fmt.Sprintf("Model: %s (%s, %s)", m.Model, m.Backend, m.BaseURL)
	if m.Local {
		line += " — a local server, such as the offline Gemini stand-in: its answers are scripted"
	}
	return line
}
