package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/secops-agent/investigator/agentclient"
)

func (a *app) cancelCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "cancel ID",
		Short: "Cancel an investigation: it ends as Canceled without a conclusion (starter stop concludes from what it found)",
		Args:  idArgs("an investigation ID", 0, 0, ""),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withClient(func(c *agentclient.Client) error {
				if err := c.Cancel(cmd.Context(), args[0]); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "cancellation requested: investigation %s records what it has, cancels its sub-agents and ends as Canceled\n", args[0])
				return nil
			})
		},
	}
}
