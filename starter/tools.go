package main

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/secops-agent/investigator/agentclient"
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
VIRUSTOTAL_API_KEY, ABUSEIPDB_API_KEY. With --mcp-config on the worker, each
MCP server is listed with its state (connected, failed and why) and its
tools as server.tool; a tool marked "acts" waits for the analyst's approval
of each call (starter approve-call / deny-call), and "server claims
read-only" is the server's own word, which never waives that approval
(only the worker's read_only configuration does). An MCP tool's details
are what its server says it does.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.withClient(func(c *agentclient.Client) error {
				cat, err := c.Catalog(cmd.Context())
				if err != nil {
					return err
				}
				if err := writeTools(cmd.OutOrStdout(), cat.Tools); err != nil {
					return err
				}
				if len(cat.MCP) > 0 {
					fmt.Fprintln(cmd.OutOrStdout())
					w := tabwriter.NewWriter(cmd.OutOrStdout(), 2, 4, 2, ' ', 0)
					fmt.Fprintln(w, "MCP SERVER\tTRANSPORT\tSTATE\tDETAILS")
					for _, s := range cat.MCP {
						details := fmt.Sprintf("%d tools", s.Tools)
						if s.Skipped > 0 {
							details += fmt.Sprintf(", %d skipped (see the tools above)", s.Skipped)
						}
						if s.Error != "" {
							details = s.Error
						}
						fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", termtext.Line(s.Name), termtext.Line(s.Transport), termtext.Line(s.State), clip.String(termtext.Line(details), 200))
					}
					if err := w.Flush(); err != nil {
						return err
					}
				}
				if line := modelLine(cat.Model); line != "" {
					fmt.Fprintf(cmd.OutOrStdout(), "\n%s\n", line)
				}
				return nil
			})
		},
	}
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

// writeTools lists the tools as a table. The product's own words about a
// tool (enabled, acts and waits for approval, what its server claims) are
// the STATUS column, never part of DETAILS, which is cut: an MCP tool's
// DETAILS are its server's words, labelled as such.
func writeTools(out io.Writer, ts []investigation.ToolStatus) error {
	w := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(w, "TOOL\tSTATUS\tDETAILS")
	for _, s := range ts {
		if !s.Enabled {
			fmt.Fprintf(w, "%s\tdisabled\t%s\n", termtext.Line(s.Name), termtext.Line(s.Reason))
			continue
		}
		status := "enabled"
		if s.Acts {
			status = "enabled, acts (approval)"
		}
		if s.ClaimsReadOnly {
			status += ", server claims read-only"
		}
		details := s.Description
		if s.Says != "" {
			details = "server says: " + s.Says
		}
		fmt.Fprintf(w, "%s\t%s\t%s\n", termtext.Line(s.Name), status, clip.String(termtext.Line(details), 90))
	}
	return w.Flush()
}
