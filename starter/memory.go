package main

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/secops-agent/investigator/activities/bigquery/memory"
	"github.com/secops-agent/investigator/agentclient"
	"github.com/secops-agent/investigator/internal/clip"
	"github.com/secops-agent/investigator/internal/termtext"
)

func (a *app) memoryCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "memory", Short: "List, show and delete the BigQuery sub-agent's memories"}
	open := func(cmd *cobra.Command) (*memory.Store, func(), error) {
		fs, err := a.firestore.Client(cmd.Context())
		if err != nil {
			return nil, nil, err
		}
		return memory.NewStore(fs), func() { fs.Close() }, nil
	}
	var limit int
	list := &cobra.Command{
		Use:   "list",
		Short: "List memories, highest score first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, done, err := open(cmd)
			if err != nil {
				return err
			}
			defer done()
			var ms []memory.Memory
			if err := a.firestoreCall(cmd.Context(), func(ctx context.Context) (err error) {
				ms, err = s.List(ctx, limit)
				return err
			}); err != nil {
				return err
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 2, 4, 2, ' ', 0)
			fmt.Fprintln(w, "ID\tSCORE\tUPDATED\tCLAIM")
			for _, m := range ms {
				fmt.Fprintf(w, "%s\t%d\t%s\t%s\n", m.ID, m.Score, m.UpdatedAt.UTC().Format(time.DateTime), clip.String(termtext.Line(m.Claim), 100))
			}
			return w.Flush()
		},
	}
	list.Flags().IntVar(&limit, "limit", 100, "most memories to list")
	cmd.AddCommand(list, &cobra.Command{
		Use:   "show ID",
		Short: "Show one memory as JSON (without its embedding)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, done, err := open(cmd)
			if err != nil {
				return err
			}
			defer done()
			var m memory.Memory
			if err := a.firestoreCall(cmd.Context(), func(ctx context.Context) (err error) {
				m, err = s.Get(ctx, args[0])
				return err
			}); err != nil {
				return err
			}
			return agentclient.WriteJSON(cmd.OutOrStdout(), m)
		},
	}, &cobra.Command{
		Use:   "delete ID",
		Short: "Delete one memory",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, done, err := open(cmd)
			if err != nil {
				return err
			}
			defer done()
			if err := a.firestoreCall(cmd.Context(), func(ctx context.Context) error { return s.Delete(ctx, args[0]) }); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "deleted %s\n", args[0])
			return nil
		},
	})
	return cmd
}
