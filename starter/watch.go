package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/secops-agent/investigator/agentclient"
)

func (a *app) watchCommand() *cobra.Command {
	var from int
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "watch ID",
		Short: "Follow an investigation's progress live, from its first event, across follow-ups and runs",
		Long: `Prints an investigation's progress events from the first one (or --from N)
as they happen: plan, steps, tool calls, insights, questions, hints,
conclusions, follow-up turns, and the events of its BigQuery sub-agent runs
(indented, prefixed [bigquery]). Attach at any time, from any terminal, as
often as you like: nothing is missed or printed twice, also when the
investigation continues as new. Stops when the investigation closes; Ctrl-C
(exit code 130; SIGTERM: 143) stops watching, not the investigation, and
prints the --from N that resumes after the last event shown.

With --json, standard output holds one JSON object per line: each event as
the workflow recorded it (seq, kind, and the fields of its kind), then a
last line of kind "result" with the workflow's result. Sub-agent runs'
events are left out (watch a child by the ID its tool_call event names);
everything else goes to standard error.`,
		Example: `  starter watch investigation-guardduty-3f9a1c0d2b4e-20250101-120000.000
  starter watch investigation-guardduty-3f9a1c0d2b4e-20250101-120000.000 --from 42
  starter watch investigation-guardduty-3f9a1c0d2b4e-20250101-120000.000 --json | jq -r 'select(.kind == "insight") | .insights[]'`,
		Args: idArgs("an investigation ID", 0, 0, ""),
		RunE: func(cmd *cobra.Command, args []string) error {
			if from < 1 {
				return fmt.Errorf("--from must be 1 or more (the first event is 1), not %d", from)
			}
			return a.withClient(func(c *agentclient.Client) error {
				return c.Watch(cmd.Context(), a.renderer(cmd, args[0], asJSON), args[0], from)
			})
		},
	}
	cmd.Flags().IntVar(&from, "from", 1, "first event to print (event numbers continue across runs)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print each event, and the result last, as one JSON line")
	return cmd
}

// renderer is where a following command's output goes: lines for people on
// standard output, or with --json JSON lines there and the rest on standard
// error.
func (a *app) renderer(cmd *cobra.Command, id string, asJSON bool) agentclient.Renderer {
	if asJSON {
		return agentclient.NewJSONRenderer(cmd.OutOrStdout(), cmd.ErrOrStderr(), a.prices)
	}
	return agentclient.NewTextRenderer(cmd.OutOrStdout(), id, a.prices)
}

// info is where a following command's lines for people go: standard
// output, or standard error under --json, which keeps standard output for
// JSON.
func info(cmd *cobra.Command, asJSON bool) io.Writer {
	if asJSON {
		return cmd.ErrOrStderr()
	}
	return cmd.OutOrStdout()
}
