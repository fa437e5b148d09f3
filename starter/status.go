package main

import (
	"github.com/spf13/cobra"

	"github.com/secops-agent/investigator/agentclient"
)

func (a *app) statusCommand() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status ID",
		Short: "Show where an investigation stands: phase, plan, insights, hints, questions, follow-ups, usage",
		Args:  idArgs("an investigation ID", 0, 0, ""),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withClient(func(c *agentclient.Client) error {
				return c.ShowStatus(cmd.Context(), cmd.OutOrStdout(), args[0], asJSON)
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the status as JSON")
	return cmd
}
